"""Concepts > DAGs > Default Arguments: default_args reach every operator (`op.retries` is 2)."""

import pendulum
from airflow import DAG
from airflow.operators.bash import BashOperator

with DAG(
    dag_id="my_dag",
    start_date=pendulum.datetime(2016, 1, 1, tz="UTC"),
    schedule_interval="@daily",
    catchup=False,
    default_args={"retries": 2},
) as dag:
    op = BashOperator(task_id="dummy", bash_command="Hello World!")
    assert op.retries == 2  # the page prints it
