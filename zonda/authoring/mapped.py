"""Authoring dynamic task mapping: `.partial(...).expand(...)`, `.expand_kwargs(...)`, `XComArg.map()`
and `XComArg.zip()`, as Airflow 2.3+ writes them.

A mapped task is an ordinary operator (or TaskFlow task) that also carries `expand_spec`: the
sources to map over (literal lists and dicts, `XComArg`s, zips and maps of them), which the manifest
compiler writes as the task's `expand` field (see `zonda.specs.mapping`). The scheduler decides how many
instances it gets when its upstreams finish; each instance's try receives its own items.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from zonda.authoring.taskflow import NOTSET, XComArg

if TYPE_CHECKING:
    from zonda.authoring.relations import Node
    from zonda.operators.base import BaseOperator


class MapXComArg(XComArg):
    """`XComArg.map(function)`: each item passed through `function` in the mapped instance's own try."""

    def __init__(self, source: XComArg, function: Callable[[Any], Any]) -> None:
        super().__init__(source.operator, source.key)
        self.source = source
        self.function = function

    def __repr__(self) -> str:
        return f"MapXComArg({self.source!r}, {getattr(self.function, '__qualname__', self.function)!r})"

    def roots(self) -> list[Node]:
        return self.source.roots()

    leaves = roots


class ZipXComArg(XComArg):
    """`XComArg.zip(*others, fillvalue=...)`: items paired up, as long as the shortest (or the longest
    when `fillvalue` is given)."""

    def __init__(self, sources: list[Any], fillvalue: Any = NOTSET) -> None:
        first = next(source for source in sources if isinstance(source, XComArg))
        super().__init__(first.operator, first.key)
        self.sources = sources
        self.fill = fillvalue is not NOTSET
        self.fillvalue = None if fillvalue is NOTSET else fillvalue

    def __repr__(self) -> str:
        return f"ZipXComArg({self.sources!r})"

    def roots(self) -> list[Node]:
        return [root for source in self.sources if isinstance(source, XComArg) for root in source.roots()]

    leaves = roots


def check_source(value: Any, where: str) -> None:
    if isinstance(value, XComArg | list | tuple | dict):
        return
    raise TypeError(f"{where}: cannot map over a {type(value).__name__}: give a list, a dict or an XComArg")


def attach(
    operator: BaseOperator,
    *,
    kwargs: Mapping[str, Any] | None = None,
    kwargs_list: Any = None,
    into: str | None = None,
) -> None:
    """Make `operator` mapped, and depend on the tasks whose XComs it maps over."""
    if kwargs is not None:
        if not kwargs:
            raise TypeError("expand() needs at least one argument to map over")
        for name, value in kwargs.items():
            check_source(value, f"expand {name}")
    else:
        check_source(kwargs_list, "expand_kwargs")
    operator.expand_spec = {
        "kwargs": dict(kwargs) if kwargs is not None else None,
        "kwargs_list": kwargs_list,
        "into": into,
    }
    values = list((kwargs or {}).values()) if kwargs is not None else [kwargs_list]
    # `.map()` functions by position: the runner, importing the DAG file again, finds them here.
    operator.map_functions = [function for value in values for function in _map_functions(value)]
    for value in values:
        for root in roots_of(value):
            if root is not operator:
                operator.set_upstream(root)


def _map_functions(value: Any) -> list[Callable[[Any], Any]]:
    if isinstance(value, MapXComArg):
        return [*_map_functions(value.source), value.function]
    if isinstance(value, ZipXComArg):
        return [function for source in value.sources for function in _map_functions(source)]
    return []


def roots_of(value: Any) -> list[Any]:
    if isinstance(value, XComArg):
        return value.roots()
    if isinstance(value, Mapping):
        return [root for item in value.values() for root in roots_of(item)]
    if isinstance(value, list | tuple):
        return [root for item in value for root in roots_of(item)]
    return []


class PartialOperator:
    """`SomeOperator.partial(task_id=..., **fixed)`: what `.expand()` / `.expand_kwargs()` complete."""

    def __init__(self, operator_class: type[BaseOperator], kwargs: dict[str, Any]) -> None:
        if "task_id" not in kwargs:
            raise TypeError(f"{operator_class.__name__}.partial() needs a task_id")
        self.operator_class = operator_class
        self.kwargs = kwargs

    def expand(self, **mapped: Any) -> BaseOperator:
        from zonda.operators.base import _accepted_arguments

        accepted = _accepted_arguments(self.operator_class)
        unknown = sorted(name for name in mapped if name not in accepted)
        if unknown:
            raise TypeError(f"{self.operator_class.__name__}.expand() got unexpected argument(s) {unknown}")
        overlap = sorted(set(mapped) & set(self.kwargs))
        if overlap:
            raise TypeError(f"arguments {overlap} are given to both partial() and expand()")
        return self._build(kwargs=mapped)

    def expand_kwargs(self, source: Any) -> BaseOperator:
        return self._build(kwargs_list=source)

    def _build(self, **expand: Any) -> BaseOperator:
        from zonda.specs import operator_arguments

        # Required arguments each instance gets are None while authoring, and left out of the manifest.
        required = operator_arguments.signature_of_class(self.operator_class).required
        placeholders = {name: None for name in required if name not in self.kwargs and name != "task_id"}
        operator = self.operator_class(**{**self.kwargs, **placeholders})
        for name in placeholders:
            operator.authored_arguments.pop(name, None)
        attach(operator, **expand)
        return operator


class PartialTask:
    """A TaskFlow function's `.partial(**fixed)`: the fixed keyword arguments of every instance."""

    def __init__(self, decorated: Any, kwargs: dict[str, Any]) -> None:
        self.decorated = decorated
        self.kwargs = kwargs

    def expand(self, **mapped: Any) -> XComArg:
        overlap = sorted(set(mapped) & set(self.kwargs))
        if overlap:
            raise TypeError(f"arguments {overlap} are given to both partial() and expand()")
        return self._build(kwargs=mapped)

    def expand_kwargs(self, source: Any) -> XComArg:
        return self._build(kwargs_list=source)

    def _build(self, **expand: Any) -> XComArg:
        result: XComArg = self.decorated(**self.kwargs)
        attach(result.operator, into="op_kwargs", **expand)
        return result
