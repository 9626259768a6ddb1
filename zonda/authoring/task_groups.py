"""Airflow's `TaskGroup` and `@task_group`: a named set of tasks with an id prefix and shared defaults."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any

from zonda.authoring import contexts
from zonda.authoring.relations import Node

if TYPE_CHECKING:
    from zonda.authoring.dags import DAG


class TaskGroup(Node):
    """`with TaskGroup("group1", tooltip=..., default_args=...) as group1:`; nested groups prefix ids."""

    def __init__(
        self,
        group_id: str,
        prefix_group_id: bool = True,
        parent_group: TaskGroup | None = None,
        dag: DAG | None = None,
        default_args: dict[str, Any] | None = None,
        tooltip: str = "",
        ui_color: str = "CornflowerBlue",
        ui_fgcolor: str = "#000",
        add_suffix_on_collision: bool = False,
    ) -> None:
        owner = dag or (parent_group.dag if parent_group else None) or contexts.current_dag()
        if owner is None:
            raise RuntimeError(f"TaskGroup {group_id!r} must be created inside a DAG or be given dag=")
        self.dag: DAG = owner
        self.parent_group = parent_group if parent_group is not None else contexts.current_group(self.dag)
        self.prefix_group_id = prefix_group_id
        self.default_args = dict(default_args or {})
        self.tooltip = tooltip
        self.children: list[Any] = []
        self.upstream_edges = {}
        taken = {group.label for group in self.dag.task_groups}
        label = group_id
        if add_suffix_on_collision and label in taken:
            number = 1
            while f"{group_id}__{number}" in taken:
                number += 1
            label = f"{group_id}__{number}"
        elif label in taken:
            raise ValueError(f"TaskGroup id {label!r} has already been added to the DAG {self.dag.dag_id}")
        self.label: str = label
        self.dag.task_groups.append(self)
        if self.parent_group is not None:
            self.parent_group.children.append(self)

    def __repr__(self) -> str:
        return f"<TaskGroup: {self.group_id}>"

    @property
    def group_id(self) -> str:
        """The full id: the parent's id as prefix when the parent prefixes (Airflow's `group_id`)."""
        if self.parent_group is None or not self.parent_group.prefix_group_id:
            return self.label
        return f"{self.parent_group.group_id}.{self.label}"

    @property
    def node_id(self) -> str:
        return self.group_id

    def child_id(self, label: str) -> str:
        return f"{self.group_id}.{label}" if self.prefix_group_id else label

    def chain(self) -> list[TaskGroup]:
        """This group and its enclosing groups, innermost first."""
        groups: list[TaskGroup] = []
        group: TaskGroup | None = self
        while group is not None:
            groups.append(group)
            group = group.parent_group
        return groups

    def add(self, task: Any) -> None:
        self.children.append(task)

    def __enter__(self) -> TaskGroup:
        contexts.push_group(self)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        contexts.pop_group(self)


def task_group(python_callable: Callable[..., Any] | None = None, **group_kwargs: Any) -> Any:
    """Airflow's `@task_group`: each call of the function builds its tasks inside a new `TaskGroup`.

    The group id defaults to the function's name (suffixed `__1`, `__2`... on later calls), the tooltip
    to its docstring. The call returns what the function returned if it is a task or an XComArg, else
    the group, so `start >> my_group() >> end` works either way.
    """

    def decorate(function: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(function)
        def build(*args: Any, **kwargs: Any) -> Any:
            options = {"group_id": function.__name__, "add_suffix_on_collision": True, **group_kwargs}
            if function.__doc__ and not options.get("tooltip"):
                options["tooltip"] = inspect.cleandoc(function.__doc__)
            with TaskGroup(**options) as group:
                returned = function(*args, **kwargs)
            from zonda.authoring.relations import DependencyMixin

            return returned if isinstance(returned, DependencyMixin) and returned is not None else group

        return build

    return decorate(python_callable) if python_callable is not None else decorate
