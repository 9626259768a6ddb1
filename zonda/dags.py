"""A DAG spec resolved into the graph the scheduler works on.

`resolve_dag` applies `defaultArgs` (task > task group > DAG, as Airflow's `default_args`), task-group
id prefixes, group dependencies, and validates (cycles, unknown/duplicate ids, schedule vs timetable,
operators and their arguments, timezones...), collecting every problem into one `DagInvalid` so a user
fixes them all at once.

INTERFACE FILE: the fields below are the contract the scheduler core and the controller rely on.
"""

from __future__ import annotations

import difflib
import heapq
import types
import typing
import zoneinfo
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, TypeVar

import pendulum
import pydantic
from pydantic.alias_generators import to_camel

from zonda import merging, operator_arguments, operator_registry, params
from zonda.durations import DURATION_PATTERN, parse_duration
from zonda.models import (
    TASK_ID_PATTERN,
    DagSpec,
    TaskDefaults,
    TaskGroupSpec,
    TaskSpec,
    TriggerRule,
    WeightRule,
)


class DagInvalid(ValueError):
    """A DAG spec that cannot run; `errors` are sentences a user can act on."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors


@dataclass(frozen=True)
class ResolvedTask:
    task_id: str  # full id, with task-group prefixes
    operator: str | None  # as written: a built-in name, an import path, or None (container task)
    args: Mapping[str, Any]
    upstream: frozenset[str]
    downstream: frozenset[str]
    trigger_rule: TriggerRule = TriggerRule.ALL_SUCCESS
    retries: int = 0
    retry_delay: timedelta = timedelta(minutes=5)
    retry_exponential_backoff: bool = False
    max_retry_delay: timedelta | None = None
    execution_timeout: timedelta | None = None
    depends_on_past: bool = False
    wait_for_past_depends_before_skipping: bool = False
    priority_weight: int = 1
    weight_rule: WeightRule = WeightRule.DOWNSTREAM
    pool: str | None = None
    group: str | None = None
    container: Mapping[str, Any] = field(default_factory=dict)
    pod_override: Mapping[str, Any] = field(default_factory=dict)
    edge_labels: Mapping[str, str] = field(default_factory=dict)  # upstream id -> label
    doc_md: str | None = None
    is_setup: bool = False
    is_teardown: bool = False
    on_failure_fail_dagrun: bool = False  # a teardown whose failure fails the run
    owner: str = "airflow"  # Airflow's `[operators] default_owner`
    queue: str | None = None
    connections: tuple[str, ...] = ()  # conn ids named in the spec (templates and args add more)
    variables: tuple[str, ...] = ()  # Secret-held variables named in the spec


@dataclass(frozen=True)
class ResolvedDag:
    name: str
    spec: DagSpec
    tasks: Mapping[str, ResolvedTask]  # in a topological order
    dagrun_timeout: timedelta | None = None


# ------------------------------------------------------------------------------------ resolution

#: Operators' default owner in Airflow (`[operators] default_owner`).
DEFAULT_OWNER = "airflow"

_DURATION_FIELDS = ("retry_delay", "max_retry_delay", "execution_timeout")
#: `TaskDefaults` fields holding Kubernetes objects: merged by `zonda.merging.strategic_merge`.
_DEEP_MERGED_FIELDS = ("container", "pod_override")
_MAX_SUGGESTIONS = 3


def parse_dag_spec(raw: Mapping[str, Any]) -> DagSpec:
    """Validate a DAG resource's `spec` (camelCase, as stored), reporting every problem by field path.

    Pydantic's errors become sentences such as
    ``spec.tasks[2].triggerRule: Input should be 'all_success', ... (got 'al_success')``.
    """
    try:
        return DagSpec.model_validate(raw)
    except pydantic.ValidationError as exc:
        raise DagInvalid([_describe_validation_error(error) for error in exc.errors()]) from exc


def resolve_dag(name: str, spec: DagSpec) -> ResolvedDag:
    """Apply defaults and task groups, and validate; raises `DagInvalid` listing every problem found."""
    errors = _check_dag_settings(spec)
    graph = _GraphBuilder(spec)
    order = graph.topological_order()  # reports cycles into graph.errors
    errors.extend(graph.errors)
    errors.extend(_check_defaults_durations(spec, graph))

    resolved: dict[str, ResolvedTask] = {}
    for task_id in order:
        task_errors, task = _resolve_task(spec, graph, task_id)
        errors.extend(task_errors)
        resolved[task_id] = task
    if errors:
        raise DagInvalid(errors)
    return ResolvedDag(
        name=name,
        spec=spec,
        tasks=resolved,
        dagrun_timeout=parse_duration(spec.dagrun_timeout) if spec.dagrun_timeout else None,
    )


def effective_priority_weights(dag: ResolvedDag) -> dict[str, int]:
    """Each task's priority as Airflow's `priority_weight_total` computes it from `weight_rule`.

    downstream: own weight plus the own weights of every task downstream of it, transitively (each
    counted once); upstream: the same upstream; absolute: its own weight.
    """
    order = list(dag.tasks)
    bit = {task_id: 1 << index for index, task_id in enumerate(order)}
    weights = [dag.tasks[task_id].priority_weight for task_id in order]

    def closure(relatives: Callable[[ResolvedTask], frozenset[str]], ids: list[str]) -> dict[str, int]:
        reached: dict[str, int] = {}
        for task_id in ids:  # every relative is visited before the task that needs it
            mask = 0
            for relative in relatives(dag.tasks[task_id]):
                mask |= bit[relative] | reached[relative]
            reached[task_id] = mask
        return reached

    below = closure(lambda task: task.downstream, list(reversed(order)))
    above = closure(lambda task: task.upstream, order)

    def total(mask: int) -> int:
        return sum(weights[index] for index in range(mask.bit_length()) if mask >> index & 1)

    result: dict[str, int] = {}
    for task_id, task in dag.tasks.items():
        if task.weight_rule == WeightRule.DOWNSTREAM:
            result[task_id] = task.priority_weight + total(below[task_id])
        elif task.weight_rule == WeightRule.UPSTREAM:
            result[task_id] = task.priority_weight + total(above[task_id])
        else:
            result[task_id] = task.priority_weight
    return result


# ------------------------------------------------------------------------------ DAG-level checks


def _check_dag_settings(spec: DagSpec) -> list[str]:
    errors: list[str] = []
    timezone_error = _check_timezone(spec.timezone)
    if timezone_error:
        errors.append(timezone_error)
    elif spec.start_date and spec.end_date:
        start, end = (_aware(d, spec.timezone) for d in (spec.start_date, spec.end_date))
        if end < start:
            errors.append(
                f"endDate {spec.end_date.isoformat()} is before startDate {spec.start_date.isoformat()}"
            )
    if spec.schedule is not None and spec.timetable is not None:
        errors.append("set either schedule or timetable, not both")
    errors.extend(_check_timetable(spec, spec.timezone if timezone_error is None else "UTC"))
    if spec.dagrun_timeout is not None:
        errors.extend(_check_duration("dagrunTimeout", spec.dagrun_timeout, positive=True))
    scheduled = spec.schedule is not None or spec.timetable is not None
    errors.extend(params.schema_errors(spec.params_schema, spec.params, scheduled=scheduled))
    return errors


def _check_timezone(name: str) -> str | None:
    try:
        pendulum.timezone(name)
    except Exception:  # pendulum raises InvalidTimezone, zoneinfo ValueError for malformed keys
        close = difflib.get_close_matches(name, sorted(zoneinfo.available_timezones()), _MAX_SUGGESTIONS)
        return f"unknown timezone {name!r}{_did_you_mean(close)}: use an IANA name such as 'Europe/Paris'"
    return None


def _check_timetable(spec: DagSpec, timezone: str) -> list[str]:
    """Build the timetable as the scheduler will, so a DAG that resolves can be scheduled.

    The timetables package is imported here, not at module level: it imports the user's timetable
    classes, which only DAG resolution needs, and `zonda.dags` is imported everywhere.
    """
    from zonda.timetables import load_timetable, timetable_for_schedule

    errors: list[str] = []
    if spec.schedule is not None:
        try:
            timetable_for_schedule(spec.schedule, timezone)
        except Exception as exc:  # croniter and the timetables raise ValueError subclasses and others
            errors.append(f"schedule {spec.schedule!r}: {exc}")
    if spec.timetable is not None:
        try:
            load_timetable(spec.timetable.class_, spec.timetable.params)
        except Exception as exc:  # a user class: anything it raises makes the DAG unschedulable
            errors.append(f"timetable {spec.timetable.class_!r} cannot be used: {exc}")
    return errors


def _check_duration(where: str, text: str, *, positive: bool = False) -> list[str]:
    try:
        duration = parse_duration(text)
    except ValueError as exc:
        return [f"{where}: {exc}"]
    if duration < timedelta(0):
        return [f"{where}: duration {text!r} is negative"]
    if positive and duration == timedelta(0):
        return [f"{where}: duration {text!r} must be longer than 0s"]
    return []


def _aware(moment: datetime, timezone: str) -> datetime:
    """Naive dates are wall-clock times in the DAG's timezone, as Airflow reads them."""
    return moment if moment.tzinfo else pendulum.instance(moment, tz=pendulum.timezone(timezone))


# --------------------------------------------------------------------------------- graph building


@dataclass(frozen=True)
class _Node:
    """A `dependsOn` target: a task (by full id) or a task group (by the id it is declared with)."""

    is_group: bool
    id: str


@dataclass(frozen=True)
class _Dependency:
    upstream: _Node
    downstream: _Node
    label: str | None


class _GraphBuilder:
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
        self.dependencies: list[_Dependency] = []
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

    def resolve_reference(self, reference: str, scope: str | None) -> _Node | None:
        """What a `dependsOn` entry written inside group `scope` names.

        Looked up like a nested name: relative to the enclosing group, then each outer group, then
        as a full id; last, as a group's declared id.
        """
        for group_id in [*self.chain(scope), None]:
            candidate = self.child_id(group_id, reference)
            if candidate in self.tasks:
                return _Node(is_group=False, id=candidate)
            if candidate in self.groups_by_full_id:
                return _Node(is_group=True, id=self.groups_by_full_id[candidate])
        if reference in self.groups:
            return _Node(is_group=True, id=reference)
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
                    self.dependencies.append(_Dependency(upstream, _Node(False, task_id), label))
            for reference in task.edge_labels:
                if reference not in task.depends_on:
                    self.errors.append(
                        f"{declared} has an edge label for {reference!r}, which is not in its dependsOn"
                    )
        for group_id, group in self.groups.items():
            declared = f"task group {group_id!r}"
            if group.depends_on and not self.members[group_id]:
                self.errors.append(f"{declared} has no tasks, so its dependsOn would have no effect")
                continue
            scope = self.parent[group_id]
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
                    self.dependencies.append(_Dependency(upstream, _Node(True, group_id), None))

    def _check_not_empty(self, declared: str, upstream: _Node) -> bool:
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
        return _did_you_mean(difflib.get_close_matches(name, list(known), _MAX_SUGGESTIONS))

    # ---- expansion into task edges

    def _within(self, node: _Node, group_id: str) -> bool:
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

    def _expand(self, dependency: _Dependency) -> list[tuple[str, str]]:
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
        for component in _strongly_connected_components(stuck, self.downstream):
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


def _strongly_connected_components(nodes: list[str], edges: Mapping[str, set[str]]) -> list[list[str]]:
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


# ------------------------------------------------------------------------------------- defaults


def _check_defaults_durations(spec: DagSpec, graph: _GraphBuilder) -> list[str]:
    """Check each `defaultArgs` block once, so one bad DAG default is one error, not one per task."""
    sources: list[tuple[str, TaskDefaults | None]] = [("defaultArgs", spec.default_args)]
    sources += [
        (f"task group {group_id!r} defaultArgs", group.default_args)
        for group_id, group in graph.groups.items()
    ]
    sources += [(f"task {task_id!r}", task) for task_id, task in graph.tasks.items()]
    errors: list[str] = []
    for where, defaults in sources:
        if defaults is None:
            continue
        for field_name in _DURATION_FIELDS:
            value = getattr(defaults, field_name)
            if value is not None:
                errors.extend(_check_duration(f"{where}: {to_camel(field_name)}", value))
    return errors


def _resolve_task(spec: DagSpec, graph: _GraphBuilder, task_id: str) -> tuple[list[str], ResolvedTask]:
    """Merge defaults (DAG < outer groups < inner groups < task) and check the operator."""
    task = graph.tasks[task_id]
    group = graph.task_group[task_id]
    layers = [spec.default_args]
    layers += [graph.groups[group_id].default_args for group_id in reversed(graph.chain(group))]
    layers.append(task)
    merged = _merge_defaults([layer for layer in layers if layer is not None])

    errors: list[str] = []
    if task.operator is not None:
        try:
            operator_registry.operator_classpath(task.operator)
        except operator_registry.UnknownOperator as exc:
            errors.append(f"task {task_id!r}: {exc}")
        else:
            merged["args"] = operator_arguments.apply_default_args(
                task.operator, defaults=merged.get("args") or {}, own=task.args or {}
            )
            arguments = operator_arguments.check_operator_arguments(task.operator, merged["args"])
            errors.extend(f"task {task_id!r}: {problem}" for problem in arguments)
    if task.is_setup and task.is_teardown:
        errors.append(f"task {task_id!r} is both a setup and a teardown: it can be only one")
    if task.on_failure_fail_dagrun and not task.is_teardown:
        errors.append(
            f"task {task_id!r}: cannot mark task as on_failure_fail_dagrun=True without being teardown"
        )
    container = merged.get("container") or {}
    if task.operator is None and not container.get("image"):
        errors.append(
            f"task {task_id!r} has neither an operator nor a container image: "
            "set operator (e.g. BashOperator) or container.image"
        )

    def duration(field_name: str) -> timedelta | None:
        value = merged.get(field_name)
        try:
            return parse_duration(value) if value is not None else None
        except ValueError:
            return None  # reported once by _check_defaults_durations

    resolved = ResolvedTask(
        task_id=task_id,
        operator=task.operator,
        args=merged.get("args") or {},
        upstream=frozenset(graph.upstream[task_id]),
        downstream=frozenset(graph.downstream[task_id]),
        trigger_rule=_first_set(merged.get("trigger_rule"), TriggerRule.ALL_SUCCESS),
        retries=_first_set(merged.get("retries"), 0),
        retry_delay=_first_set(duration("retry_delay"), timedelta(minutes=5)),
        retry_exponential_backoff=_first_set(merged.get("retry_exponential_backoff"), False),
        max_retry_delay=duration("max_retry_delay"),
        execution_timeout=duration("execution_timeout"),
        depends_on_past=_first_set(merged.get("depends_on_past"), False),
        wait_for_past_depends_before_skipping=_first_set(
            merged.get("wait_for_past_depends_before_skipping"), False
        ),
        priority_weight=_first_set(merged.get("priority_weight"), 1),
        weight_rule=_first_set(merged.get("weight_rule"), WeightRule.DOWNSTREAM),
        pool=merged.get("pool"),
        group=group,
        container=container,
        pod_override=merged.get("pod_override") or {},
        edge_labels=graph.edge_labels[task_id],
        doc_md=task.doc_md,
        is_setup=bool(task.is_setup),
        is_teardown=bool(task.is_teardown),
        on_failure_fail_dagrun=bool(task.on_failure_fail_dagrun),
        owner=_first_set(merged.get("owner"), DEFAULT_OWNER),
        queue=merged.get("queue"),
        connections=tuple(merged.get("connections") or ()),
        variables=tuple(merged.get("variables") or ()),
    )
    return errors, resolved


_T = TypeVar("_T")


def _first_set(value: _T | None, default: _T) -> _T:
    return default if value is None else value


def _merge_defaults(layers: list[TaskDefaults]) -> dict[str, Any]:
    """Later layers win field by field; `args` merge key by key, Kubernetes objects strategically."""
    merged: dict[str, Any] = {}
    for layer in layers:
        for field_name in TaskDefaults.model_fields:
            value = getattr(layer, field_name)
            if value is None:
                continue
            if field_name == "args":
                merged["args"] = {**merged.get("args", {}), **value}
            elif field_name in _DEEP_MERGED_FIELDS:
                merged[field_name] = merging.strategic_merge(merged.get(field_name, {}), value)
            else:
                merged[field_name] = value
    return merged


# ------------------------------------------------------------------------------- error messages


def _did_you_mean(candidates: list[str]) -> str:
    return f" (did you mean {' or '.join(repr(c) for c in candidates)}?)" if candidates else ""


def _describe_validation_error(error: Mapping[str, Any]) -> str:
    location: tuple[str | int, ...] = tuple(error["loc"])
    path = "spec" + "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in location)
    kind = error["type"]
    value = error.get("input")
    if kind == "extra_forbidden":
        model = _model_at(location[:-1])
        known = [field.alias or name for name, field in model.model_fields.items()] if model else []
        suggestion = difflib.get_close_matches(str(location[-1]), known, _MAX_SUGGESTIONS)
        return f"{path}: unknown field{_did_you_mean(suggestion)}"
    if kind == "missing":
        return f"{path}: required field is missing"
    if kind == "string_pattern_mismatch":
        pattern = error.get("ctx", {}).get("pattern")
        if pattern == DURATION_PATTERN:
            return f"{path}: invalid duration {value!r}: expected e.g. '30s', '5m' or '1h30m'"
        if pattern == TASK_ID_PATTERN:
            return (
                f"{path}: invalid id {value!r}: use up to 250 letters, digits, '_', '-' or '.', "
                "starting with a letter, digit or '_'"
            )
    message = f"{path}: {error['msg']}"
    if isinstance(value, str | int | float | bool) and kind != "missing":
        shown = repr(value)
        message += f" (got {shown[:77] + '...' if len(shown) > 80 else shown})"
    return message


def _model_at(location: tuple[str | int, ...]) -> type[pydantic.BaseModel] | None:
    """The model class found at `location` under `DagSpec` (for suggesting field names)."""
    annotation: Any = DagSpec
    for part in location:
        annotation = _unwrap(annotation)
        if isinstance(part, str) and _is_model(annotation):
            fields = {field.alias or name: field for name, field in annotation.model_fields.items()}
            field_info = fields.get(part) or annotation.model_fields.get(part)
            if field_info is None:
                return None
            annotation = field_info.annotation
        elif typing.get_origin(annotation) in (list, dict):
            annotation = typing.get_args(annotation)[-1]
        else:
            return None
    annotation = _unwrap(annotation)
    return annotation if _is_model(annotation) else None


def _is_model(annotation: Any) -> typing.TypeGuard[type[pydantic.BaseModel]]:
    return isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel)


def _unwrap(annotation: Any) -> Any:
    """`X | None` -> X."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        members = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        if len(members) == 1:
            return _unwrap(members[0])
    return annotation
