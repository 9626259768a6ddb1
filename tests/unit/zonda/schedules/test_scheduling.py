"""The controller's pure "what runs next" decision, manual runs, and DagRun object names.

Nothing here travels in time: ``now`` is an argument. ``time_machine`` is used only to prove that the
real clock does not leak into decisions.
"""

from __future__ import annotations

import ast
import datetime as dt
import enum
import pathlib
import re

import pendulum
import pytest
import time_machine
from hypothesis import given, settings
from hypothesis import strategies as st
from pendulum import DateTime

from tests.paths import REPO_ROOT
from zonda.schedules.scheduling import (
    DueRun,
    NextRunDecision,
    catchup_backlog,
    dagrun_name,
    decide_next_run,
    manual_run,
)
from zonda.timetables import (
    CronDataIntervalTimetable,
    DataInterval,
    NullTimetable,
    OnceTimetable,
    Timetable,
    timetable_for_schedule,
)
from zonda.timetables import base as timetables_base


def utc(*args: int) -> DateTime:
    return pendulum.datetime(*args, tz="UTC")


DAILY = CronDataIntervalTimetable("0 0 * * *", "UTC")


def decide(
    timetable: Timetable = DAILY,
    *,
    last: DataInterval | None = None,
    start_date: dt.datetime | None = utc(2024, 1, 1),
    end_date: dt.datetime | None = None,
    catchup: bool = True,
    now: dt.datetime = utc(2024, 1, 1, 12),
) -> NextRunDecision:
    return decide_next_run(
        timetable,
        last_automated_data_interval=last,
        start_date=start_date,
        end_date=end_date,
        catchup=catchup,
        now=now,
    )


@pytest.mark.parametrize(
    ("kwargs", "due", "wake_at", "reason"),
    [
        pytest.param(
            {"now": utc(2024, 1, 2, 0, 0, 1)},
            DueRun(utc(2024, 1, 1), DataInterval(utc(2024, 1, 1), utc(2024, 1, 2)), utc(2024, 1, 2)),
            None,
            "is due since 2024-01-02T00:00:00Z",
            id="a run whose interval has ended is due",
        ),
        pytest.param(
            {"now": utc(2024, 1, 2)},
            DueRun(utc(2024, 1, 1), DataInterval(utc(2024, 1, 1), utc(2024, 1, 2)), utc(2024, 1, 2)),
            None,
            "is due",
            id="a run is due at exactly its run_after",
        ),
        pytest.param(
            {"now": utc(2024, 1, 1, 12)},
            None,
            utc(2024, 1, 2),
            "is due at 2024-01-02T00:00:00Z",
            id="before its interval ends the controller sleeps until then",
        ),
        pytest.param(
            {"timetable": NullTimetable()},
            None,
            None,
            "never schedules runs by itself",
            id="a manual-only DAG never wakes up",
        ),
        pytest.param(
            {"end_date": utc(2024, 1, 1), "last": DataInterval(utc(2024, 1, 1), utc(2024, 1, 2))},
            None,
            None,
            "end_date 2024-01-01T00:00:00Z reached",
            id="past end_date there are no more runs, and the reason says so",
        ),
        pytest.param(
            {"start_date": None},
            None,
            None,
            "needs a start_date",
            id="with catchup and no start_date there is nothing to schedule",
        ),
        pytest.param(
            {"timetable": OnceTimetable(), "last": DataInterval.exact(utc(2024, 1, 1))},
            None,
            None,
            "has no run after",
            id="a once timetable that has run has nothing more",
        ),
    ],
)
def test_decide_next_run(
    kwargs: dict[str, object], due: DueRun | None, wake_at: DateTime | None, reason: str
) -> None:
    decision = decide(**kwargs)  # type: ignore[arg-type]
    assert decision.due == due
    assert decision.wake_at == wake_at
    assert reason in decision.reason


def test_catchup_off_takes_the_latest_complete_interval_at_now() -> None:
    decision = decide(catchup=False, now=utc(2024, 3, 5, 7))
    assert decision.due == DueRun(
        utc(2024, 3, 4), DataInterval(utc(2024, 3, 4), utc(2024, 3, 5)), utc(2024, 3, 5)
    )


def test_decisions_are_in_utc_whatever_zone_the_inputs_use() -> None:
    berlin = CronDataIntervalTimetable("0 2 * * *", "Europe/Berlin")
    decision = decide(
        berlin,
        start_date=pendulum.datetime(2024, 3, 30, tz="Europe/Berlin"),
        now=pendulum.datetime(2024, 3, 31, 12, tz="America/New_York"),
    )
    assert decision.due is not None
    assert decision.due.run_after == pendulum.datetime(2024, 3, 31, 3, tz="Europe/Berlin")
    assert decision.due.run_after.timezone_name == "UTC"


def test_naive_datetimes_are_refused() -> None:
    with pytest.raises(ValueError, match="naive"):
        decide(now=dt.datetime(2024, 1, 1))


def test_the_real_clock_does_not_leak_into_decisions() -> None:
    expected = decide(catchup=False, now=utc(2024, 3, 5, 7))
    with time_machine.travel(dt.datetime(2031, 7, 1, tzinfo=dt.UTC), tick=False):
        assert decide(catchup=False, now=utc(2024, 3, 5, 7)) == expected


def test_the_clock_is_pinned_only_inside_the_block() -> None:
    with time_machine.travel(dt.datetime(2031, 7, 1, tzinfo=dt.UTC), tick=False):
        assert timetables_base.utcnow() == utc(2031, 7, 1)
        with timetables_base.pinned_clock(utc(2024, 1, 1)):
            assert timetables_base.utcnow() == utc(2024, 1, 1)
            with timetables_base.pinned_clock(pendulum.datetime(2020, 1, 1, tz="Asia/Kolkata")):
                assert timetables_base.utcnow() == utc(2019, 12, 31, 18, 30)
            assert timetables_base.utcnow() == utc(2024, 1, 1)
        assert timetables_base.utcnow() == utc(2031, 7, 1)


class _ClockReadingTimetable(Timetable):
    """A custom timetable that, like Airflow's own, asks the module clock for the time."""

    def next_dagrun_info(self, *, last_automated_data_interval, restriction):  # type: ignore[no-untyped-def]
        now = timetables_base.utcnow()
        return timetables_base.DagRunInfo.exact(now)


def test_custom_timetables_see_the_pinned_now() -> None:
    decision = decide(_ClockReadingTimetable(), now=utc(2024, 5, 5, 5))
    assert decision.due is not None and decision.due.run_after == utc(2024, 5, 5, 5)


def test_catchup_backlog_returns_missed_runs_in_order() -> None:
    runs, after = catchup_backlog(
        DAILY,
        last_automated_data_interval=None,
        start_date=utc(2024, 1, 1),
        end_date=None,
        catchup=True,
        now=utc(2024, 1, 4, 6),
        limit=10,
    )
    assert [run.logical_date for run in runs] == [utc(2024, 1, 1), utc(2024, 1, 2), utc(2024, 1, 3)]
    assert after.due is None and after.wake_at == utc(2024, 1, 5)


def test_catchup_backlog_stops_at_the_limit_and_says_what_is_next() -> None:
    runs, after = catchup_backlog(
        DAILY,
        last_automated_data_interval=None,
        start_date=utc(2024, 1, 1),
        end_date=None,
        catchup=True,
        now=utc(2024, 1, 4, 6),
        limit=2,
    )
    assert len(runs) == 2
    assert after.due is not None and after.due.logical_date == utc(2024, 1, 3)


class _StuckTimetable(Timetable):
    def next_dagrun_info(self, *, last_automated_data_interval, restriction):  # type: ignore[no-untyped-def]
        interval = last_automated_data_interval or DataInterval(utc(2024, 1, 1), utc(2024, 1, 2))
        return timetables_base.DagRunInfo.interval(*interval)


def test_a_timetable_that_repeats_the_last_interval_creates_nothing() -> None:
    decision = decide(
        _StuckTimetable(), last=DataInterval(utc(2024, 1, 1), utc(2024, 1, 2)), now=utc(2024, 2, 1)
    )
    assert decision.due is None and decision.wake_at is None and "again" in decision.reason


@pytest.mark.parametrize(
    ("start", "last"),
    [
        pytest.param(utc(9999, 12, 31, 23, 59, 59), None, id="a start date in the last second of year 9999"),
        pytest.param(
            utc(2024, 1, 1), DataInterval(utc(9999, 12, 30), utc(9999, 12, 31)), id="after the last day"
        ),
    ],
)
def test_no_run_after_year_9999_is_said_not_raised(start: DateTime, last: DataInterval | None) -> None:
    """Found by the manifest fuzzer: a DAG starting in 9999 raised OverflowError on every pass."""
    decision = decide(start_date=start, last=last, now=utc(2026, 1, 1))
    assert decision.due is None and decision.wake_at is None
    assert decision.reason.endswith("the next would be past year 9999"), decision.reason


def test_catchup_backlog_survives_a_timetable_that_repeats_itself() -> None:
    runs, after = catchup_backlog(
        _StuckTimetable(),
        last_automated_data_interval=None,
        start_date=utc(2024, 1, 1),
        end_date=None,
        catchup=True,
        now=utc(2024, 2, 1),
        limit=100,
    )
    assert len(runs) == 1 and "again" in after.reason


def test_manual_run_has_its_trigger_time_as_logical_date() -> None:
    run = manual_run(DAILY, run_after=pendulum.datetime(2024, 1, 25, 1, tz="UTC"))
    assert run == DueRun(
        logical_date=utc(2024, 1, 25, 1),
        data_interval=DataInterval(utc(2024, 1, 24), utc(2024, 1, 25)),
        run_after=utc(2024, 1, 25, 1),
    )


def test_manual_run_for_a_manual_only_dag_is_an_exact_interval() -> None:
    run = manual_run(timetable_for_schedule(None, "UTC"), run_after=utc(2024, 1, 25, 1))
    assert run.data_interval == DataInterval.exact(utc(2024, 1, 25, 1))


def test_catchup_backlog_honours_the_timetables_active_runs_limit() -> None:
    runs, after = catchup_backlog(
        timetable_for_schedule("@continuous", "UTC"),
        last_automated_data_interval=None,
        start_date=utc(2024, 1, 1),
        end_date=None,
        catchup=True,
        now=utc(2024, 1, 4, 6),
        limit=10,
    )
    assert [run.data_interval for run in runs] == [DataInterval(utc(2024, 1, 1), utc(2024, 1, 4, 6))]
    assert after.due is not None


# -- Names ---------------------------------------------------------------------------------------------------


class RunType(enum.StrEnum):
    SCHEDULED = "scheduled"
    DATASET_TRIGGERED = "dataset_triggered"


DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


@pytest.mark.parametrize(
    ("dag", "when", "run_type", "expected"),
    [
        pytest.param(
            "mydag", utc(2026, 1, 1), "scheduled", "mydag-scheduled-20260101t000000z", id="the plain form"
        ),
        pytest.param(
            "mydag",
            pendulum.datetime(2026, 1, 1, 1, tz="Europe/Berlin"),
            RunType.SCHEDULED,
            "mydag-scheduled-20260101t000000z",
            id="the timestamp is UTC and a run type enum gives its value",
        ),
        pytest.param(
            "mydag",
            utc(2026, 1, 1, 0, 0, 0, 250),
            "manual",
            "mydag-manual-20260101t000000000250z",
            id="microseconds keep two manual runs in one second apart",
        ),
        pytest.param(
            "etl",
            utc(2026, 1, 1),
            RunType.DATASET_TRIGGERED,
            "etl-dataset-triggered-20260101t000000z",
            id="underscores in the run type become dashes",
        ),
        pytest.param(
            "My_DAG",
            utc(2026, 1, 1),
            "scheduled",
            "my-dag-fec1e61d-scheduled-20260101t000000z",
            id="a DAG name that had to change gets a hash of the original (sha256, 8 hex digits)",
        ),
    ],
)
def test_dagrun_name(dag: str, when: DateTime, run_type: str, expected: str) -> None:
    assert dagrun_name(dag, when, run_type) == expected


def test_a_long_dag_name_is_cut_with_a_stable_hash() -> None:
    long_a, long_b = "a" * 300, "a" * 299 + "b"
    name_a = dagrun_name(long_a, utc(2026, 1, 1), "scheduled")
    assert len(name_a) <= 253 and DNS1123_SUBDOMAIN.match(name_a)
    assert name_a == dagrun_name(long_a, utc(2026, 1, 1), "scheduled")
    assert name_a != dagrun_name(long_b, utc(2026, 1, 1), "scheduled")
    assert len(dagrun_name(long_a, utc(2026, 1, 1), "scheduled", max_length=63)) <= 63


@settings(max_examples=200, deadline=None)
@given(
    dag=st.text(min_size=1, max_size=300),
    run_type=st.sampled_from(["scheduled", "manual", "backfill", "dataset_triggered"]),
    when=st.datetimes(timezones=st.just(dt.UTC)),
    max_length=st.sampled_from([63, 253]),
)
def test_dagrun_names_are_always_valid_kubernetes_names(
    dag: str, run_type: str, when: dt.datetime, max_length: int
) -> None:
    name = dagrun_name(dag, when, run_type, max_length=max_length)
    assert len(name) <= max_length and DNS1123_SUBDOMAIN.match(name)
    assert name == dagrun_name(dag, when, run_type, max_length=max_length)


# -- Purity of the domain modules this file covers ---------------------------------------------------------

REPO = REPO_ROOT
DOMAIN_FILES = [
    *sorted((REPO / "zonda/timetables").glob("*.py")),
    REPO / "zonda/schedules/scheduling.py",
    REPO / "zonda/resources/durations.py",
]
CLOCK_READS = {"now", "utcnow", "today", "time", "monotonic", "time_ns"}


@pytest.mark.parametrize("path", DOMAIN_FILES, ids=lambda path: str(path.relative_to(REPO)))
def test_domain_modules_neither_read_the_clock_nor_import_kubernetes(path: pathlib.Path) -> None:
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [alias.name for alias in node.names] + [getattr(node, "module", None) or ""]
            assert not any(n.split(".")[0] in {"kubernetes", "kubernetes_asyncio", "kopf"} for n in names)
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in CLOCK_READS
        ):
            # The one permitted read: pendulum.now inside zonda.timetables.base.utcnow.
            assert path.name == "base.py" and ast.unparse(node) == "pendulum.now(pendulum.UTC)", ast.unparse(
                node
            )
