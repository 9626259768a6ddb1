"""What creating an operator inside a DAG does: Airflow's `apply_defaults` and DAG/task-group assignment.

`BaseOperator` calls `before_init` and `after_init` around the outermost `__init__` of each operator.
Outside any DAG (the task runner builds operators from a task's args) they only record the arguments.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from zonda.authoring import contexts
from zonda.specs import operator_arguments

if TYPE_CHECKING:
    from zonda.authoring.dags import DAG
    from zonda.authoring.task_groups import TaskGroup
    from zonda.operators.base import BaseOperator

#: Arguments that place an operator rather than configure it; never passed to `__init__`.
PLACEMENT_ARGUMENTS = ("dag", "task_group", "default_args")


def before_init(operator: BaseOperator, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments `__init__` gets: the given ones over the `default_args` it accepts."""
    dag: DAG | None = kwargs.pop("dag", None) or contexts.current_dag()
    group: TaskGroup | None = kwargs.pop("task_group", None)
    if group is None:
        group = contexts.current_group(dag)
    elif dag is None:
        dag = group.dag
    own_defaults: Mapping[str, Any] = kwargs.pop("default_args", None) or {}
    accepted = operator_arguments.signature_of_class(type(operator)).accepted
    explicit = dict(kwargs)
    explicit.update({k: v for k, v in own_defaults.items() if k not in kwargs and k in accepted})
    explicit.pop("task_id", None)
    operator.authored_arguments = explicit
    operator.upstream_edges = {}
    operator.task_group = group
    operator.label = kwargs.get("task_id") if "task_id" in kwargs else (args[0] if args else None)
    inherited: dict[str, Any] = {}
    if dag is not None:
        inherited.update(dag.default_args)
    for enclosing in reversed(group.chain() if group is not None else []):
        inherited.update(enclosing.default_args)
    inherited.update(own_defaults)
    for name, value in inherited.items():
        if name not in kwargs and name in accepted and name != "task_id":
            kwargs[name] = value
    operator.authoring_dag = dag
    return kwargs


def after_init(operator: BaseOperator) -> None:
    """Give the operator its full id, add it to its DAG and group, and depend on the XComs it reads."""
    dag, group = operator.authoring_dag, operator.task_group
    if operator.label is not None and group is not None:
        operator.task_id = group.child_id(operator.label)
    if dag is None:
        return
    operator.dag = dag
    dag.add_task(operator)
    if group is not None:
        group.add(operator)
    for value in operator.authored_arguments.values():
        for upstream in xcom_args_in(value):
            operator.set_upstream(upstream)


def xcom_args_in(value: Any) -> list[Any]:
    """Every `XComArg` inside an argument value (lists, tuples and dicts are searched)."""
    from zonda.authoring.taskflow import XComArg

    if isinstance(value, XComArg):
        return list(value.roots())  # a zip's every source
    if isinstance(value, Mapping):
        return [found for item in value.values() for found in xcom_args_in(item)]
    if isinstance(value, list | tuple | set):
        return [found for item in value for found in xcom_args_in(item)]
    return []
