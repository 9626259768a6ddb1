"""A human's answer to a human-in-the-loop task (`zonda tasks respond`, the UI's form).

The request is the deferred task instance's Trigger (`zonda.resources.hitl`); the answer is that
Trigger's status written `fired` with Airflow's success payload, under the resourceVersion
precondition every Trigger status write carries: the first of a human's answer and the trigger's
own timeout event wins, and a second answer is refused by name. The run reconciler then resumes the
task with the event as it resumes any deferral. Who may answer is Kubernetes RBAC's say: `patch` on
`triggers/status` in the run's namespace (the chart's `hitl.responders`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from controller.kube import DAGRUNS, TRIGGERS, Conflict, KubeApi
from zonda.resources import hitl
from zonda.specs import mapping, params


class RespondError(Exception):
    """The answer was not taken; the message says why (for the CLI and the UI)."""


@dataclass(frozen=True)
class Answered:
    """An answer written: the Trigger it fired and the event it carries."""

    trigger: str
    event: dict[str, Any]


@dataclass(frozen=True)
class Pending:
    """A request waiting for its answer: what it asks, its Trigger, and its form's JSON schema (the
    task's `paramsSchema`, from the run's DAG spec; None without one)."""

    request: hitl.Request
    trigger: dict[str, Any]
    params_schema: dict[str, Any] | None


def params_errors(pending: Pending, values: Mapping[str, Any]) -> list[str]:
    """Why the answer's params do not fit the form's schema (Airflow validates them as the Param's;
    its trigger then fails the task, here the answer is refused before anything is written)."""
    return params.conf_errors(pending.params_schema, {}, values) if pending.params_schema else []


async def pending_request(kube: KubeApi, namespace: str, run_name: str, key: str) -> Pending:
    """The request task instance `key` (a task id, or `task_id[map_index]`) of the run waits on, and
    its Trigger; `RespondError` when it waits on none."""
    run = await kube.get_custom(DAGRUNS, namespace, run_name)
    if run is None:
        raise RespondError(f"DagRun {run_name!r} not found in namespace {namespace}")
    tis = (run.get("status") or {}).get("taskInstances") or {}
    ti = tis.get(key)
    if ti is None:
        task_ids = sorted({mapping.split_key(k)[0] for k in tis})
        raise RespondError(f"{run_name} has no task instance {key!r} (its tasks: {', '.join(task_ids)})")
    trigger = None
    if ti.get("state") == "deferred" and ti.get("triggerName"):
        trigger = await kube.get_custom(TRIGGERS, namespace, ti["triggerName"])
    deferral = ti.get("deferral") or {}
    request = hitl.request_of(deferral.get("triggerClasspath"), deferral.get("triggerKwargs"))
    why = hitl.unanswerable(
        ti.get("state"),
        ((trigger or {}).get("status") or {}).get("state"),
        is_hitl=request is not None or ti.get("state") != "deferred",
    )
    if why is None and trigger is None:
        why = "its request (Trigger) is not created yet: try again in a moment"
    if why is not None:
        raise RespondError(f"{run_name} task {key}: cannot answer, {why}")
    assert request is not None and trigger is not None
    task_id = mapping.split_key(key)[0]
    specs = ((run.get("status") or {}).get("dagSpec") or {}).get("tasks") or []
    schema = next((t.get("paramsSchema") for t in specs if t.get("id") == task_id), None)
    return Pending(request, trigger, schema)


async def respond(
    kube: KubeApi,
    namespace: str,
    run_name: str,
    key: str,
    *,
    options: Sequence[str],
    params_input: Mapping[str, Any],
    user: str | None,
    now: datetime,
) -> Answered:
    """Check the answer against the request and fire the request's Trigger with it."""
    for _ in range(3):
        pending = await pending_request(kube, namespace, run_name, key)
        request, trigger = pending.request, pending.trigger
        try:
            values = hitl.check_response(request, options, params_input)
        except hitl.ResponseError as error:
            raise RespondError(f"{run_name} task {key}: {error}") from None
        if errors := params_errors(pending, values):
            raise RespondError(f"{run_name} task {key}: the params do not fit the form: " + "; ".join(errors))
        responder = {"id": user, "name": user} if user else None
        event = hitl.response_event(options, values, responded_at=now, user=responder)
        name = trigger["metadata"]["name"]
        status = {
            "state": "fired",
            "event": event,
            "firedAt": now.isoformat(),
            "holder": f"answered by {user or 'an unknown user'}",
        }
        try:
            await kube.patch_custom_status(
                TRIGGERS, namespace, name, status, resource_version=trigger["metadata"].get("resourceVersion")
            )
        except Conflict:
            continue  # written meanwhile (the timeout fired?): read again, which says so
        run = await kube.get_custom(DAGRUNS, namespace, run_name)
        if run is not None:
            chosen = ", ".join(repr(option) for option in options)
            await kube.emit_event(
                run,
                reason="TaskResponded",
                message=f"{key}: answered {chosen} by {user or 'an unknown user'}",
                component="zonda-cli",
            )
        return Answered(trigger=name, event=event)
    raise RespondError(f"{run_name} task {key}: its request kept changing while the answer was written")
