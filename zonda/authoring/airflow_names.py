"""Airflow names a DAG or plugin file imports that Zonda has no use for, so the file still imports.

`TaskInstance` and `DagRun` are type names (a file annotates with them; the objects a task receives
are the runner's `ti` and `dag_run`), the state and weight-rule enums Zonda's own, with Airflow's
values; `get_parsing_context()` knows no DAG or task (Zonda loads a file whole); `hookimpl` marks
listener functions, which Zonda does not call (use callbacks); `PriorityWeightStrategy` is the base
class of custom weight rules (`zonda.specs.priority_strategies`, which admission applies). `zonda dags
render --report` lists none of them: importing one changes nothing.
"""

from __future__ import annotations

from typing import NamedTuple, TypeVar

from zonda.resources.models import DagRunState, TaskInstanceState, WeightRule
from zonda.specs.priority_strategies import PriorityWeightStrategy

_F = TypeVar("_F")


class TaskInstance:
    """Airflow's `TaskInstance`, as a type name: a task's code gets its instance as the context's `ti`."""


class DagRun:
    """Airflow's `DagRun`, as a type name: a task's code gets its run as the context's `dag_run`."""


def hookimpl(function: _F) -> _F:
    """Airflow's listener marker; Zonda does not call listeners (use `on_*_callback`)."""
    return function


class AirflowParsingContext(NamedTuple):
    """Airflow's parsing context: which DAG and task the file is loaded for."""

    dag_id: str | None
    task_id: str | None


def get_parsing_context() -> AirflowParsingContext:
    """Airflow's `get_parsing_context()`: Zonda loads a file for all its DAGs (rendering) or re-imports
    it whole (the task runner), so neither is known: both `None`, as Airflow's when it parses the file
    for every DAG. A file that builds only `get_parsing_context().dag_id`'s DAG builds them all."""
    return AirflowParsingContext(dag_id=None, task_id=None)


class State:
    """Airflow's `airflow.utils.state.State`: the state names as strings."""

    SUCCESS = "success"
    FAILED = "failed"
    SKIPPED = "skipped"
    RUNNING = "running"
    QUEUED = "queued"
    UPSTREAM_FAILED = "upstream_failed"
    UP_FOR_RETRY = "up_for_retry"
    NONE = None


__all__ = [
    "AirflowParsingContext",
    "DagRun",
    "DagRunState",
    "PriorityWeightStrategy",
    "State",
    "TaskInstance",
    "TaskInstanceState",
    "WeightRule",
    "get_parsing_context",
    "hookimpl",
]
