"""A DAG spec resolved into the graph the scheduler works on.

`resolve_dag` applies `defaultArgs` (task > task group > DAG, as Airflow's `default_args`), task-group
id prefixes, group dependencies, and validates (cycles, unknown/duplicate ids, schedule vs timetable,
operators and their arguments, timezones...), collecting every problem into one `DagInvalid` so a user
fixes them all at once. The graph itself (groups, edges, order, cycles) is built in `zonda.specs.graph`, the
DAG-level checks (settings, timezone, timetable, durations) are in `zonda.specs.checks`, the messages
for a spec that does not parse in `zonda.specs.errors`.

INTERFACE FILE: the fields below are the contract the scheduler core and the controller rely on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, TypeVar

import pydantic

from zonda.resources.asset_refs import AssetRef
from zonda.resources.durations import parse_duration
from zonda.resources.models import (
    DagSpec,
    ExpandSpec,
    PriorityStrategyRef,
    RetryPolicyRef,
    TaskDefaults,
    TriggerRule,
    WeightRule,
)
from zonda.resources.pool_models import DEFAULT_POOL, pool_name_problem
from zonda.specs import (
    mapped_groups,
    mapping,
    merging,
    operator_arguments,
    operator_registry,
    priority_strategies,
)
from zonda.specs.checks import check_dag_settings, check_defaults_durations
from zonda.specs.errors import describe_validation_error
from zonda.specs.graph import GraphBuilder


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
    #: A custom strategy (`zonda.specs.priority_strategies`): its get_weight(ti), instead of weight_rule.
    weight_strategy: PriorityStrategyRef | None = None
    #: Airflow 3.3's `retry_policy` (`zonda.tries.retry_policies`), evaluated by the task runner.
    retry_policy: RetryPolicyRef | None = None
    #: Airflow's name, as written (`zonda.resources.pool_models.pool_resource_name` names the resource).
    pool: str = DEFAULT_POOL
    pool_slots: int = 1
    max_active_tis_per_dag: int | None = None
    max_active_tis_per_dagrun: int | None = None
    group: str | None = None
    container: Mapping[str, Any] = field(default_factory=dict)
    pod_override: Mapping[str, Any] = field(default_factory=dict)
    edge_labels: Mapping[str, str] = field(default_factory=dict)  # upstream id -> label
    doc_md: str | None = None
    display_name: str | None = None  # Airflow's task_display_name (display only)
    is_setup: bool = False
    is_teardown: bool = False
    on_failure_fail_dagrun: bool = False  # a teardown whose failure fails the run
    owner: str = "airflow"  # Airflow's `[operators] default_owner`
    queue: str | None = None
    connections: tuple[str, ...] = ()  # conn ids named in the spec (templates and args add more)
    variables: tuple[str, ...] = ()  # Secret-held variables named in the spec
    callbacks: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # kind -> import paths
    sla: timedelta | None = None  # Airflow's sla, from the data interval end
    expand: ExpandSpec | None = None  # dynamic task mapping (`zonda.specs.mapping`)
    mapped_group: str | None = None  # the mapped task group it is in (`zonda.specs.mapped_groups`)
    map_peers: frozenset[str] = frozenset()  # the other tasks of that group: dependencies per index
    outlets: tuple[AssetRef, ...] = ()  # assets whose events each success records


@dataclass(frozen=True)
class ResolvedDag:
    name: str
    spec: DagSpec
    tasks: Mapping[str, ResolvedTask]  # in a topological order
    dagrun_timeout: timedelta | None = None


# ------------------------------------------------------------------------------------ resolution

#: Airflow's task callback arguments, in the order a try meets them.
TASK_CALLBACKS = (
    "on_execute_callback",
    "on_success_callback",
    "on_retry_callback",
    "on_failure_callback",
    "on_skipped_callback",
)
#: Airflow's `pre_execute`/`post_execute` hooks: carried as the callbacks are, called inside the try.
TASK_HOOKS = ("pre_execute", "post_execute")
#: Operators' default owner in Airflow (`[operators] default_owner`).
DEFAULT_OWNER = "airflow"

#: `TaskDefaults` fields holding Kubernetes objects: merged by `zonda.specs.merging.strategic_merge`.
_DEEP_MERGED_FIELDS = ("container", "pod_override")


def parse_dag_spec(raw: Mapping[str, Any]) -> DagSpec:
    """Validate a DAG resource's `spec` (camelCase, as stored), reporting every problem by field path.

    Pydantic's errors become sentences such as
    ``spec.tasks[2].triggerRule: Input should be 'all_success', ... (got 'al_success')``.
    """
    try:
        return DagSpec.model_validate(raw)
    except pydantic.ValidationError as exc:
        raise DagInvalid([describe_validation_error(error) for error in exc.errors()]) from exc


def resolve_dag(name: str, spec: DagSpec) -> ResolvedDag:
    """Apply defaults and task groups, and validate; raises `DagInvalid` listing every problem found."""
    errors = check_dag_settings(spec)
    graph = GraphBuilder(spec)
    order = graph.topological_order()  # reports cycles into graph.errors
    errors.extend(graph.errors)
    errors.extend(check_defaults_durations(spec, graph))

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

    uniform = weights[0] if weights and all(w == weights[0] for w in weights) else None

    def total(mask: int) -> int:
        """The weights of the tasks in `mask`: over its set bits only (not every bit below its
        highest: with 5,000 tasks that made one pass quadratic, 3.3 s of a 3.9 s pass)."""
        if uniform is not None:
            return uniform * mask.bit_count()
        found = 0
        while mask:
            lowest = mask & -mask
            found += weights[lowest.bit_length() - 1]
            mask ^= lowest
        return found

    result: dict[str, int] = {}
    for task_id, task in dag.tasks.items():
        if task.weight_rule == WeightRule.DOWNSTREAM:
            result[task_id] = task.priority_weight + total(below[task_id])
        elif task.weight_rule == WeightRule.UPSTREAM:
            result[task_id] = task.priority_weight + total(above[task_id])
        else:
            result[task_id] = task.priority_weight
    return result


def task_instance_weight(
    dag: ResolvedDag, key: str, run_id: str, weights: Mapping[str, int], max_tries: int | None = None
) -> int:
    """The priority weight of task instance `key` (``task`` or ``task[i]``): its task's effective weight,
    or for a custom strategy its `get_weight(ti)` at the try number it was created or cleared at."""
    task_id, map_index = mapping.split_key(key)
    task = dag.tasks[task_id]
    if task.weight_strategy is None:
        return weights[task_id]
    strategy = priority_strategies.load_priority_strategy(
        task.weight_strategy.class_, task.weight_strategy.params
    )
    ti = priority_strategies.StrategyTaskInstance(
        dag_id=dag.name,
        task_id=task_id,
        run_id=run_id,
        map_index=map_index,
        try_number=priority_strategies.tries_when_created(max_tries=max_tries, retries=task.retries),
        task=priority_strategies.StrategyTask(
            task_id=task_id,
            dag_id=dag.name,
            priority_weight=task.priority_weight,
            retries=task.retries,
            pool=task.pool,
            queue=task.queue,
        ),
    )
    return priority_strategies.strategy_weight(strategy, ti)


def _resolve_task(spec: DagSpec, graph: GraphBuilder, task_id: str) -> tuple[list[str], ResolvedTask]:
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
            per_group_index = mapped_groups.marked_arguments(merged["args"])  # typed per index
            arguments = operator_arguments.check_operator_arguments(
                task.operator,
                {name: value for name, value in merged["args"].items() if name not in per_group_index},
                mapping.argument_names(task.expand) + per_group_index,
            )
            if task.expand is not None and task.expand.kwargs_list is not None and task.expand.into is None:
                # expand_kwargs: which arguments each instance gets is only known at run time
                arguments = [problem for problem in arguments if "missing required argument" not in problem]
            errors.extend(f"task {task_id!r}: {problem}" for problem in arguments)
    group_errors, mapped_group, expand = mapped_groups.task_expansion(graph, task_id, task)
    errors.extend(group_errors)
    if task.expand is not None:
        errors.extend(f"task {task_id!r}: {problem}" for problem in mapping.check_expand(task.expand))
        outside = sorted(mapping.source_task_ids(task.expand) - set(graph.upstream[task_id]))
        if outside:
            errors.append(f"task {task_id!r} maps over the XCom of {outside}, which must be upstream of it")
    if merged.get("pool") is not None and (problem := pool_name_problem(merged["pool"])) is not None:
        errors.append(f"task {task_id!r}: {problem}")
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
            return None  # reported once by check_defaults_durations

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
        weight_strategy=merged.get("weight_strategy"),
        retry_policy=merged.get("retry_policy"),
        pool=_first_set(merged.get("pool"), DEFAULT_POOL),
        pool_slots=_first_set(merged.get("pool_slots"), 1),
        max_active_tis_per_dag=merged.get("max_active_tis_per_dag"),
        max_active_tis_per_dagrun=merged.get("max_active_tis_per_dagrun"),
        group=group,
        container=container,
        pod_override=merged.get("pod_override") or {},
        edge_labels=graph.edge_labels[task_id],
        doc_md=task.doc_md,
        display_name=task.display_name,
        is_setup=bool(task.is_setup),
        outlets=tuple(task.outlets or ()),
        is_teardown=bool(task.is_teardown),
        on_failure_fail_dagrun=bool(task.on_failure_fail_dagrun),
        owner=_first_set(merged.get("owner"), DEFAULT_OWNER),
        queue=merged.get("queue"),
        connections=tuple(merged.get("connections") or ()),
        variables=tuple(merged.get("variables") or ()),
        callbacks={
            kind: tuple(paths) for kind in (*TASK_CALLBACKS, *TASK_HOOKS) if (paths := merged.get(kind))
        },
        sla=duration("sla"),
        expand=expand,
        mapped_group=mapped_group,
        map_peers=mapped_groups.peers(graph, mapped_group, task_id),
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
            if field_name in _WEIGHT_FIELDS:  # one Airflow argument, `weight_rule`: the later layer's wins
                merged.pop(next(other for other in _WEIGHT_FIELDS if other != field_name), None)
    return merged


#: `weight_rule` as a built-in rule or a custom strategy: a layer that sets one unsets the other.
_WEIGHT_FIELDS = ("weight_rule", "weight_strategy")
