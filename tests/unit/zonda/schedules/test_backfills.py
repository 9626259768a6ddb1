"""Backfill planning: which runs to create, in which order, within which limits (pure, `now` passed in)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from zonda.resources.backfill_models import BackfillSpec, BackfillState
from zonda.resources.models import DagRunState, DagSpec
from zonda.resources.run_types import RunType
from zonda.schedules import backfills
from zonda.schedules.backfills import plan_backfill, run_name
from zonda.schedules.dag_plans import RunRef
from zonda.timetables import DataInterval

DAY = timedelta(days=1)
JAN_1 = datetime(2024, 1, 1, tzinfo=UTC)
NOW = datetime(2024, 6, 1, tzinfo=UTC)
DAILY = DagSpec.model_validate(
    {
        "schedule": "@daily",
        "startDate": "2023-01-01T00:00:00Z",
        "tasks": [{"id": "t", "operator": "EmptyOperator"}],
    }
)


def spec(**fields: Any) -> BackfillSpec:
    values: dict[str, Any] = {"dag_name": "etl", "from_date": JAN_1, "to_date": JAN_1 + 29 * DAY}
    values.update(fields)
    return BackfillSpec(**values)


def run(name: str, day: datetime, state: DagRunState | None, run_type: RunType = RunType.BACKFILL) -> RunRef:
    return RunRef(
        name=name, created_at=NOW, run_type=run_type, state=state, data_interval=DataInterval(day, day + DAY)
    )


def own(day: datetime, state: DagRunState | None) -> RunRef:
    return run(run_name("bf", day), day, state)


def plan(backfill: BackfillSpec, runs: list[RunRef] | None = None, dag: DagSpec | None = DAILY) -> Any:
    return plan_backfill("bf", backfill, dag, runs=runs or [], generation=1, now=NOW)


def test_thirty_days_start_with_max_active_runs_oldest_first() -> None:
    result = plan(spec(max_active_runs=3))
    assert [r.logical_date for r in result.to_create] == [JAN_1, JAN_1 + DAY, JAN_1 + 2 * DAY]
    assert result.to_create[0].name == "bf-backfill-20240101t000000z"
    status = result.status
    assert (status.state, status.total, status.created, status.running, status.progress) == (
        BackfillState.RUNNING, 30, 3, 3, "0/30",
    )  # fmt: skip
    assert status.next_logical_date == JAN_1 + 3 * DAY


def test_a_finished_run_makes_room_for_the_next_and_nothing_is_created_twice() -> None:
    first = plan(spec(max_active_runs=3)).to_create
    runs = [own(r.logical_date, DagRunState.RUNNING) for r in first]
    assert plan(spec(max_active_runs=3), runs).to_create == ()  # a restart: the same runs, none again
    runs[0] = own(JAN_1, DagRunState.SUCCESS)
    again = plan(spec(max_active_runs=3), runs)
    assert [r.logical_date for r in again.to_create] == [JAN_1 + 3 * DAY]
    assert again.status.progress == "1/30"


def test_run_backwards_starts_with_the_newest_date() -> None:
    result = plan(spec(max_active_runs=2, run_backwards=True))
    assert [r.logical_date for r in result.to_create] == [JAN_1 + 29 * DAY, JAN_1 + 28 * DAY]


def test_completed_when_every_run_finished() -> None:
    days = [JAN_1 + i * DAY for i in range(3)]
    runs = [
        own(days[0], DagRunState.SUCCESS),
        own(days[1], DagRunState.FAILED),
        own(days[2], DagRunState.SUCCESS),
    ]
    result = plan(spec(to_date=days[2]), runs)
    assert result.to_create == ()
    assert (result.status.state, result.status.succeeded, result.status.failed) == (
        BackfillState.COMPLETED,
        2,
        1,
    )


REPROCESS = [
    pytest.param("none", DagRunState.SUCCESS, False, id="none skips a date with a successful run"),
    pytest.param("none", DagRunState.FAILED, False, id="none skips a date with a failed run"),
    pytest.param("failed", DagRunState.FAILED, True, id="failed reruns a date whose run failed"),
    pytest.param("failed", DagRunState.SUCCESS, False, id="failed skips a date whose run succeeded"),
    pytest.param("completed", DagRunState.SUCCESS, True, id="completed reruns a date whose run succeeded"),
    pytest.param(
        "completed", DagRunState.RUNNING, False, id="no behaviour runs a date whose run is unfinished"
    ),
]


@pytest.mark.parametrize(("behavior", "existing", "runs_it"), REPROCESS)
def test_reprocess_behavior_decides_dates_that_have_runs(
    behavior: str, existing: DagRunState, runs_it: bool
) -> None:
    scheduled = run("etl-scheduled-20240101", JAN_1, existing, RunType.SCHEDULED)
    result = plan(spec(to_date=JAN_1 + DAY, reprocess_behavior=behavior), [scheduled])
    created = [r.logical_date for r in result.to_create]
    assert (JAN_1 in created) == runs_it
    assert JAN_1 + DAY in created
    assert result.status.skipped == (0 if runs_it else 1)


def test_a_dry_run_lists_the_dates_and_creates_nothing() -> None:
    result = plan(spec(to_date=JAN_1 + 2 * DAY, dry_run=True))
    assert result.to_create == ()
    assert result.status.state == BackfillState.DRY_RUN
    assert result.status.planned == [JAN_1, JAN_1 + DAY, JAN_1 + 2 * DAY]


def test_a_paused_backfill_creates_nothing_more() -> None:
    result = plan(spec(paused=True), [own(JAN_1, DagRunState.RUNNING)])
    assert result.to_create == ()
    assert (result.status.state, result.status.running) == (BackfillState.PAUSED, 1)


def test_dates_not_yet_due_are_not_run() -> None:
    result = plan(spec(from_date=NOW - 2 * DAY, to_date=NOW + 10 * DAY))
    assert [r.logical_date for r in result.to_create] == [NOW - 2 * DAY, NOW - DAY]  # the last ends at NOW


@pytest.mark.parametrize(
    ("backfill", "dag", "message"),
    [
        pytest.param(spec(), None, "DAG 'etl' does not exist", id="a missing DAG"),
        pytest.param(
            spec(from_date=JAN_1 + DAY, to_date=JAN_1), DAILY, "is after toDate", id="a reversed range"
        ),
    ],
)
def test_a_backfill_that_cannot_run_fails_saying_why(
    backfill: BackfillSpec, dag: DagSpec | None, message: str
) -> None:
    result = plan(backfill, dag=dag)
    assert result.status.state == BackfillState.FAILED
    assert message in (result.status.message or "")
    assert result.events[0][0] == "BackfillFailed"


def test_a_range_past_the_date_limit_fails_naming_the_first_date_left_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Rather than running only the first MAX_DATES dates of it and saying nothing (found by
    tests/cluster/test_fuzz_runs.py: 1990-2024 daily reported total 10000 of 12,418 due)."""
    monkeypatch.setattr(backfills, "MAX_DATES", 30)
    exactly = plan(spec(to_date=JAN_1 + 29 * DAY))  # 30 dates: at the limit, the positive control
    assert exactly.status.state == BackfillState.RUNNING and exactly.status.total == 30
    over = plan(spec(to_date=JAN_1 + 30 * DAY))
    assert over.status.state == BackfillState.FAILED and over.to_create == ()
    assert over.status.message == (
        "the range holds more than 30 logical dates (the next after the 30th is "
        "2024-01-31T00:00:00+00:00): split it into smaller backfills"
    )


def test_dates_kept_by_the_controller_plan_as_dates_listed_again() -> None:
    backfill = spec(max_active_runs=2)
    runs = [
        own(JAN_1, DagRunState.SUCCESS),
        run("other", JAN_1 + DAY, DagRunState.RUNNING, RunType.SCHEDULED),
    ]
    kept = backfills.backfill_dates(backfill, DAILY, now=NOW)
    assert len(kept.due) == 30 and kept.beyond_limit is None
    with_kept = plan_backfill("bf", backfill, DAILY, runs=runs, generation=1, now=NOW, dates=kept)
    assert with_kept == plan(backfill, runs)


@pytest.mark.parametrize(
    ("start", "end", "first", "count"),
    [
        pytest.param("0001-01-01T00:00:00Z", "0001-01-10T00:00:00Z", "0001-01-01", 10, id="year 1"),
        pytest.param("1000-03-01T00:00:00Z", "1000-03-10T00:00:00Z", "1000-03-01", 10, id="year 1000"),
        pytest.param("9999-12-20T00:00:00Z", "9999-12-30T00:00:00Z", "9999-12-20", 11, id="year 9999"),
    ],
)
def test_a_backfill_far_from_1970_plans_every_date(start: str, end: str, first: str, count: int) -> None:
    """Airflow's `iter_dagrun_infos_between` yields every interval of the range; a backfill from year
    1 planned one date (croniter's float timestamps lost the microsecond the lookups step by)."""
    dag = DagSpec.model_validate({"schedule": "@daily", "tasks": [{"id": "a", "operator": "EmptyOperator"}]})
    spec = BackfillSpec.model_validate({"dagName": "x", "fromDate": start, "toDate": end, "dryRun": True})
    plan = plan_backfill("b", spec, dag, runs=[], generation=1, now=datetime(9999, 12, 31, 12, tzinfo=UTC))
    planned = [date.date().isoformat() for date in plan.status.planned]
    assert plan.status.state is BackfillState.DRY_RUN and len(planned) == count, planned
    assert planned[0] == first and len(set(planned)) == count
