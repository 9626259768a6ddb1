"""`from zonda.decorators import dag, setup, task, task_group, teardown`, as `airflow.decorators`."""

from zonda.authoring.dags import dag
from zonda.authoring.task_groups import task_group
from zonda.authoring.taskflow import setup, task, teardown

__all__ = ["dag", "setup", "task", "task_group", "teardown"]
