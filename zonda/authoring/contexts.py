"""The DAG and task group an operator is created in: Airflow's `DagContext` and `TaskGroupContext`.

`with DAG(...)`, `@dag` and `with TaskGroup(...)` push themselves here; an operator created inside
(without `dag=`/`task_group=`) joins the innermost. Module state, as in Airflow: DAG files are
imported one at a time.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from zonda.authoring.dags import DAG
    from zonda.authoring.task_groups import TaskGroup

_dags: list[DAG] = []
_groups: list[TaskGroup] = []
#: DAGs used as a context manager since `start_collecting` (Airflow 2.4's `auto_register`): a DAG file
#: may write `with DAG(...):` without binding the DAG to a name, and it is still loaded.
_collected: list[DAG] = []


#: The Airflow version ("2" or "3") whose semantics the DAG file being loaded gets (see
#: `zonda.authoring.compat.file_dialect`); None for Zonda's own files, which get Zonda's (Airflow 2's).
_airflow_version: list[str | None] = [None]


def airflow_version() -> str | None:
    return _airflow_version[-1]


@contextlib.contextmanager
def reading_as(version: str | None) -> Iterator[None]:
    """DAGs created inside get `version`'s defaults (`schedule`, `catchup`) and record it."""
    _airflow_version.append(version)
    try:
        yield
    finally:
        _airflow_version.pop()


def current_dag() -> DAG | None:
    return _dags[-1] if _dags else None


def current_group(dag: DAG | None) -> TaskGroup | None:
    """The innermost open task group of `dag` (groups of another DAG do not count)."""
    for group in reversed(_groups):
        if group.dag is dag:
            return group
    return None


def push_dag(dag: DAG) -> None:
    _dags.append(dag)


def pop_dag(dag: DAG) -> None:
    if _dags and _dags[-1] is dag:
        _dags.pop()
    if dag.auto_register and dag not in _collected:
        _collected.append(dag)


def start_collecting() -> None:
    _collected.clear()


def collected() -> list[DAG]:
    return list(_collected)


def push_group(group: TaskGroup) -> None:
    _groups.append(group)


def pop_group(group: TaskGroup) -> None:
    if _groups and _groups[-1] is group:
        _groups.pop()
