"""Concepts > DAGs > Running DAGs: schedule_interval as a preset and as a cron expression."""

from airflow import DAG
from airflow.operators.empty import EmptyOperator

with DAG("my_daily_dag", schedule_interval="@daily"):
    EmptyOperator(task_id="task")  # the page writes `...`

with DAG("my_hourly_dag", schedule_interval="0 * * * *"):  # DEVIATION: a second dag id for the cron form
    EmptyOperator(task_id="task")
