"""`from zonda.utils.task_group import TaskGroup`, as Airflow's `airflow.utils.task_group`."""

from zonda.authoring.task_groups import TaskGroup, task_group

__all__ = ["TaskGroup", "task_group"]
