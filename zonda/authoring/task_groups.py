"""Airflow's `TaskGroup` and `@task_group`: a named set of tasks with an id prefix and shared defaults."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
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
        self.expand_spec: dict[str, Any] | None = None  # a mapped task group's sources (`GroupFunction`)
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


class MappedArgument:
    """A mapped task group function's parameter (Airflow's `MappedArgument`): each map index's value,
    substituted in the arguments of the tasks that use it when the instance runs."""

    def __init__(self, group: TaskGroup, name: str) -> None:
        self.group = group
        self.name = name

    def __repr__(self) -> str:
        return f"MappedArgument({self.group.group_id!r}, {self.name!r})"


def task_group(python_callable: Callable[..., Any] | None = None, **group_kwargs: Any) -> Any:
    """Airflow's `@task_group`: each call of the function builds its tasks inside a new `TaskGroup`.

    The group id defaults to the function's name (suffixed `__1`, `__2`... on later calls), the tooltip
    to its docstring. The call returns what the function returned if it is a task or an XComArg, else
    the group, so `start >> my_group() >> end` works either way. `.expand(...)`, `.expand_kwargs(...)`
    and `.partial(...)` build a mapped task group (`GroupFunction`).
    """

    def decorate(function: Callable[..., Any]) -> GroupFunction:
        return GroupFunction(function, group_kwargs)

    return decorate(python_callable) if python_callable is not None else decorate


class GroupFunction:
    """A `@task_group` function: called, it builds one group; expanded, a mapped task group."""

    def __init__(self, function: Callable[..., Any], group_kwargs: dict[str, Any], fixed: Any = None) -> None:
        functools.update_wrapper(self, function)
        self.function = function
        self.group_kwargs = group_kwargs
        self.fixed: dict[str, Any] = dict(fixed or {})

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._build(None, args, {**self.fixed, **kwargs})

    def override(self, **group_kwargs: Any) -> GroupFunction:
        """The same function with other `TaskGroup` arguments (e.g. `group_id`), as Airflow's."""
        return GroupFunction(self.function, {**self.group_kwargs, **group_kwargs}, self.fixed)

    def partial(self, **fixed: Any) -> GroupFunction:
        """The arguments every map index gets alike (Airflow's `.partial` on a task group)."""
        self._check_names("partial", fixed)
        if duplicated := sorted(set(fixed) & set(self.fixed)):
            raise TypeError(f"partial() got arguments {duplicated} a previous partial() gave")
        return GroupFunction(self.function, self.group_kwargs, {**self.fixed, **fixed})

    def expand(self, **mapped: Any) -> Any:
        """One run of the group per item (or combination of items), Airflow's mapped task group."""
        if not mapped:
            raise TypeError("expand() needs at least one argument to map over")
        self._check_names("expand", mapped)
        if overlap := sorted(set(mapped) & set(self.fixed)):
            raise TypeError(f"arguments {overlap} are given to both partial() and expand()")
        return self._build({"kwargs": mapped}, (), dict(self.fixed), names=list(mapped))

    def expand_kwargs(self, source: Any) -> Any:
        """One run of the group per dict of arguments (its keys: the function's parameters)."""
        from zonda.authoring.taskflow import XComArg

        items = source if isinstance(source, list | tuple) else None
        if not isinstance(source, XComArg) and (
            items is None or not all(isinstance(item, XComArg | Mapping) for item in items)
        ):
            raise TypeError(f"expand_kwargs() expects an XComArg or a list of dicts, not {source!r}")
        parameters = inspect.signature(self.function).parameters
        if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in parameters.values()):
            raise TypeError("expand_kwargs() on a task group function with * or ** is not supported")
        names = [name for name in parameters if name not in self.fixed]
        return self._build({"kwargs_list": source}, (), dict(self.fixed), names=names)

    def _check_names(self, method: str, arguments: Mapping[str, Any]) -> None:
        parameters = inspect.signature(self.function).parameters
        if any(p.kind is p.VAR_KEYWORD for p in parameters.values()):
            return
        if unknown := sorted(set(arguments) - set(parameters)):
            raise TypeError(f"{method}() got unexpected argument(s) {unknown} for {self.function.__name__}()")

    def _build(
        self, expand: dict[str, Any] | None, args: tuple[Any, ...], kwargs: dict[str, Any], names: Any = ()
    ) -> Any:
        from zonda.authoring import mapped
        from zonda.authoring.relations import DependencyMixin

        options = {"group_id": self.function.__name__, "add_suffix_on_collision": True, **self.group_kwargs}
        if self.function.__doc__ and not options.get("tooltip"):
            options["tooltip"] = inspect.cleandoc(self.function.__doc__)
        with TaskGroup(**options) as group:
            if expand is not None:
                for value in [*(expand.get("kwargs") or {}).values(), expand.get("kwargs_list")]:
                    if value is not None:
                        mapped.check_source(value, "expand")
                group.expand_spec = {"kwargs": expand.get("kwargs"), "kwargs_list": expand.get("kwargs_list")}
                kwargs.update({name: MappedArgument(group, name) for name in names})
            returned = self.function(*args, **kwargs)
        if expand is not None:  # the group's roots wait for the XComs it maps over
            for value in [*(expand.get("kwargs") or {}).values(), expand.get("kwargs_list")]:
                for root in mapped.roots_of(value):
                    group.set_upstream(root)
        return returned if isinstance(returned, DependencyMixin) and returned is not None else group
