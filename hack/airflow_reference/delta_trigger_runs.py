"""Print the runs Airflow 3's `DeltaTriggerTimetable` schedules, for the cases Zonda's unit test pins.

Run with the Python of a venv holding Airflow 3 (NOT Zonda's environment):

    /work/venvs/af3/bin/python hack/airflow_reference/delta_trigger_runs.py

Airflow's clock (`airflow.timetables.trigger.utcnow`) is pinned to NOW; one JSON line per case: the
next run's data interval as `next_dagrun_info` gives it (null: none), and the manual interval.
"""

from __future__ import annotations

import datetime
import json
import os
import tempfile
from unittest import mock

os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="delta-trigger-"))

import pendulum
from airflow.timetables.base import DataInterval, TimeRestriction
from airflow.timetables.trigger import DeltaTriggerTimetable

NOW = pendulum.datetime(2024, 1, 10, 12, 30, tz="UTC")
START = pendulum.datetime(2024, 1, 1, tz="UTC")
D = datetime.timedelta
#: name -> (delta, interval, last run's interval or None, earliest, catchup)
CASES = {
    "after a run, catchup": (D(hours=6), D(), (START, START), START, True),
    "after a run, with an interval": (D(hours=6), D(hours=1), (START - D(hours=1), START), START, True),
    "first run from the start date": (D(days=1), D(), None, START, True),
    "first run, no start date": (D(days=1), D(), None, None, True),
    "behind, no catchup": (D(hours=6), D(), (START, START), START, False),
    "ahead, no catchup": (D(days=30), D(), (NOW, NOW), START, False),
    "past the end date": (D(hours=6), D(), (START, START), START, True, START + D(hours=1)),
}


def next_run(delta, interval, last, earliest, catchup, latest=None):
    timetable = DeltaTriggerTimetable(delta, interval=interval)
    with mock.patch("airflow.timetables.trigger.utcnow", return_value=NOW):
        info = timetable.next_dagrun_info(
            last_automated_data_interval=DataInterval(*last) if last else None,
            restriction=TimeRestriction(earliest=earliest, latest=latest, catchup=catchup),
        )
    return None if info is None else [d.isoformat() for d in info.data_interval]


if __name__ == "__main__":
    from airflow.version import version

    print(json.dumps({"airflow": version}))
    for name, case in CASES.items():
        print(json.dumps({"case": name, "next": next_run(*case)}))
    manual = DeltaTriggerTimetable(D(hours=6), interval=D(hours=2)).infer_manual_data_interval(run_after=NOW)
    print(json.dumps({"case": "manual", "interval": [manual.start.isoformat(), manual.end.isoformat()]}))
