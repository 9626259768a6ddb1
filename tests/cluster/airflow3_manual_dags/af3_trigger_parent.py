"""An unchanged Airflow 3 DAG triggering another with `logical_date=None`: no logical date there."""

import pendulum
from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator
from airflow.sdk import dag


@dag(schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC"))
def af3_trigger_parent():
    TriggerDagRunOperator(task_id="trigger", trigger_dag_id="af3_no_logical_date", logical_date=None)


af3_trigger_parent()
