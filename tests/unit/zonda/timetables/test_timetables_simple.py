"""Timetables without cron: None, @once, @continuous, fixed deltas and explicit events (Airflow 2.x rules)."""

from __future__ import annotations

import datetime as dt

import pendulum
import pytest
from dateutil.relativedelta import relativedelta
from pendulum import DateTime

from zonda.timetables import (
    AirflowTimetableInvalid,
    ContinuousTimetable,
    DagRunInfo,
    DataInterval,
    DeltaDataIntervalTimetable,
    EventsTimetable,
    NullTimetable,
    OnceTimetable,
    TimeRestriction,
    Timetable,
)
from zonda.timetables.base import pinned_clock


def utc(*args: int) -> DateTime:
    return pendulum.datetime(*args, tz="UTC")


def next_info(
    timetable: Timetable,
    *,
    last: DataInterval | None = None,
    earliest: DateTime | None = None,
    latest: DateTime | None = None,
    catchup: bool = True,
    now: DateTime = utc(2024, 1, 10, 12),
) -> DagRunInfo | None:
    with pinned_clock(now):
        return timetable.next_dagrun_info(
            last_automated_data_interval=last, restriction=TimeRestriction(earliest, latest, catchup)
        )


def test_null_timetable_never_schedules() -> None:
    timetable = NullTimetable()
    assert next_info(timetable, earliest=utc(2024, 1, 1)) is None
    assert not timetable.can_be_scheduled and not timetable.periodic
    assert timetable.summary == "None"
    assert timetable.infer_manual_data_interval(run_after=utc(2024, 1, 1)) == DataInterval.exact(
        utc(2024, 1, 1)
    )


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        pytest.param(
            {"earliest": utc(2024, 1, 1)}, DagRunInfo.exact(utc(2024, 1, 1)), id="once runs at start_date"
        ),
        pytest.param(
            {"earliest": utc(2024, 1, 1), "catchup": False},
            DagRunInfo.exact(utc(2024, 1, 1)),
            id="once runs at start_date even with catchup off",
        ),
        pytest.param({}, None, id="once without start_date never runs"),
        pytest.param(
            {"earliest": utc(2024, 1, 1), "last": DataInterval.exact(utc(2024, 1, 1))},
            None,
            id="once does not run a second time",
        ),
        pytest.param(
            {"earliest": utc(2024, 1, 2), "latest": utc(2024, 1, 1)},
            None,
            id="once after end_date never runs",
        ),
    ],
)
def test_once_timetable(kwargs: dict[str, object], expected: DagRunInfo | None) -> None:
    assert next_info(OnceTimetable(), **kwargs) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        pytest.param(
            {"earliest": utc(2024, 1, 1)},
            DagRunInfo.interval(utc(2024, 1, 1), utc(2024, 1, 10, 12)),
            id="the first continuous run covers start_date until now",
        ),
        pytest.param(
            {"earliest": utc(2024, 1, 1), "last": DataInterval(utc(2024, 1, 1), utc(2024, 1, 10, 11))},
            DagRunInfo.interval(utc(2024, 1, 10, 11), utc(2024, 1, 10, 12)),
            id="each continuous run starts where the previous one ended",
        ),
        pytest.param(
            {"earliest": utc(2024, 2, 1)},
            DagRunInfo.interval(utc(2024, 2, 1), utc(2024, 2, 1)),
            id="a future start_date makes the first continuous run wait for it",
        ),
        pytest.param({}, None, id="continuous without start_date never runs"),
        pytest.param(
            {"earliest": utc(2024, 1, 1), "latest": utc(2024, 1, 5)}, None, id="continuous stops at end_date"
        ),
    ],
)
def test_continuous_timetable(kwargs: dict[str, object], expected: DagRunInfo | None) -> None:
    assert next_info(ContinuousTimetable(), **kwargs) == expected  # type: ignore[arg-type]


def test_continuous_allows_one_active_run() -> None:
    assert ContinuousTimetable().active_runs_limit == 1
    assert ContinuousTimetable().summary == "@continuous"


HOURLY = DeltaDataIntervalTimetable(dt.timedelta(hours=1))


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        pytest.param(
            {"earliest": utc(2024, 1, 1, 0, 30)},
            DagRunInfo.interval(utc(2024, 1, 1, 0, 30), utc(2024, 1, 1, 1, 30)),
            id="a delta schedule starts exactly at start_date",
        ),
        pytest.param(
            {
                "earliest": utc(2024, 1, 1),
                "last": DataInterval(utc(2024, 1, 1, 0, 30), utc(2024, 1, 1, 1, 30)),
            },
            DagRunInfo.interval(utc(2024, 1, 1, 1, 30), utc(2024, 1, 1, 2, 30)),
            id="delta intervals are back to back",
        ),
        pytest.param(
            {"earliest": utc(2024, 1, 1), "catchup": False, "now": utc(2024, 1, 10, 10, 45)},
            DagRunInfo.interval(utc(2024, 1, 10, 9), utc(2024, 1, 10, 10)),
            id="catchup off starts at the latest complete epoch-aligned interval",
        ),
        pytest.param(
            {"earliest": utc(2024, 1, 1), "latest": utc(2023, 12, 31)}, None, id="nothing after end_date"
        ),
        pytest.param({}, None, id="with catchup and no start_date there is nowhere to start"),
    ],
)
def test_delta_data_interval(kwargs: dict[str, object], expected: DagRunInfo | None) -> None:
    assert next_info(HOURLY, **kwargs) == expected  # type: ignore[arg-type]


def test_delta_is_elapsed_time_even_across_dst() -> None:
    daily = DeltaDataIntervalTimetable(dt.timedelta(days=1))
    start = pendulum.datetime(2024, 3, 30, tz="Europe/Berlin")
    info = next_info(daily, earliest=start)
    assert info is not None
    assert info.data_interval.end - info.data_interval.start == dt.timedelta(hours=24)
    assert info.data_interval.start == start and info.data_interval.start.timezone_name == "UTC"


def test_delta_manual_run_covers_the_delta_before_it() -> None:
    got = HOURLY.infer_manual_data_interval(run_after=utc(2024, 1, 1, 10, 45))
    assert got == DataInterval(utc(2024, 1, 1, 9, 45), utc(2024, 1, 1, 10, 45))


def test_delta_accepts_relativedelta_like_airflow() -> None:
    monthly = DeltaDataIntervalTimetable(relativedelta(months=1))
    info = next_info(monthly, earliest=utc(2024, 1, 31))
    assert info == DagRunInfo.interval(utc(2024, 1, 31), utc(2024, 2, 29))


@pytest.mark.parametrize(
    "delta",
    [
        pytest.param(dt.timedelta(0), id="a zero delta would repeat the same interval forever"),
        pytest.param(dt.timedelta(minutes=-5), id="a negative delta is refused"),
        pytest.param(relativedelta(months=-1), id="a negative relativedelta is refused"),
    ],
)
def test_delta_must_be_positive(delta: dt.timedelta | relativedelta) -> None:
    with pytest.raises(AirflowTimetableInvalid, match="must be positive"):
        DeltaDataIntervalTimetable(delta)


EVENTS = [utc(2024, 1, 5), utc(2024, 1, 1), utc(2024, 1, 20), utc(2024, 1, 1)]


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        pytest.param({}, DagRunInfo.exact(utc(2024, 1, 1)), id="events run from the earliest event, sorted"),
        pytest.param(
            {"last": DataInterval.exact(utc(2024, 1, 1))},
            DagRunInfo.exact(utc(2024, 1, 5)),
            id="a duplicate event does not run twice",
        ),
        pytest.param(
            {"last": DataInterval.exact(utc(2024, 1, 20))}, None, id="after the last event, nothing"
        ),
        pytest.param(
            {"catchup": False, "now": utc(2024, 1, 10)},
            DagRunInfo.exact(utc(2024, 1, 20)),
            id="catchup off skips events that already passed",
        ),
        pytest.param(
            {"earliest": utc(2024, 1, 2)},
            DagRunInfo.exact(utc(2024, 1, 5)),
            id="start_date skips earlier events",
        ),
        pytest.param(
            {"last": DataInterval.exact(utc(2024, 1, 5)), "latest": utc(2024, 1, 10)},
            None,
            id="end_date skips later events",
        ),
    ],
)
def test_events_timetable(kwargs: dict[str, object], expected: DagRunInfo | None) -> None:
    assert next_info(EventsTimetable(EVENTS), **kwargs) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("restrict", "run_after", "expected"),
    [
        pytest.param(
            False, utc(2024, 1, 7), utc(2024, 1, 7), id="an unrestricted manual run is at its own time"
        ),
        pytest.param(
            True, utc(2024, 1, 7), utc(2024, 1, 5), id="a restricted manual run takes the last event"
        ),
        pytest.param(True, utc(2023, 6, 1), utc(2024, 1, 1), id="before all events it takes the first one"),
    ],
)
def test_events_manual_run(restrict: bool, run_after: DateTime, expected: DateTime) -> None:
    timetable = EventsTimetable(EVENTS, restrict_to_events=restrict)
    assert timetable.infer_manual_data_interval(run_after=run_after) == DataInterval.exact(expected)


def test_events_are_returned_in_utc() -> None:
    berlin = pendulum.datetime(2024, 7, 1, 9, tz="Europe/Berlin")
    info = next_info(EventsTimetable([berlin]))
    assert info is not None and info.run_after == berlin and info.run_after.timezone_name == "UTC"


def test_events_describe_themselves() -> None:
    assert EventsTimetable(EVENTS).summary == "4 events"
    assert EventsTimetable([]).description == "No events"
    assert EventsTimetable(EVENTS, description="Match days").summary == "Match days"


def test_naive_events_are_refused() -> None:
    with pytest.raises(AirflowTimetableInvalid, match="naive"):
        EventsTimetable([dt.datetime(2024, 1, 1)])  # type: ignore[list-item]
