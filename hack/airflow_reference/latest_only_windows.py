"""Print LatestOnlyOperator's window as Airflow itself computes it, for the cases Zonda's unit tests pin.

Run with the Python of a venv holding Airflow (NOT Zonda's environment):

    /work/venvs/af2/bin/python hack/airflow_reference/latest_only_windows.py   # Airflow 2.10
    /work/venvs/af3/bin/python hack/airflow_reference/latest_only_windows.py   # Airflow 3 + standard

Airflow 2.10's `LatestOnlyOperator.choose_branch` takes the window from
`dag.next_dagrun_info(dag.get_run_data_interval(dag_run), restricted=False)`; the standard provider's
(Airflow 3) from `LatestOnlyOperator._get_compare_dates(dag_run)`. Both are called here as the operator
calls them, on a DAG with each schedule and a run with each data interval; one JSON line per case,
`null` where the operator lets the run proceed as the last scheduled one.
"""

from __future__ import annotations

import datetime
import json
import os
import tempfile
from types import SimpleNamespace

os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="latest-only-"))
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
os.environ.setdefault("AIRFLOW__CORE__UNIT_TEST_MODE", "True")

import pendulum
from airflow.version import version

AIRFLOW_3 = version.startswith("3")
if AIRFLOW_3:
    from airflow.providers.standard.operators.latest_only import LatestOnlyOperator
    from airflow.sdk import DAG
else:
    from airflow import DAG
    from airflow.operators.latest_only import LatestOnlyOperator
from airflow.timetables.interval import CronDataIntervalTimetable, DeltaDataIntervalTimetable  # noqa: E402
from airflow.timetables.simple import OnceTimetable  # noqa: E402
from airflow.timetables.trigger import CronTriggerTimetable  # noqa: E402

START = pendulum.datetime(2024, 1, 1, tz="UTC")
D = datetime.timedelta
#: name -> (timetable, data interval start, end), the run's interval as that timetable gives it.
CASES = {
    "daily intervals": (CronDataIntervalTimetable("0 0 * * *", "UTC"), START + D(days=2), START + D(days=3)),
    "four-hour intervals": (DeltaDataIntervalTimetable(D(hours=4)), START + D(hours=8), START + D(hours=12)),
    "hourly trigger": (
        CronTriggerTimetable("0 * * * *", timezone="UTC"),
        START + D(hours=5),
        START + D(hours=5),
    ),
    "once": (OnceTimetable(), START, START),
}


def window(schedule, start, end):
    with DAG("latest_only_window", schedule=schedule, start_date=START, catchup=True) as dag:
        operator = LatestOnlyOperator(task_id="latest_only")
    run = SimpleNamespace(
        data_interval_start=start, data_interval_end=end, logical_date=start, run_after=end,
        external_trigger=False, run_type="scheduled", execution_date=start, dag_id="latest_only_window",
    )  # fmt: skip
    if AIRFLOW_3:
        dates = operator._get_compare_dates(run)
        return None if dates is None else [d.isoformat() for d in dates]
    info = dag.next_dagrun_info(dag.get_run_data_interval(run), restricted=False)
    return None if info is None else [d.isoformat() for d in info.data_interval]


if __name__ == "__main__":
    print(json.dumps({"airflow": version}))
    for name, case in CASES.items():
        print(json.dumps({"case": name, "window": window(*case)}))
