"""Airflow's workday example timetables, loaded by class path and driven through the controller's decision.

March 2021 has no US federal holiday, so these expectations hold whether or not pandas (which the example
uses for holidays when it is installed) is present.
"""

from __future__ import annotations

import datetime as dt
import json

import pendulum
import pytest
import time_machine
from pendulum import DateTime, Time

from examples.timetables.workday import AfterWorkdayTimetable, SometimeAfterWorkdayTimetable
from zonda.schedules.scheduling import DueRun, catchup_backlog, decide_next_run, manual_run
from zonda.timetables import DataInterval, load_timetable


def utc(*args: int) -> DateTime:
    return pendulum.datetime(*args, tz="UTC")


def day(d: int) -> DataInterval:
    return DataInterval(utc(2021, 3, d), utc(2021, 3, d + 1))


@pytest.mark.parametrize(
    "class_path",
    [
        pytest.param("examples.timetables.workday.AfterWorkdayTimetable", id="a dotted path"),
        pytest.param("examples.timetables.workday:AfterWorkdayTimetable", id="a module:Class path"),
    ],
)
def test_after_workday_loads_by_class_path(class_path: str) -> None:
    assert isinstance(load_timetable(class_path, {}), AfterWorkdayTimetable)


def test_after_workday_skips_the_weekend() -> None:
    timetable = load_timetable("examples.timetables.workday.AfterWorkdayTimetable", {})
    # Wednesday 2021-03-10 to the next Wednesday, as the controller would create them.
    runs, after = catchup_backlog(
        timetable,
        last_automated_data_interval=None,
        start_date=utc(2021, 3, 10),
        end_date=None,
        catchup=True,
        now=utc(2021, 3, 17, 6),
        limit=50,
    )
    assert [run.data_interval for run in runs] == [day(10), day(11), day(12), day(15), day(16)]
    assert all(run.run_after == run.data_interval.end for run in runs)
    assert after.wake_at == utc(2021, 3, 18)


@pytest.mark.parametrize(
    ("start_date", "expected"),
    [
        pytest.param(utc(2021, 3, 10), day(10), id="a start on a workday's midnight is used directly"),
        pytest.param(utc(2021, 3, 10, 9), day(11), id="a start during a day waits for the next midnight"),
        pytest.param(utc(2021, 3, 13), day(15), id="a start on Saturday moves to Monday"),
    ],
)
def test_after_workday_first_run(start_date: DateTime, expected: DataInterval) -> None:
    timetable = load_timetable("examples.timetables.workday.AfterWorkdayTimetable", {})
    decision = decide_next_run(
        timetable,
        last_automated_data_interval=None,
        start_date=start_date,
        end_date=None,
        catchup=True,
        now=utc(2021, 4, 1),
    )
    assert decision.due is not None and decision.due.data_interval == expected


def test_after_workday_without_catchup_starts_today_by_the_real_clock() -> None:
    """Airflow's example reads ``Date.today()`` itself, so only real time travel moves it."""
    timetable = AfterWorkdayTimetable()
    with time_machine.travel(dt.datetime(2021, 3, 17, 12, tzinfo=dt.UTC), tick=False):
        decision = decide_next_run(
            timetable,
            last_automated_data_interval=None,
            start_date=utc(2021, 1, 1),
            end_date=None,
            catchup=False,
            now=utc(2021, 3, 17, 12),
        )
    assert decision.due is None and decision.wake_at == utc(2021, 3, 18)


def test_after_workday_respects_end_date() -> None:
    decision = decide_next_run(
        AfterWorkdayTimetable(),
        last_automated_data_interval=day(12),
        start_date=utc(2021, 3, 10),
        end_date=utc(2021, 3, 14),
        catchup=True,
        now=utc(2021, 4, 1),
    )
    assert decision.due is None and decision.wake_at is None and "end_date" in decision.reason


def test_a_manual_run_on_monday_covers_friday() -> None:
    run = manual_run(AfterWorkdayTimetable(), run_after=utc(2021, 3, 15, 10))
    assert run == DueRun(
        logical_date=utc(2021, 3, 15, 10), data_interval=day(12), run_after=utc(2021, 3, 15, 10)
    )


def test_sometime_after_workday_runs_at_its_hour_the_next_morning() -> None:
    timetable = load_timetable(
        "examples.timetables.workday.SometimeAfterWorkdayTimetable", {"schedule_at": "08:00"}
    )
    early = decide_next_run(
        timetable,
        last_automated_data_interval=day(11),
        start_date=utc(2021, 3, 10),
        end_date=None,
        catchup=True,
        now=utc(2021, 3, 13, 7),
    )
    assert early.due is None and early.wake_at == utc(2021, 3, 13, 8)
    late = decide_next_run(
        timetable,
        last_automated_data_interval=day(11),
        start_date=utc(2021, 3, 10),
        end_date=None,
        catchup=True,
        now=utc(2021, 3, 13, 8),
    )
    assert late.due == DueRun(
        logical_date=utc(2021, 3, 12), data_interval=day(12), run_after=utc(2021, 3, 13, 8)
    )


def test_sometime_after_workday_serializes_its_time() -> None:
    timetable = SometimeAfterWorkdayTimetable(Time(8))
    data = json.loads(json.dumps(timetable.serialize()))
    assert data == {"schedule_at": "08:00:00"}
    restored = load_timetable("examples.timetables.workday.SometimeAfterWorkdayTimetable", data)
    assert restored.serialize() == data
    assert restored.summary == "after each workday, at 08:00:00"
