"""Customizing DAG Scheduling with Timetables: the workday timetable, plain and parameterized."""

import pendulum
from airflow import DAG
from airflow.example_dags.plugins.workday import AfterWorkdayTimetable
from airflow.operators.dummy import DummyOperator
from pendulum import Time

from examples.timetables.workday import SometimeAfterWorkdayTimetable

with DAG(
    dag_id="example_workday_timetable",
    start_date=pendulum.datetime(2021, 1, 1, tz="UTC"),
    timetable=AfterWorkdayTimetable(),
    tags=["example", "timetable"],
) as dag:
    DummyOperator(task_id="run_this")

with DAG(
    dag_id="example_sometime_after_workday",
    start_date=pendulum.datetime(2021, 1, 1, tz="UTC"),
    timetable=SometimeAfterWorkdayTimetable(Time(8)),  # 8am.
) as later:
    DummyOperator(task_id="run_this")
