"""The task graph of one DAG spec: task groups, full task ids, edges, topological order and cycles.

`zonda.specs.dags.resolve_dag` builds a `GraphBuilder` first and resolves each task against it; the builder
collects graph errors (unknown references, cycles with their path) as sentences a user can act on.
"""

from __future__ import annotations

import difflib
import heapq
from collections.abc import Mapping
from dataclasses import dataclass

from zonda.resources.models import DagSpec, TaskGroupSpec, TaskSpec
from zonda.specs.errors import MAX_SUGGESTIONS, did_you_mean


@dataclass(frozen=True)
class Node:
    """A `dependsOn` target: a task (by full id) or a task group (by the id it is declared with)."""

    is_group: bool
    id: str


@dataclass(frozen=True)
class Dependency:
    upstream: Node
    downstream: Node
    label: str | None


class GraphBuilder:
    """Task groups, full task ids and the task-level edges of one DAG spec; collects its errors.

    Group dependencies expand to task edges as Airflow's `TaskGroup._set_relatives` does: depending on
    a group means depending on its leaves, and a group's own dependencies apply to its roots. A group's
    roots and leaves are computed from the edges inside it only, which never involve the group itself
    (a task cannot depend on its own group), so the expansion is well-founded.
    """

    def __init__(self, spec: DagSpec) -> None:
        self.spec = spec
        self.errors: list[str] = []
        self.groups: dict[str, TaskGroupSpec] = {}
        self.parent: dict[str, str | None] = {}
        self._full_group_ids: dict[str, str] = {}
        self.groups_by_full_id: dict[str, str] = {}
        self.tasks: dict[str, TaskSpec] = {}  # full id -> spec, in spec order
        self.task_group: dict[str, str | None] = {}
        self.index: dict[str, int] = {}
        self.members: dict[str, list[str]] = {}  # group -> tasks in it, nested groups included
        self.dependencies: list[Dependency] = []
        self._ends: dict[str, tuple[list[str], list[str]]] = {}
        self.upstream: dict[str, set[str]] = {}
        self.downstream: dict[str, set[str]] = {}
        self.edge_labels: dict[str, dict[str, str]] = {}

        self._collect_groups()
        self._collect_tasks()
        self._collect_dependencies()
        self._expand_dependencies()

    # ---- task groups

    def _collect_groups(self) -> None:
        seen: dict[str, list[int]] = {}
        for index, group in enumerate(self.spec.task_groups):
            seen.setdefault(group.id, []).append(index)
            self.groups.setdefault(group.id, group)
            if group.prefix_group_id and "." in group.id:
                self.errors.append(
                    f"task group id {group.id!r} may not contain '.': it prefixes its tasks' ids "
                    "(or set prefixGroupId: false)"
                )
        for group_id, indexes in seen.items():
            if len(indexes) > 1:
                places = " and ".join(f"spec.taskGroups[{i}]" for i in indexes)
                self.errors.append(f"task group id {group_id!r} is used by {len(indexes)} groups ({places})")
        for group_id, group in self.groups.items():
            parent = group.parent
            if parent is not None and parent not in self.groups:
                self.errors.append(
                    f"task group {group_id!r} has unknown parent group {parent!r}"
                    f"{self._suggest(parent, self.groups)}"
                )
                parent = None
            self.parent[group_id] = parent
        self._break_group_cycles()
        for group_id in self.groups:
            self.groups_by_full_id.setdefault(self.full_group_id(group_id), group_id)
        for group_id in self.groups:
            self.members[group_id] = []

    def _break_group_cycles(self) -> None:
        """Report groups nested in a cycle and make them top-level so the rest can still be checked."""
        settled: set[str] = set()
        for start in self.groups:
            path: list[str] = []
            current: str | None = start
            while current is not None and current not in settled and current not in path:
                path.append(current)
                current = self.parent[current]
            if current is not None and current in path:
                cycle = path[path.index(current) :]
                self.errors.append(f"task groups nest in a cycle: {' -> '.join([*cycle, current])}")
                for group_id in cycle:
                    self.parent[group_id] = None
            settled.update(path)

    def full_group_id(self, group_id: str) -> str:
        """Airflow's `TaskGroup.group_id`: prefixed by the parent's id if the parent prefixes."""
        if group_id not in self._full_group_ids:
            self._full_group_ids[group_id] = self.child_id(self.parent[group_id], group_id)
        return self._full_group_ids[group_id]

    def child_id(self, group_id: str | None, label: str) -> str:
        """Airflow's `TaskGroup.child_id`: the id of `label` declared inside `group_id`."""
        if group_id is None or not self.groups[group_id].prefix_group_id:
            return label
        return f"{self.full_group_id(group_id)}.{label}"

    def chain(self, group_id: str | None) -> list[str]:
        """`group_id` and the groups enclosing it, innermost first."""
        chain: list[str] = []
        while group_id is not None:
            chain.append(group_id)
            group_id = self.parent[group_id]
        return chain

    # ---- tasks

    def _collect_tasks(self) -> None:
        seen: dict[str, list[int]] = {}
        for index, task in enumerate(self.spec.tasks):
            group = task.group
            if group is not None and group not in self.groups:
                self.errors.append(
                    f"task {task.id!r} is in unknown task group {group!r}{self._suggest(group, self.groups)}"
                )
                group = None
            task_id = self.child_id(group, task.id)
            seen.setdefault(task_id, []).append(index)
            if task_id in self.tasks:
                continue
            self.tasks[task_id] = task
            self.task_group[task_id] = group
            self.index[task_id] = index
            for enclosing in self.chain(group):
                self.members[enclosing].append(task_id)
        for task_id, indexes in seen.items():
            if len(indexes) > 1:
                places = " and ".join(f"spec.tasks[{i}]" for i in indexes)
                self.errors.append(f"task id {task_id!r} is used by {len(indexes)} tasks ({places})")
        for full_id, group_id in self.groups_by_full_id.items():
            if full_id in self.tasks:
                self.errors.append(f"id {full_id!r} names both a task and task group {group_id!r}")

    # ---- dependencies

    def resolve_reference(self, reference: str, scope: str | None) -> Node | None:
        """What a `dependsOn` entry written inside group `scope` names.

        Looked up like a nested name: relative to the enclosing group, then each outer group, then
        as a full id; last, as a group's declared id.
        """
        for group_id in [*self.chain(scope), None]:
            candidate = self.child_id(group_id, reference)
            if candidate in self.tasks:
                return Node(is_group=False, id=candidate)
            if candidate in self.groups_by_full_id:
                return Node(is_group=True, id=self.groups_by_full_id[candidate])
        if reference in self.groups:
            return Node(is_group=True, id=reference)
        return None

    def _collect_dependencies(self) -> None:
        for task_id, task in self.tasks.items():
            declared = f"task {task_id!r}"
            scope = self.task_group[task_id]
            for reference in task.depends_on:
                upstream = self.resolve_reference(reference, scope)
                if upstream is None:
                    self._report_unknown(declared, reference, scope)
                elif upstream.is_group and upstream.id in self.chain(scope):
                    self.errors.append(f"{declared} depends on task group {upstream.id!r}, which contains it")
                elif self._check_not_empty(declared, upstream):
                    label = task.edge_labels.get(reference)
                    self.dependencies.append(Dependency(upstream, Node(False, task_id), label))
            self._check_edge_labels(declared, task.edge_labels, task.depends_on)
        for group_id, group in self.groups.items():
            declared = f"task group {group_id!r}"
            if group.depends_on and not self.members[group_id]:
                self.errors.append(f"{declared} has no tasks, so its dependsOn would have no effect")
                continue
            scope = self.parent[group_id]
            self._check_edge_labels(declared, group.edge_labels, group.depends_on)
            for reference in group.depends_on:
                upstream = self.resolve_reference(reference, scope)
                if upstream is None:
                    self._report_unknown(declared, reference, scope)
                    continue
                inner_group = self.task_group[upstream.id] if not upstream.is_group else upstream.id
                if upstream.is_group and upstream.id == group_id:
                    self.errors.append(f"{declared} depends on itself")
                elif group_id in self.chain(inner_group):
                    kind = "task group" if upstream.is_group else "task"
                    self.errors.append(f"{declared} depends on {kind} {upstream.id!r}, which is inside it")
                elif upstream.is_group and upstream.id in self.chain(scope):
                    self.errors.append(f"{declared} depends on task group {upstream.id!r}, which contains it")
                elif self._check_not_empty(declared, upstream):
                    label = group.edge_labels.get(reference)
                    self.dependencies.append(Dependency(upstream, Node(True, group_id), label))

    def _check_edge_labels(self, declared: str, labels: Mapping[str, str], depends_on: list[str]) -> None:
        for reference in labels:
            if reference not in depends_on:
                self.errors.append(
                    f"{declared} has an edge label for {reference!r}, which is not in its dependsOn"
                )

    def _check_not_empty(self, declared: str, upstream: Node) -> bool:
        if upstream.is_group and not self.members[upstream.id]:
            self.errors.append(f"{declared} depends on task group {upstream.id!r}, which has no tasks")
            return False
        return True

    def _report_unknown(self, declared: str, reference: str, scope: str | None) -> None:
        known = [*self.tasks, *self.groups, *self.groups_by_full_id]
        known += [task.id for task_id, task in self.tasks.items() if self.task_group[task_id] == scope]
        self.errors.append(
            f"{declared} depends on unknown task or task group {reference!r}"
            f"{self._suggest(reference, dict.fromkeys(known))}"
        )

    @staticmethod
    def _suggest(name: str, known: Mapping[str, object]) -> str:
        return did_you_mean(difflib.get_close_matches(name, list(known), MAX_SUGGESTIONS))

    # ---- expansion into task edges

    def _within(self, node: Node, group_id: str) -> bool:
        if node.is_group:
            return group_id in self.chain(node.id)[1:]
        return group_id in self.chain(self.task_group[node.id])

    def _ends_of(self, group_id: str) -> tuple[list[str], list[str]]:
        """(roots, leaves) of a group: its tasks with no upstream / downstream inside the group."""
        if group_id not in self._ends:
            has_upstream: set[str] = set()
            has_downstream: set[str] = set()
            inside = [
                dependency
                for dependency in self.dependencies
                if self._within(dependency.upstream, group_id)
                and self._within(dependency.downstream, group_id)
            ]
            for dependency in inside:
                for upstream, downstream in self._expand(dependency):
                    has_downstream.add(upstream)
                    has_upstream.add(downstream)
            members = self.members[group_id]
            self._ends[group_id] = (
                [task_id for task_id in members if task_id not in has_upstream],
                [task_id for task_id in members if task_id not in has_downstream],
            )
        return self._ends[group_id]

    def _expand(self, dependency: Dependency) -> list[tuple[str, str]]:
        upstream, downstream = dependency.upstream, dependency.downstream
        sources = self._ends_of(upstream.id)[1] if upstream.is_group else [upstream.id]
        targets = self._ends_of(downstream.id)[0] if downstream.is_group else [downstream.id]
        return [(source, target) for source in sources for target in targets]

    def _expand_dependencies(self) -> None:
        for task_id in self.tasks:
            self.upstream[task_id] = set()
            self.downstream[task_id] = set()
            self.edge_labels[task_id] = {}
        for dependency in self.dependencies:
            for upstream, downstream in self._expand(dependency):
                self.upstream[downstream].add(upstream)
                self.downstream[upstream].add(downstream)
                if dependency.label is not None:
                    self.edge_labels[downstream][upstream] = dependency.label

    # ---- order

    def topological_order(self) -> list[str]:
        """Kahn's algorithm, ties broken by spec order; reports cycles and appends their tasks last."""
        waiting = {task_id: len(upstream) for task_id, upstream in self.upstream.items()}
        ready = [(self.index[task_id], task_id) for task_id, count in waiting.items() if count == 0]
        heapq.heapify(ready)
        order: list[str] = []
        while ready:
            _, task_id = heapq.heappop(ready)
            order.append(task_id)
            for downstream in self.downstream[task_id]:
                waiting[downstream] -= 1
                if waiting[downstream] == 0:
                    heapq.heappush(ready, (self.index[downstream], downstream))
        if len(order) < len(self.tasks):
            placed = set(order)
            stuck = sorted(
                (task_id for task_id in self.tasks if task_id not in placed), key=self.index.__getitem__
            )
            for cycle in self._find_cycles(stuck):
                self.errors.append(f"cycle: {' -> '.join(cycle)}")
            order.extend(stuck)
        return order

    def _find_cycles(self, stuck: list[str]) -> list[list[str]]:
        """One shortest cycle per strongly connected component among the tasks Kahn could not place."""
        cycles = []
        for component in strongly_connected_components(stuck, self.downstream):
            start = min(component, key=self.index.__getitem__)
            if len(component) == 1 and start not in self.downstream[start]:
                continue  # merely downstream of a cycle
            cycles.append(self._shortest_cycle(start, set(component)))
        return sorted(cycles, key=lambda cycle: self.index[cycle[0]])

    def _shortest_cycle(self, start: str, component: set[str]) -> list[str]:
        came_from: dict[str, str] = {}
        frontier = [start]
        while frontier:
            next_frontier = []
            for task_id in frontier:
                for downstream in sorted(self.downstream[task_id] & component, key=self.index.__getitem__):
                    if downstream == start:
                        path = [task_id]
                        while path[-1] != start:
                            path.append(came_from[path[-1]])
                        return [*reversed(path), start]
                    if downstream not in came_from:
                        came_from[downstream] = task_id
                        next_frontier.append(downstream)
            frontier = next_frontier
        raise AssertionError(f"{start!r} is on no cycle of its component")  # pragma: no cover


def strongly_connected_components(nodes: list[str], edges: Mapping[str, set[str]]) -> list[list[str]]:
    """Kosaraju's algorithm, iterative (DAGs may be deep), restricted to `nodes`."""
    members = set(nodes)
    finished: list[str] = []
    visited: set[str] = set()
    for root in nodes:
        if root in visited:
            continue
        visited.add(root)
        stack = [(root, iter(sorted(edges[root] & members)))]
        while stack:
            node, children = stack[-1]
            child = next((c for c in children if c not in visited), None)
            if child is None:
                stack.pop()
                finished.append(node)
            else:
                visited.add(child)
                stack.append((child, iter(sorted(edges[child] & members))))
    reverse: dict[str, set[str]] = {node: set() for node in nodes}
    for node in nodes:
        for child in edges[node] & members:
            reverse[child].add(node)
    components: list[list[str]] = []
    assigned: set[str] = set()
    for root in reversed(finished):
        if root in assigned:
            continue
        component, pending = [], [root]
        assigned.add(root)
        while pending:
            node = pending.pop()
            component.append(node)
            for parent in reverse[node] - assigned:
                assigned.add(parent)
                pending.append(parent)
        components.append(component)
    return components
