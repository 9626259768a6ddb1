"""`MultipleCronTriggerTimetable` (Airflow 2.11/3): a run at each firing of any of its crons.

The expected runs are what Airflow 3.3.2's own class gave for the same cases (its `next_dagrun_info`
in its venv, the clock pinned by replacing `utcnow` and `time.time` in `airflow.timetables.trigger`),
not what Zonda computes.
"""

from __future__ import annotations

import datetime

import pendulum
import pytest

from zonda.authoring import compat
from zonda.timetables import DataInterval, TimeRestriction
from zonda.timetables.base import AirflowTimetableInvalid, pinned_clock
from zonda.timetables.trigger import MultipleCronTriggerTimetable

AMSTERDAM = "Europe/Amsterdam"


def _runs(timetable: MultipleCronTriggerTimetable, restriction: TimeRestriction, count: int) -> list[str]:
    found, last = [], None
    for _ in range(count):
        info = timetable.next_dagrun_info(last_automated_data_interval=last, restriction=restriction)
        assert info is not None
        found.append(f"{info.data_interval.start.isoformat()} {info.run_after.isoformat()}")
        last = info.data_interval
    return found


def test_catchup_runs_at_each_firing_of_any_cron_once_as_airflow() -> None:
    """Three crons, two firing together every Monday 08:00: one run then, as Airflow's six."""
    timetable = MultipleCronTriggerTimetable(
        "0 8 * * *", "30 17 * * 1-5", "0 8 * * 1", timezone=AMSTERDAM, interval=datetime.timedelta(hours=1)
    )
    restriction = TimeRestriction(earliest=pendulum.datetime(2024, 6, 1, tz="UTC"), latest=None, catchup=True)
    assert _runs(timetable, restriction, 6) == [
        "2024-06-01T05:00:00+00:00 2024-06-01T06:00:00+00:00",
        "2024-06-02T05:00:00+00:00 2024-06-02T06:00:00+00:00",
        "2024-06-03T05:00:00+00:00 2024-06-03T06:00:00+00:00",
        "2024-06-03T14:30:00+00:00 2024-06-03T15:30:00+00:00",
        "2024-06-04T05:00:00+00:00 2024-06-04T06:00:00+00:00",
        "2024-06-04T14:30:00+00:00 2024-06-04T15:30:00+00:00",
    ]
    manual = timetable.infer_manual_data_interval(run_after=pendulum.datetime(2024, 6, 3, 12, tz="UTC"))
    assert (manual.start.isoformat(), manual.end.isoformat()) == (
        "2024-06-03T11:00:00+00:00",
        "2024-06-03T12:00:00+00:00",
    )
    assert timetable.summary == "0 8 * * *, 30 17 * * 1-5, 0 8 * * 1"


@pytest.mark.parametrize(
    ("last_end", "expected"),
    [
        (None, "2024-06-03T06:00:00+00:00"),
        (pendulum.datetime(2024, 5, 1, 6, tz="UTC"), "2024-06-03T06:00:00+00:00"),
        (pendulum.datetime(2024, 6, 3, 6, tz="UTC"), "2024-06-03T15:30:00+00:00"),
    ],
    ids=["first run: the latest due", "behind: the latest due", "the due one ran: the next to come"],
)
def test_without_catchup_the_latest_due_else_the_next_as_airflow(
    last_end: pendulum.DateTime | None, expected: str
) -> None:
    timetable = MultipleCronTriggerTimetable("0 8 * * *", "30 17 * * 1-5", timezone=AMSTERDAM)
    earliest = pendulum.datetime(2024, 6, 1, tz="UTC")
    restriction = TimeRestriction(earliest=earliest, latest=None, catchup=False)
    with pinned_clock(pendulum.datetime(2024, 6, 3, 10, tz="UTC")):
        info = timetable.next_dagrun_info(
            last_automated_data_interval=DataInterval(last_end, last_end) if last_end else None,
            restriction=restriction,
        )
    assert info is not None and info.run_after.isoformat() == expected


def test_serialized_as_airflow_and_back() -> None:
    timetable = MultipleCronTriggerTimetable("0 8 * * *", "30 17 * * 1-5", timezone=AMSTERDAM)
    data = timetable.serialize()
    assert data == {"expressions": ["0 8 * * *", "30 17 * * 1-5"], "timezone": AMSTERDAM, "interval": 0.0}
    assert MultipleCronTriggerTimetable.deserialize(data) == timetable


def test_refused_as_airflow_without_a_cron_and_with_run_immediately() -> None:
    with pytest.raises(AirflowTimetableInvalid, match="cron expression required"):
        MultipleCronTriggerTimetable(timezone="UTC")
    with pytest.raises(AirflowTimetableInvalid, match="run_immediately is not supported"):
        MultipleCronTriggerTimetable("0 8 * * *", timezone="UTC", run_immediately=True)


def test_importable_from_airflow_sdk_and_airflow_timetables() -> None:
    with compat.airflow_imports(enabled=True):
        from airflow.sdk import MultipleCronTriggerTimetable as from_sdk  # type: ignore[import-not-found]
        from airflow.timetables.trigger import (  # type: ignore[import-not-found]
            MultipleCronTriggerTimetable as from_timetables,
        )
    assert from_sdk is from_timetables is MultipleCronTriggerTimetable
