"""An unchanged Airflow 2.x DAG file (rendered with --airflow-compat)."""

import pendulum
from airflow import DAG
from airflow.operators.bash import BashOperator
from airflow.operators.python import PythonOperator

with DAG(
    "unchanged_airflow",
    start_date=pendulum.datetime(2021, 1, 1, tz="UTC"),
    schedule_interval=None,
) as dag:
    hello = BashOperator(task_id="hello", bash_command="echo hello")
    shout = PythonOperator(task_id="shout", python_callable=lambda ti: ti.xcom_pull(task_ids="hello").upper())
    hello >> shout
