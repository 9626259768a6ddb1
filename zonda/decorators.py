"""`from zonda.decorators import dag, task, task_group`, as Airflow's `airflow.decorators`."""

from zonda.authoring.dags import dag
from zonda.authoring.task_groups import task_group
from zonda.authoring.taskflow import task

__all__ = ["dag", "task", "task_group"]
