"""`from zonda.decorators import dag, setup, task, task_group, teardown`, as `airflow.decorators`.

The standard provider's decorator functions (`airflow.providers.standard.decorators.bash.bash_task`...)
are the same decorators under their module-level names.
"""

from zonda.authoring.dags import dag
from zonda.authoring.task_groups import task_group
from zonda.authoring.taskflow import setup, task, teardown

python_task = task.python
bash_task = task.bash
branch_task = task.branch
short_circuit_task = task.short_circuit
sensor_task = task.sensor
virtualenv_task = task.virtualenv
external_python_task = task.external_python
branch_virtualenv_task = task.branch_virtualenv
branch_external_python_task = task.branch_external_python

__all__ = [
    "bash_task",
    "branch_external_python_task",
    "branch_task",
    "branch_virtualenv_task",
    "dag",
    "external_python_task",
    "python_task",
    "sensor_task",
    "setup",
    "short_circuit_task",
    "task",
    "task_group",
    "teardown",
    "virtualenv_task",
]
