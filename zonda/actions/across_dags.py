"""A clear that crosses DAGs: Airflow's `DAG.clear` following `ExternalTaskMarker`s into other runs.

An `ExternalTaskMarker` among the cleared task instances carries the clear into the run of another
DAG at the marker's logical date, and so on up to the marker's `recursion_depth`. It lives apart from
`zonda.actions.clear_and_mark` because it is a plan over many runs (rendering each marker's templates to find
its
target) built on top of one run's `clear`; nothing here writes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from zonda.actions.clear_and_mark import ActionError, ActionResult, clear, dag_of_run
from zonda.resources import names, wire
from zonda.resources.dagrun_models import DagRunSpec, DagRunStatus
from zonda.resources.models import DagSpec
from zonda.schedules.dag_dependencies import DEFAULT_EXECUTION_DATE, DEFAULT_RECURSION_DEPTH
from zonda.specs import operator_registry
from zonda.specs.dags import ResolvedDag, ResolvedTask
from zonda.tries import task_context, templating
from zonda.tries.invocation_builder import task_invocation


@dataclass(frozen=True)
class RunView:
    """A DagRun as the cross-DAG clear reads it: its name, spec and status."""

    name: str
    spec: DagRunSpec
    status: DagRunStatus

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> RunView:
        return cls(
            name=body["metadata"]["name"],
            spec=DagRunSpec.model_validate(body.get("spec") or {}),
            status=DagRunStatus.model_validate(body.get("status") or {}),
        )


@dataclass(frozen=True)
class RunClear:
    """One run's part of a clear: which task instances, selected as `clear` selects them."""

    run_name: str
    task_ids: tuple[str, ...] | None
    upstream: bool = False
    downstream: bool = False
    only_failed: bool = False
    #: The marker this part was reached through (`run/task`), None for the run the user cleared.
    via: str | None = None

    def apply(self, dag: ResolvedDag, status: DagRunStatus, *, now: datetime, who: str) -> ActionResult:
        return clear(
            dag,
            status,
            task_ids=self.task_ids,
            upstream=self.upstream,
            downstream=self.downstream,
            only_failed=self.only_failed,
            now=now,
            who=who if self.via is None else f"{who} through ExternalTaskMarker {self.via}",
        )


def is_marker(task: ResolvedTask) -> bool:
    """Whether the task is an `ExternalTaskMarker` (by Airflow's name or by its import path)."""
    if task.operator is None:
        return False
    try:
        classpath = operator_registry.operator_classpath(task.operator)
    except operator_registry.UnknownOperator:
        return False
    return classpath.replace(":", ".") == operator_registry.BUILTIN_OPERATORS["ExternalTaskMarker"]


def _marker_target(run: RunView, dag: ResolvedDag, task_id: str) -> tuple[str, str, datetime, int]:
    """(external DAG name, external task id, logical date, recursion depth) of a marker in `run`."""
    task = dag.tasks[task_id]
    args = dict(task.args)
    try:
        dag_spec = DagSpec.model_validate(run.status.dag_spec)
        invocation = task_invocation(
            run_name=run.name, spec=run.spec, status=run.status, dag_spec=dag_spec, task=task, try_number=1
        )
        context = task_context.build_context(invocation)
        environment = templating.invocation_environment(invocation)
        spent = templating.budget()
        rendered = {
            name: templating.render(
                args.get(name, default), context, field=name, environment=environment, budget=spent
            )
            for name, default in (
                ("external_dag_id", None),
                ("external_task_id", None),
                ("execution_date", DEFAULT_EXECUTION_DATE),
            )
        }
        logical_date = wire.parse_time(rendered["execution_date"])
    except (templating.TemplateError, ValueError, AssertionError) as exc:
        raise ActionError(f"ExternalTaskMarker {task_id} of run {run.name}: {exc}") from exc
    if not rendered["external_dag_id"] or not rendered["external_task_id"] or logical_date is None:
        raise ActionError(
            f"ExternalTaskMarker {task_id} of run {run.name} needs external_dag_id, external_task_id "
            "and an execution_date"
        )
    try:
        external = names.dag_resource_name(str(rendered["external_dag_id"]))
    except ValueError as exc:
        raise ActionError(f"ExternalTaskMarker {task_id} of run {run.name}: {exc}") from exc
    depth = int(args.get("recursion_depth", DEFAULT_RECURSION_DEPTH))
    return external, str(rendered["external_task_id"]), logical_date, depth


def plan_clear_across_dags(
    start: RunView, runs: Iterable[RunView], first: RunClear, *, now: datetime, who: str = "a user"
) -> list[RunClear]:
    """Airflow's `DAG.clear` with its dependent DAGs: the user's clear, then the runs markers reach.

    Every `ExternalTaskMarker` among the task instances a clear moves leads to the run of its
    `external_dag_id` at its rendered `execution_date`, where `external_task_id` and its downstream
    are cleared (with the same only-failed filter), and so on. As in Airflow, the first marker's
    `recursion_depth` bounds the chain, and going deeper is an error naming the marker (a cycle, or
    too much to clear); each marker is followed once. Purely computational: `runs` are every run the
    markers may point at (the caller lists the namespace's DagRuns); nothing is written.
    """
    by_date: dict[tuple[str, float], list[RunView]] = {}
    for run in runs:
        if run.status.logical_date is not None and run.status.dag_spec is not None:
            by_date.setdefault((run.spec.dag_name, run.status.logical_date.timestamp()), []).append(run)
    plan: list[RunClear] = []
    queue: list[tuple[RunView, RunClear, int]] = [(start, first, 0)]
    visited: set[tuple[str, str]] = set()
    max_depth: int | None = None
    while queue:
        run, part, depth = queue.pop(0)
        dag = dag_of_run(run.spec.dag_name, run.status)
        result = part.apply(dag, run.status, now=now, who=who)
        plan.append(part)
        for task_id in result.changed:
            if not is_marker(dag.tasks[task_id]) or (run.name, task_id) in visited:
                continue
            visited.add((run.name, task_id))
            external_dag, external_task, logical_date, recursion_depth = _marker_target(run, dag, task_id)
            if max_depth is None:
                max_depth = recursion_depth
            if depth + 1 > max_depth:
                raise ActionError(
                    f"Maximum recursion depth {max_depth} reached for ExternalTaskMarker {task_id} of run "
                    f"{run.name}. Attempted to clear too many tasks or there may be a cyclic dependency."
                )
            for target in by_date.get((external_dag, logical_date.timestamp()), []):
                if external_task not in dag_of_run(target.spec.dag_name, target.status).tasks:
                    continue  # as Airflow's query: no such task instance there, nothing to clear
                hop = RunClear(
                    target.name,
                    (external_task,),
                    downstream=True,
                    only_failed=part.only_failed,
                    via=f"{run.name}/{task_id}",
                )
                queue.append((target, hop, depth + 1))
    return plan


__all__ = ["RunClear", "RunView", "is_marker", "plan_clear_across_dags"]
