"""Airflow's example_latest_only_with_trigger, unchanged but for the imports and the start date.

Renders to latest_only_with_trigger.yaml.
"""

import datetime

import pendulum

from zonda import DAG
from zonda.operators.empty import EmptyOperator
from zonda.operators.latest_only import LatestOnlyOperator
from zonda.utils.trigger_rule import TriggerRule

with DAG(
    dag_id="latest_only_with_trigger",
    schedule_interval=datetime.timedelta(hours=4),
    start_date=pendulum.datetime(2026, 11, 28, tz="UTC"),  # tests set it relative to now
    catchup=True,
    tags=["example3"],
) as dag:
    latest_only = LatestOnlyOperator(task_id="latest_only")
    task1 = EmptyOperator(task_id="task1")
    task2 = EmptyOperator(task_id="task2")
    task3 = EmptyOperator(task_id="task3")
    task4 = EmptyOperator(task_id="task4", trigger_rule=TriggerRule.ALL_DONE)

    latest_only >> task1 >> [task3, task4]
    task2 >> [task3, task4]
