"""Dependencies between tasks and groups: `>>`, `<<`, `set_upstream`, `chain`, `chain_linear`,
`cross_downstream`, `Label`.

Airflow 2.x's `DependencyMixin` semantics: `a >> b` returns `b` (so chains read left to right), lists work
on either side, and an edge may carry a `Label` (Airflow's `EdgeModifier`), written inline
(`a >> Label("x") >> b`) or passed to `set_downstream`. A node records only its direct upstream ids and
the labels of those edges; the manifest compiler turns them into `dependsOn` and `edgeLabels`.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from typing import Any, Union


class DependencyMixin:
    """What a task, a task group, an `XComArg` and a `Label` share: they can be put in order."""

    def roots(self) -> list[Node]:
        """The nodes an edge into this one ends at."""
        raise NotImplementedError

    def leaves(self) -> list[Node]:
        """The nodes an edge out of this one starts from."""
        raise NotImplementedError

    def set_upstream(self, other: Relatable, edge_modifier: Label | DependencyMixin | None = None) -> None:
        other, label = _with_label(other, edge_modifier)
        for node in _flatten(other):
            _link(node, self, label)

    def set_downstream(self, other: Relatable, edge_modifier: Label | DependencyMixin | None = None) -> None:
        """`a.set_downstream(b)`, `a.set_downstream([b, c])`, `a.set_downstream(b, Label("x"))`.

        `a.set_downstream(b, c)` (as the DAGs page writes it) means both tasks, not a label.
        """
        other, label = _with_label(other, edge_modifier)
        for node in _flatten(other):
            _link(self, node, label)

    def update_relative(self, other: DependencyMixin, upstream: bool = True) -> None:
        """Called on the other side of an edge (Airflow's hook); nothing to do by default."""

    def __rshift__(self, other: Any) -> Any:
        self.set_downstream(other)
        return other

    def __lshift__(self, other: Any) -> Any:
        self.set_upstream(other)
        return other

    def __rrshift__(self, other: Any) -> DependencyMixin:
        """`[a, b] >> self`."""
        self.set_upstream(other)
        return self

    def __rlshift__(self, other: Any) -> DependencyMixin:
        """`[a, b] << self`."""
        self.set_downstream(other)
        return self


class Node(DependencyMixin):
    """A task or a task group: something with an id that other nodes depend on."""

    #: Direct upstream nodes, in the order they were declared, with each edge's label (or None).
    upstream_edges: dict[Node, str | None]

    @property
    def node_id(self) -> str:
        raise NotImplementedError

    def roots(self) -> list[Node]:
        return [self]

    def leaves(self) -> list[Node]:
        return [self]

    def add_upstream(self, upstream: Node, label: str | None) -> None:
        if upstream is self:
            raise ValueError(f"{self.node_id!r} cannot depend on itself")
        if label is not None or upstream not in self.upstream_edges:
            self.upstream_edges[upstream] = label
        _share_dag(self, upstream)
        _share_dag(upstream, self)


class Label(DependencyMixin):
    """A label on the edges it sits on (Airflow's `airflow.utils.edgemodifier.Label`).

    `a >> Label("x") >> b` remembers `a` while it waits for the right-hand side, then makes `a >> b`
    labelled "x".
    """

    def __init__(self, label: str) -> None:
        self.label = label
        self._upstream: list[Node] = []
        self._downstream: list[Node] = []

    def __repr__(self) -> str:
        return f"Label({self.label!r})"

    def roots(self) -> list[Node]:
        return []

    def leaves(self) -> list[Node]:
        return []

    def set_upstream(self, other: Relatable, edge_modifier: Label | DependencyMixin | None = None) -> None:
        for node in _flatten(other):
            for leaf in node.leaves():
                self._upstream.append(leaf)
                for downstream in self._downstream:
                    downstream.add_upstream(leaf, self.label)

    def set_downstream(self, other: Relatable, edge_modifier: Label | DependencyMixin | None = None) -> None:
        for node in _flatten(other):
            for root in node.roots():
                self._downstream.append(root)
                for upstream in self._upstream:
                    root.add_upstream(upstream, self.label)


Relatable = Union[DependencyMixin, Sequence[DependencyMixin]]  # noqa: UP007 - a runtime alias


def _share_dag(node: Node, other: Node) -> None:
    """Airflow's DAG assignment: an operator put up- or downstream of one in a DAG joins that DAG."""
    dag = getattr(other, "authoring_dag", None)
    if dag is not None and getattr(node, "authoring_dag", "n/a") is None:
        node.authoring_dag = node.dag = dag  # type: ignore[attr-defined]
        dag.add_task(node)


def _with_label(other: Any, edge_modifier: Any) -> tuple[Any, Label | None]:
    if edge_modifier is None or isinstance(edge_modifier, Label):
        return other, edge_modifier
    return [*_flatten(other), *_flatten(edge_modifier)], None


def _flatten(other: Any) -> list[DependencyMixin]:
    if isinstance(other, DependencyMixin):
        return [other]
    if isinstance(other, Iterable) and not isinstance(other, str | bytes):
        items = list(other)
        for item in items:
            if not isinstance(item, DependencyMixin):
                raise TypeError(
                    f"Relationships can only be set between operators and task groups; got {item!r}"
                )
        return items
    raise TypeError(f"Relationships can only be set between operators and task groups; got {other!r}")


def _link(upstream: DependencyMixin, downstream: DependencyMixin, label: Label | None) -> None:
    if isinstance(upstream, Label):
        upstream.set_downstream(downstream)
        return
    if isinstance(downstream, Label):
        downstream.set_upstream(upstream)
        return
    text = label.label if label is not None else None
    for source in upstream.leaves():
        for target in downstream.roots():
            target.add_upstream(source, text)
    upstream.update_relative(downstream, upstream=False)
    downstream.update_relative(upstream, upstream=True)


def chain(*elements: Relatable) -> None:
    """Airflow's `chain`: each element downstream of the previous; two lists of one length pair up.

    ``chain(a, [b, c], [d, e], f)`` is ``a >> [b, c]``, ``b >> d``, ``c >> e``, ``[d, e] >> f``.
    """
    for index, (up, down) in enumerate(itertools.pairwise(elements)):
        if isinstance(up, DependencyMixin):
            up.set_downstream(down)
        elif isinstance(down, DependencyMixin):
            down.set_upstream(up)
        else:
            ups, downs = list(up), list(down)
            if len(ups) != len(downs):
                raise ValueError(
                    f"Chain not supported for different length Iterable. Got {len(ups)} and {len(downs)} "
                    f"(elements {index} and {index + 1})."
                )
            for up_task, down_task in zip(ups, downs, strict=True):
                up_task.set_downstream(down_task)


def chain_linear(*elements: DependencyMixin | Sequence[DependencyMixin]) -> None:
    """Airflow 2.7's `chain_linear`: every task of each element upstream of every task of the next.

    ``chain_linear(a, [b, c], [d, e, f], g)`` is ``a >> [b, c]``, ``[b, c] >> [d, e, f]`` (each to each),
    ``[d, e, f] >> g``; Airflow's errors for no elements, a `Label` and no edge at all.
    """
    if not elements:
        raise ValueError("No tasks provided; nothing to do.")
    previous: Sequence[DependencyMixin] | None = None
    linked = False
    for element in elements:
        if isinstance(element, Label):
            raise ValueError("Labels are not supported by chain_linear")
        if previous is not None:
            for task in previous:
                task >> element
                linked = True
        previous = [element] if isinstance(element, DependencyMixin) else element
    if not linked:
        raise ValueError("No dependencies were set. Did you forget to expand with `*`?")


def cross_downstream(from_tasks: Sequence[DependencyMixin], to_tasks: Relatable) -> None:
    """Airflow's `cross_downstream`: every task in `from_tasks` upstream of every one in `to_tasks`."""
    for task in from_tasks:
        task.set_downstream(to_tasks)
