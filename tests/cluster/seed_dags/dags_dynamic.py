"""Concepts > DAGs > Dynamic DAGs: tasks made in a loop."""

from airflow import DAG
from airflow.operators.empty import EmptyOperator

with DAG("loop_example") as dag:
    first = EmptyOperator(task_id="first")
    last = EmptyOperator(task_id="last")

    options = ["branch_a", "branch_b", "branch_c", "branch_d"]
    for option in options:
        t = EmptyOperator(task_id=option)
        first >> t >> last
