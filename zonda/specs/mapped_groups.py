"""Mapped task groups (Airflow 2.5's `@task_group` `.expand()` / `.expand_kwargs()`).

Each map index runs the whole group. The group's `expand` (a `zonda.resources.models.ExpandSpec` on its
`TaskGroupSpec`) is given to every task inside it, with `into` set to `GROUP_INTO`: each task has as
many instances as the group has items, and instance ``i`` gets the group's arguments of index ``i``
wherever its arguments hold a `group_argument` marker (Airflow's `MappedArgument`). The marker is
``{"__zonda_group_arg__": name}``: the group function's parameter `name`.

Inside the group, dependencies and XCom pulls are per index (Airflow's
`_get_relevant_upstream_map_indexes`): ``g.b[i]`` waits for ``g.a[i]`` only and pulls its value;
tasks outside the group count every instance.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from zonda.specs import mapping

if TYPE_CHECKING:  # the task runner substitutes arguments without the resource models
    from zonda.resources.models import ExpandSpec, TaskSpec
    from zonda.specs.graph import GraphBuilder

GROUP_ARGUMENT_MARKER = "__zonda_group_arg__"
#: `ExpandSpec.into` of a task inside a mapped group: its arguments hold markers, not mapped names.
GROUP_INTO = "__zonda_group__"


def group_argument(name: str) -> dict[str, str]:
    """The manifest form of the group function's parameter `name` inside a mapped group."""
    return {GROUP_ARGUMENT_MARKER: name}


def is_group_argument(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and set(value) == {GROUP_ARGUMENT_MARKER}
        and isinstance(value[GROUP_ARGUMENT_MARKER], str)
    )


def is_group_expansion(expand: Any) -> bool:
    return expand is not None and getattr(expand, "into", None) == GROUP_INTO


def marked_arguments(args: Mapping[str, Any]) -> list[str]:
    """The arguments holding a group argument: their type is only known per index."""
    return [name for name, value in args.items() if _holds_marker(value)]


def _holds_marker(value: Any) -> bool:
    if is_group_argument(value):
        return True
    if isinstance(value, dict):
        return any(_holds_marker(item) for item in value.values())
    return isinstance(value, list) and any(_holds_marker(item) for item in value)


def substitute(value: Any, arguments: Mapping[str, Any]) -> Any:
    """`value` with every group-argument marker replaced by this index's argument."""
    if is_group_argument(value):
        name = value[GROUP_ARGUMENT_MARKER]
        if name not in arguments:
            raise mapping.MappingError(
                f"the mapped task group gives no argument {name!r} at this index (it has {sorted(arguments)})"
            )
        return arguments[name]
    if isinstance(value, dict):
        return {key: substitute(item, arguments) for key, item in value.items()}
    if isinstance(value, list):
        return [substitute(item, arguments) for item in value]
    return value


def per_index_xcoms(
    returned: Mapping[str, Any], keyed: Mapping[str, Mapping[str, Any]], peers: frozenset[str], map_index: int
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The XComs instance `map_index` of a task in a mapped group reads: a task of the same group
    under its own id is its instance of the same index (Airflow pulls that index only)."""
    own_returned = {key: value for key, value in returned.items() if mapping.split_key(key)[0] not in peers}
    own_keyed = {key: dict(value) for key, value in keyed.items() if mapping.split_key(key)[0] not in peers}
    for peer in peers:
        same = mapping.ti_key(peer, map_index)
        if same in returned:
            own_returned[peer] = returned[same]
        if same in keyed:
            own_keyed[peer] = dict(keyed[same])
    return own_returned, own_keyed


def task_expansion(
    graph: GraphBuilder, task_id: str, task: TaskSpec
) -> tuple[list[str], str | None, ExpandSpec | None]:
    """The mapped task group a task is in, and the expansion it gets from it (its own if none)."""
    mapped = [gid for gid in graph.chain(graph.task_group[task_id]) if graph.groups[gid].expand is not None]
    own = task.expand if mapping.is_mapped(task.expand) else None
    if not mapped:
        return [], None, own
    errors: list[str] = []
    if len(mapped) > 1:
        errors.append(
            f"task {task_id!r}: mapped task groups inside mapped task groups are not supported "
            f"({mapped[0]!r} inside {mapped[-1]!r}): make the inner one a plain TaskGroup, which runs once "
            f"per index of the outer one, or map it from a task outside {mapped[-1]!r}"
        )
    if own is not None:
        errors.append(
            f"task {task_id!r}: a mapped task inside the mapped task group {mapped[0]!r} is not supported: "
            f"make it a plain task of the group, which runs once per index, or map it outside the group"
        )
    group_expand = graph.groups[mapped[0]].expand
    assert group_expand is not None
    errors.extend(f"task group {mapped[0]!r}: {problem}" for problem in mapping.check_expand(group_expand))
    return errors, mapped[0], group_expand.model_copy(update={"into": GROUP_INTO})


def peers(graph: GraphBuilder, group: str | None, task_id: str) -> frozenset[str]:
    if group is None:
        return frozenset()
    return frozenset(
        other for other in graph.tasks if other != task_id and group in graph.chain(graph.task_group[other])
    )
