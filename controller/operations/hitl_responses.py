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
from zonda.specs import mapping


class RespondError(Exception):
    """The answer was not taken; the message says why (for the CLI and the UI)."""


@dataclass(frozen=True)
class Answered:
    """An answer written: the Trigger it fired and the event it carries."""

    trigger: str
    event: dict[str, Any]


async def pending_request(
    kube: KubeApi, namespace: str, run_name: str, key: str
) -> tuple[hitl.Request, dict[str, Any]]:
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
    return request, trigger


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
        request, trigger = await pending_request(kube, namespace, run_name, key)
        try:
            params = hitl.check_response(request, options, params_input)
        except hitl.ResponseError as error:
            raise RespondError(f"{run_name} task {key}: {error}") from None
        responder = {"id": user, "name": user} if user else None
        event = hitl.response_event(options, params, responded_at=now, user=responder)
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
