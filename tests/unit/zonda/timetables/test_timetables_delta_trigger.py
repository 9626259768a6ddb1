"""`DeltaTriggerTimetable` (Airflow 3): a run every `delta` at the start of its period.

The expected runs are what Airflow 3.3.2's own class gave for the same cases, with its clock pinned
(`hack/airflow_reference/delta_trigger_runs.py`), not what Zonda computes.
"""

from __future__ import annotations

import datetime
from typing import Any

import pendulum
import pytest

from zonda.timetables import DataInterval, DeltaTriggerTimetable, TimeRestriction
from zonda.timetables.base import AirflowTimetableInvalid, pinned_clock

NOW = pendulum.datetime(2024, 1, 10, 12, 30, tz="UTC")
START = pendulum.datetime(2024, 1, 1, tz="UTC")
D = datetime.timedelta


def at(text: str) -> pendulum.DateTime:
    moment = pendulum.parse(text)
    assert isinstance(moment, pendulum.DateTime)
    return moment


CASES: list[Any] = [
    pytest.param(D(hours=6), D(), (START, START), START, True, None,
                 ("2024-01-01T06:00:00+00:00", "2024-01-01T06:00:00+00:00"), id="after a run, catchup"),
    pytest.param(D(hours=6), D(hours=1), (START - D(hours=1), START), START, True, None,
                 ("2024-01-01T05:00:00+00:00", "2024-01-01T06:00:00+00:00"), id="with an interval"),
    pytest.param(D(days=1), D(), None, START, True, None,
                 ("2024-01-01T00:00:00+00:00", "2024-01-01T00:00:00+00:00"), id="first run: start date"),
    pytest.param(D(days=1), D(), None, None, True, None,
                 ("2024-01-10T12:30:00+00:00", "2024-01-10T12:30:00+00:00"), id="no start date: now"),
    pytest.param(D(hours=6), D(), (START, START), START, False, None,
                 ("2024-01-10T12:30:00+00:00", "2024-01-10T12:30:00+00:00"), id="behind, no catchup: now"),
    pytest.param(D(days=30), D(), (NOW, NOW), START, False, None,
                 ("2024-02-09T12:30:00+00:00", "2024-02-09T12:30:00+00:00"), id="ahead, no catchup"),
    pytest.param(D(hours=6), D(), (START, START), START, True, START + D(hours=1), None, id="past the end"),
]  # fmt: skip


@pytest.mark.parametrize(("delta", "interval", "last", "earliest", "catchup", "latest", "expected"), CASES)
def test_the_next_run_is_airflow_3s(
    delta: D,
    interval: D,
    last: tuple[pendulum.DateTime, pendulum.DateTime] | None,
    earliest: pendulum.DateTime | None,
    catchup: bool,
    latest: pendulum.DateTime | None,
    expected: tuple[str, str] | None,
) -> None:
    timetable = DeltaTriggerTimetable(delta, interval=interval)
    with pinned_clock(NOW):
        info = timetable.next_dagrun_info(
            last_automated_data_interval=DataInterval(*last) if last else None,
            restriction=TimeRestriction(earliest=earliest, latest=latest, catchup=catchup),
        )
    got = None if info is None else (info.data_interval.start, info.data_interval.end)
    assert got == (None if expected is None else (at(expected[0]), at(expected[1])))


def test_a_manual_run_covers_the_interval_before_it_and_it_round_trips() -> None:
    timetable = DeltaTriggerTimetable(D(hours=6), interval=D(hours=2))
    assert timetable.infer_manual_data_interval(run_after=NOW) == DataInterval(NOW - D(hours=2), NOW)
    assert DeltaTriggerTimetable.deserialize(timetable.serialize()) == timetable
    with pytest.raises(AirflowTimetableInvalid, match="must be positive"):
        DeltaTriggerTimetable(D(0))


def test_an_airflow3_file_schedules_with_it(tmp_path: Any) -> None:
    from zonda.authoring import rendering

    (tmp_path / "every_six_hours.py").write_text(
        "import datetime, pendulum\n"
        "from airflow.sdk import DAG, DeltaTriggerTimetable\n"
        "from airflow.providers.standard.operators.empty import EmptyOperator\n"
        "with DAG('every_six_hours', schedule=DeltaTriggerTimetable(datetime.timedelta(hours=6)),\n"
        "         start_date=pendulum.datetime(2024, 1, 1, tz='UTC')):\n"
        "    EmptyOperator(task_id='noop')\n"
    )
    report = rendering.render_paths([tmp_path], airflow_compat=True)
    spec = report.manifests[0]["spec"]
    assert spec["timetable"] == {
        "class": "zonda.timetables.trigger.DeltaTriggerTimetable",
        "params": {"delta": 21600.0, "interval": 0.0},
    }
