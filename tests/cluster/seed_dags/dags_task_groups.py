"""Concepts > DAGs > TaskGroups: a group upstream of a task, and group default_args over the DAG's."""

import pendulum
from airflow import DAG
from airflow.operators.bash import BashOperator
from airflow.operators.empty import EmptyOperator
from airflow.utils.task_group import TaskGroup

with DAG("task_group_dependencies", schedule_interval=None):
    with TaskGroup("group1") as group1:
        task1 = EmptyOperator(task_id="task1")
        task2 = EmptyOperator(task_id="task2")

    task3 = EmptyOperator(task_id="task3")

    group1 >> task3

with (
    DAG(
        dag_id="dag1",
        start_date=pendulum.datetime(2016, 1, 1, tz="UTC"),
        schedule_interval="@daily",
        catchup=False,
        default_args={"retries": 1},
    ),
    TaskGroup("group1", default_args={"retries": 3}),
):
    task1 = EmptyOperator(task_id="task1")
    task2 = BashOperator(task_id="task2", bash_command="echo Hello World!", retries=2)
    assert (task1.retries, task2.retries) == (3, 2)  # the page prints 3 and 2
