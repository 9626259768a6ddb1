"""Dynamic task mapping (Airflow 2.3's `.expand()`): how many instances a mapped task gets, and what
each one receives.

A mapped task's spec carries an `ExpandSpec` whose values are *sources*:

- a literal list, or a literal dict (its items, each a ``(key, value)`` pair, as Airflow maps a dict);
- an XCom reference, ``{"__zonda_xcom__": {"task_id": ..., "key": ...}}`` (`zonda.resources.xcom_refs`);
- ``{"__zonda_zip__": {"sources": [...], "fillvalue": ..., "fill": true}}``: `XComArg.zip()`, as long as
  the shortest source, or the longest with ``fill`` (Python's `zip` / `itertools.zip_longest`);
- ``{"__zonda_map__": {"source": ..., "callable": "pkg.mod:fn"}}``: `XComArg.map(fn)`, as long as its
  source; the function runs in the mapped task's own try, on its item only.

The count is decided by the scheduler when the upstreams finish, from the XComs' lengths the task
runner reports (`TaskInstanceStatus.xcom_lengths`): the values themselves may be in an XCom backend
the controller never reads. The items are picked by the task runner. `.expand(a=..., b=...)` is the
cross product, the last argument varying fastest (Airflow's `DictOfListsExpandInput`);
`.expand_kwargs(source)` gives one instance per dict.

In a run's status a mapped task's instances are keyed ``task_id[map_index]`` (see `ti_key`); before
its expansion (and when it expands to nothing) the task has one instance under its own id, as
Airflow's ``map_index=-1`` task instance.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from zonda.resources import xcom_refs

if TYPE_CHECKING:  # the task runner picks a mapped instance's arguments without the resource models
    from zonda.resources.invocations import MappedExpansion
    from zonda.resources.models import ExpandSpec

#: Airflow's `[core] max_map_length`: more instances than this fail the mapped task.
DEFAULT_MAX_MAP_LENGTH = 1024
ZIP_MARKER = "__zonda_zip__"
MAP_MARKER = "__zonda_map__"
_KEY = re.compile(r"^(?P<task_id>.+)\[(?P<index>\d+)\]$")

#: The length of the XCom `key` of task `task_id`, None when it pushed no list or dict.
XComLength = Callable[[str, str], int | None]
#: Read the XCom `key` of task `task_id` (a mapped task's: the list of its instances' values).
XComPull = Callable[[str, str], Any]


class MappingError(ValueError):
    """A mapped task cannot be expanded: an upstream pushed nothing to map over, or too much."""


# ------------------------------------------------------------------------------------------ keys


def ti_key(task_id: str, map_index: int = -1) -> str:
    """A task instance's key in a run's status: the task id, with ``[i]`` for a mapped instance."""
    return task_id if map_index < 0 else f"{task_id}[{map_index}]"


def split_key(key: str) -> tuple[str, int]:
    """`ti_key`'s inverse: (task id, map index), -1 for an unmapped instance."""
    match = _KEY.match(key)
    if match is None:
        return key, -1
    return match["task_id"], int(match["index"])


def is_mapped(expand: ExpandSpec | None) -> bool:
    return expand is not None and (expand.kwargs is not None or expand.kwargs_list is not None)


def zip_source(*sources: Any, fillvalue: Any = None, fill: bool = False) -> dict[str, Any]:
    return {ZIP_MARKER: {"sources": list(sources), "fillvalue": fillvalue, "fill": fill}}


def map_source(source: Any, callable_path: str) -> dict[str, Any]:
    return {MAP_MARKER: {"source": source, "callable": callable_path}}


def _marked(value: Any, marker: str) -> dict[str, Any] | None:
    if isinstance(value, dict) and set(value) == {marker} and isinstance(value[marker], dict):
        inner: dict[str, Any] = value[marker]
        return inner
    return None


def _sources(expand: ExpandSpec) -> list[Any]:
    if expand.kwargs_list is not None:
        return [expand.kwargs_list]
    return list((expand.kwargs or {}).values())


def argument_names(expand: ExpandSpec | None) -> list[str]:
    """The operator arguments a mapped task gets per instance (those of `.expand`; none for TaskFlow's
    `op_kwargs`, nor for `expand_kwargs`, whose names are only known at run time)."""
    if expand is None or expand.into is not None or expand.kwargs is None:
        return []
    return list(expand.kwargs)


def source_task_ids(expand: ExpandSpec | None) -> set[str]:
    """The tasks whose XComs a mapped task expands over (they must be its upstreams)."""
    if expand is None:
        return set()
    return set().union(*(xcom_refs.referenced_task_ids(source) for source in _sources(expand)))


def check_expand(expand: ExpandSpec) -> list[str]:
    """What is wrong with how a task is mapped (the DAG's validation reports it)."""
    if expand.kwargs is not None and expand.kwargs_list is not None:
        return ["expand: use kwargs (.expand) or kwargsList (.expand_kwargs), not both"]
    if expand.kwargs is not None and not expand.kwargs:
        return ["expand: .expand() needs at least one argument to map over"]
    problems: list[str] = []
    for name, source in (expand.kwargs or {"kwargsList": expand.kwargs_list}).items():
        problems.extend(_check_source(source, f"expand {name}"))
    return problems


def _check_source(source: Any, where: str) -> list[str]:
    if xcom_refs.is_reference(source) or isinstance(source, list):
        return []
    if (zipped := _marked(source, ZIP_MARKER)) is not None:
        return [problem for item in zipped.get("sources", []) for problem in _check_source(item, where)]
    if (mapped := _marked(source, MAP_MARKER)) is not None:
        return _check_source(mapped.get("source"), where)
    if isinstance(source, dict):
        return [] if not any(key.startswith("__zonda_") for key in source) else [f"{where}: unknown source"]
    return [f"{where}: cannot map over a {type(source).__name__}: give a list, a dict or an upstream's XCom"]


# ----------------------------------------------------------------------------------- the count


def source_length(source: Any, xcom_length: XComLength) -> int:
    """How many items a source has; `MappingError` when an XCom to map over is not a list or dict."""
    if xcom_refs.is_reference(source):
        target = source[xcom_refs.MARKER]
        task_id, key = target["task_id"], target.get("key", xcom_refs.RETURN_KEY)
        length = xcom_length(task_id, key)
        if length is None:
            raise MappingError(
                f"task {task_id!r} pushed no list or dict as XCom {key!r} to map over "
                "(Airflow's UnmappableXComTypePushed / XComForMappingNotPushed)"
            )
        return length
    if (zipped := _marked(source, ZIP_MARKER)) is not None:
        lengths = [source_length(item, xcom_length) for item in zipped["sources"]]
        return (max if zipped.get("fill") else min)(lengths, default=0)
    if (mapped := _marked(source, MAP_MARKER)) is not None:
        return source_length(mapped["source"], xcom_length)
    if isinstance(source, list | dict):
        return len(source)
    raise MappingError(f"cannot map over a {type(source).__name__}")


def expansion_length(expand: ExpandSpec, xcom_length: XComLength) -> int:
    """How many task instances a mapped task gets: the product of its sources' lengths, or the
    length of `expand_kwargs`'s list."""
    lengths = [source_length(source, xcom_length) for source in _sources(expand)]
    total = 1
    for length in lengths:
        total *= length
    return total


def check_length(length: int, max_map_length: int) -> str | None:
    """Airflow's `max_map_length` check: the sentence of the failure, or None."""
    if length > max_map_length:
        return (
            f"The mapped task would have {length} instances, more than max_map_length={max_map_length} "
            "(Airflow's [core] max_map_length): map over fewer items or raise the limit"
        )
    return None


# --------------------------------------------------------------------------- one instance's items


def _items(value: Any, where: str) -> Sequence[Any]:
    if isinstance(value, Mapping):
        return list(value.items())
    if isinstance(value, list | tuple):
        return value
    raise MappingError(f"{where}: cannot map over a {type(value).__name__}: it is not a list or dict")


class _Resolver:
    """Reads sources at run time: XComs through `pull`, `.map()` functions through `load`."""

    def __init__(self, pull: XComPull, load: Callable[[str], Callable[[Any], Any]]) -> None:
        self.pull = pull
        self.load = load

    def items(self, source: Any, where: str) -> Sequence[Any]:
        """Every item of the source, `.map()` functions applied."""
        if (mapped := _marked(source, MAP_MARKER)) is not None:
            function = self.load(mapped["callable"])
            return [function(item) for item in self.items(mapped["source"], where)]
        return self._unmapped(source, where)

    def _unmapped(self, source: Any, where: str) -> Sequence[Any]:
        if xcom_refs.is_reference(source):
            return _items(
                xcom_refs.resolve(source, lambda task_id: self.pull(task_id, xcom_refs.RETURN_KEY)), where
            )
        if (zipped := _marked(source, ZIP_MARKER)) is not None:
            parts = [self.items(part, where) for part in zipped["sources"]]
            if zipped.get("fill"):
                return list(itertools.zip_longest(*parts, fillvalue=zipped.get("fillvalue")))
            return list(zip(*parts, strict=False))
        return _items(source, where)

    def length(self, source: Any, where: str) -> int:
        if (mapped := _marked(source, MAP_MARKER)) is not None:
            return self.length(mapped["source"], where)
        return len(self._unmapped(source, where))

    def item(self, source: Any, index: int, where: str) -> Any:
        """One item: a `.map()` function runs on this instance's item only, as Airflow's lazy map."""
        if (mapped := _marked(source, MAP_MARKER)) is not None:
            return self.load(mapped["callable"])(self.item(mapped["source"], index, where))
        return self._unmapped(source, where)[index]


def expanded_arguments(
    expand: ExpandSpec | MappedExpansion,
    map_index: int,
    pull: XComPull,
    load: Callable[[str], Callable[[Any], Any]],
) -> dict[str, Any]:
    """The arguments instance `map_index` of a mapped task receives (run by the task runner)."""
    resolver = _Resolver(pull, load)
    if expand.kwargs_list is not None:
        chosen = resolver.item(expand.kwargs_list, map_index, "expand_kwargs")
        if not isinstance(chosen, Mapping):
            raise MappingError(f"expand_kwargs needs dicts, item {map_index} is a {type(chosen).__name__}")
        return dict(chosen)
    sources = expand.kwargs or {}
    lengths = {name: resolver.length(source, f"expand {name}") for name, source in sources.items()}
    indexes: dict[str, int] = {}
    rest = map_index
    for name in reversed(list(sources)):  # the last argument varies fastest (itertools.product)
        if lengths[name] < 1:
            raise MappingError(f"expand {name}: nothing to map over")
        rest, indexes[name] = divmod(rest, lengths[name])
    if rest:
        raise MappingError(f"map index {map_index} is beyond the {_product(lengths.values())} combinations")
    return {name: resolver.item(source, indexes[name], f"expand {name}") for name, source in sources.items()}


def _product(values: Any) -> int:
    total = 1
    for value in values:
        total *= value
    return total


def instance_counts(keys: Iterable[str]) -> dict[str, int]:
    """Each expanded mapped task's instance count (its highest map index + 1), from status keys."""
    counts: dict[str, int] = {}
    for key in keys:
        task_id, index = split_key(key)
        if index >= 0:
            counts[task_id] = max(counts.get(task_id, 0), index + 1)
    return counts


def value_lengths(values: Mapping[str, Any]) -> dict[str, int]:
    """The lengths the runner reports of the XComs it pushed: lists and dicts only."""
    return {key: len(value) for key, value in values.items() if isinstance(value, list | dict)}
