"""Concepts > DAGs > SubDAGs: Airflow's example_subdag_operator.py. Zonda refuses SubDagOperator
(deprecated in Airflow) with a message saying to use a TaskGroup; this file must fail to render."""

import datetime

from airflow import DAG
from airflow.example_dags.subdags.subdag import subdag
from airflow.operators.empty import EmptyOperator
from airflow.operators.subdag import SubDagOperator

DAG_NAME = "example_subdag_operator"

with DAG(
    dag_id=DAG_NAME,
    default_args={"retries": 2},
    start_date=datetime.datetime(2022, 1, 1),
    schedule_interval="@once",
    tags=["example"],
) as dag:
    start = EmptyOperator(task_id="start")
    section_1 = SubDagOperator(task_id="section-1", subdag=subdag(DAG_NAME, "section-1", dag.default_args))
    end = EmptyOperator(task_id="end")
    start >> section_1 >> end
