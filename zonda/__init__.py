"""Zonda: Airflow-style DAG orchestration, native to Kubernetes. The pure domain and authoring API.

`from zonda import DAG, dag, task, TaskGroup, Label, chain, cross_downstream, Param` is the authoring
API (`zonda.authoring`); the names load on first use, so importing any `zonda.*` module stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from zonda.authoring.dags import DAG, dag
    from zonda.authoring.params import Param
    from zonda.authoring.relations import Label, chain, cross_downstream
    from zonda.authoring.task_groups import TaskGroup, task_group
    from zonda.authoring.taskflow import XComArg, task

__all__ = [
    "DAG", "Label", "Param", "TaskGroup", "XComArg", "chain", "cross_downstream", "dag", "task", "task_group",
]  # fmt: skip


def __getattr__(name: str) -> Any:
    if name in __all__:
        import zonda.authoring

        return getattr(zonda.authoring, name)
    raise AttributeError(f"module 'zonda' has no attribute {name!r}")
