"""A user's action on a DagRun, carried out: read the run, apply a pure `zonda.actions.clear_and_mark`
action, write.

Shared by the CLI (`zonda clear`/`mark`) and the UI, each with its own API client (the UI's acts as
the viewer). The status is written back with the resourceVersion read, so a controller write in
between means deciding again from the new status, never overwriting it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pydantic

from controller.kube import DAGRUNS, Conflict, KubeApi, KubeError
from zonda.actions import clear_and_mark
from zonda.actions.across_dags import RunClear, RunView, plan_clear_across_dags
from zonda.actions.clear_and_mark import ActionResult
from zonda.resources.dagrun_models import DagRunStatus, TaskInstanceStatus
from zonda.resources.states import IllegalTransition
from zonda.specs.dags import ResolvedDag

Action = Callable[[ResolvedDag, DagRunStatus], ActionResult]


class RunActionError(Exception):
    """The action was not applied; `status` is the HTTP status that says why (404, 409)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def apply_action(run: Mapping[str, Any], act: Action) -> tuple[ActionResult, DagRunStatus]:
    """The action's result on this run body, and the status it started from (pure: nothing written)."""
    status = DagRunStatus.model_validate(run.get("status") or {})
    try:
        return act(clear_and_mark.dag_of_run(run["spec"]["dagName"], status), status), status
    except (clear_and_mark.ActionError, IllegalTransition) as exc:
        raise RunActionError(409, str(exc)) from exc


async def act_on_run(
    kube: KubeApi, namespace: str, run_name: str, act: Action, *, component: str = "zonda"
) -> tuple[ActionResult, dict[str, TaskInstanceStatus]]:
    """Apply `act` to the run's status and write it back; the result and the task instances before.

    Then post the action's Events on the run (best effort: the status is already written).
    """
    for _ in range(10):
        run = await kube.get_custom(DAGRUNS, namespace, run_name)
        if run is None:
            raise RunActionError(404, f"DagRun {run_name!r} not found in namespace {namespace}")
        result, status = apply_action(run, act)
        if not result.changed:
            return result, status.task_instances
        try:
            await kube.replace_custom_status(DAGRUNS, namespace, {**run, "status": result.status.to_wire()})
        except Conflict:
            await asyncio.sleep(0.2)
            continue
        for event in result.events:
            with contextlib.suppress(KubeError):  # the status is written: a lost Event loses no state
                await kube.emit_event(
                    run,
                    reason=event.reason,
                    message=event.message,
                    warning=event.warning,
                    component=component,
                )
        return result, status.task_instances
    raise RunActionError(409, "the run kept changing under us; try again")


@dataclass(frozen=True)
class RunOutcome:
    """What a clear did to one run: the action's result and the task instances before it."""

    run_name: str
    result: ActionResult
    before: dict[str, TaskInstanceStatus]
    via: str | None  # the ExternalTaskMarker (`run/task`) that led here; None for the run cleared


async def clear_across_dags(
    kube: KubeApi,
    namespace: str,
    first: RunClear,
    *,
    now: datetime,
    who: str,
    follow_markers: bool = True,
    component: str = "zonda",
) -> list[RunOutcome]:
    """Clear, then follow `ExternalTaskMarker`s into the other DAGs' runs (Airflow's `DAG.clear`).

    The plan is `zonda.actions.across_dags.plan_clear_across_dags` over the namespace's runs as read now; each
    run is then cleared on its own with its resourceVersion (`act_on_run`), the first run first, so
    an error in the plan (a marker chain deeper than its `recursion_depth`) changes nothing.
    """
    start = await kube.get_custom(DAGRUNS, namespace, first.run_name)
    if start is None:
        raise RunActionError(404, f"DagRun {first.run_name!r} not found in namespace {namespace}")
    plan = [first]
    if follow_markers:
        views = []
        for body in await kube.list_custom(DAGRUNS, namespace):
            with contextlib.suppress(pydantic.ValidationError, KeyError):  # a run too broken to follow
                views.append(RunView.from_body(body))
        try:
            plan = plan_clear_across_dags(RunView.from_body(start), views, first, now=now, who=who)
        except (clear_and_mark.ActionError, IllegalTransition) as exc:
            raise RunActionError(409, str(exc)) from exc
    outcomes = []
    for part in plan:

        def act(dag: ResolvedDag, status: DagRunStatus, part: RunClear = part) -> ActionResult:
            return part.apply(dag, status, now=now, who=who)

        result, before = await act_on_run(kube, namespace, part.run_name, act, component=component)
        outcomes.append(RunOutcome(part.run_name, result, before, part.via))
    return outcomes
