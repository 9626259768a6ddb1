"""Try tracking: a task pod is not removed before a run's status has recorded its try's outcome.

A pass launches a try (creates its pod), and its status write is refused (413) or its reply lost: no
status records the try yet. If the pod were deleted or evicted and removed before the next pass, that
pass would see neither the try in the status nor a pod and create the same try again under the same
name: one try, two executions, the first lost without a trace. Every task pod is therefore created with
the finalizer `FINALIZER_TRY_TRACKING`: deleted, it stays (its `deletionTimestamp` set) and a pass
observes it as its try's end (`observe_held`: one deleted before it ended is a failed try, its retries
apply). The controller removes the finalizer once the pod's outcome is safe to forget
(`release_after_write`, `release_without_pass`), with a JSON patch that tests the finalizer it removes
(`removal_patch`). Pods are not deleted in the normal flow, so this costs no write per task instance:
only a deleted pod costs one patch. Kubernetes' Job controller does the same with
`batch.kubernetes.io/job-tracking` (KEP-2307), for every pod as it ends.

Pure: what the wire says, and what to do with it. `controller.executors.kubernetes` and
`controller.manager.main` act on it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import timedelta
from typing import Any

from zonda.passes.decisions import AttemptPhase, ObservedAttempt
from zonda.resources.dagrun_models import DagRunStatus
from zonda.resources.names import attempt_name
from zonda.resources.states import FINISHED_RUN_STATES
from zonda.resources.wire import FINALIZER_TRY_TRACKING, parse_time
from zonda.specs import mapping

#: What a try whose pod was deleted before it ended is reported as (the executor gave up on it).
DELETED_BEFORE_ITS_END = (
    "its pod no longer exists: it was deleted before it ended (deleted, evicted or its node lost)"
)
ENDED = (AttemptPhase.SUCCEEDED, AttemptPhase.FAILED)
FINISHED_WIRE_STATES = frozenset(state.value for state in FINISHED_RUN_STATES)


def held(pod: Mapping[str, Any]) -> bool:
    """A task pod being deleted that our finalizer keeps: its try's outcome is not yet let go."""
    meta = pod.get("metadata") or {}
    return bool(meta.get("deletionTimestamp")) and FINALIZER_TRY_TRACKING in (meta.get("finalizers") or [])


def gone(attempt: ObservedAttempt) -> ObservedAttempt:
    """The last report of a try whose pod was deleted: failed if it had not ended, else as it ended."""
    if attempt.phase in ENDED:
        return attempt
    return replace(attempt, phase=AttemptPhase.FAILED, message=DELETED_BEFORE_ITS_END)


def observe_held(pod: Mapping[str, Any], attempt: ObservedAttempt) -> ObservedAttempt:
    """What a pass observes of a pod: a pod being deleted is its try's end, failed unless the try had
    ended before the deletion was asked for (`deletionTimestamp` less its grace period), whatever its
    phase says now: a kubelet (or kwok) may still report the try ending during the grace period, and
    whether a pass happened to see that first must not decide the try's outcome."""
    meta = pod.get("metadata") or {}
    deleting = parse_time(meta.get("deletionTimestamp"))
    if deleting is None:
        return attempt
    asked = deleting - timedelta(seconds=int(meta.get("deletionGracePeriodSeconds") or 0))
    if attempt.phase in ENDED and attempt.finished_at is not None and attempt.finished_at < asked:
        return attempt
    return replace(attempt, phase=AttemptPhase.FAILED, message=DELETED_BEFORE_ITS_END)


def release_after_write(
    pod: Mapping[str, Any], observed: Mapping[str, ObservedAttempt], written: DagRunStatus, run_name: str
) -> bool:
    """After a pass's status write succeeded (`written`): may this held pod go? Only when the pass
    observed it at this uid, and the status written accounts for its try: the run has finished, or a
    task instance records the attempt (`podName`: its end is recorded now, or the next pass finds it
    missing and fails it), or a task instance has moved past that try (an earlier try of it). Any other
    held pod stays: it may be a try no status has recorded yet, which a later pass adopts (and fails)
    when it launches that task, instead of creating it again; it goes when its run finishes."""
    if not held(pod):
        return False
    meta = pod.get("metadata") or {}
    name = meta.get("name", "")
    attempt = observed.get(name)
    if attempt is None or attempt.uid is None or attempt.uid != meta.get("uid"):
        return False
    if written.state in FINISHED_RUN_STATES:
        return True
    for key, ti in written.task_instances.items():
        if ti.pod_name == name:
            return True
        earlier = mapping.split_key(key)[0] == attempt.task_id and 1 <= attempt.try_number <= ti.try_number
        if earlier and name == attempt_name(run_name, key, attempt.try_number):
            return True
    return False


def release_without_pass(run: Mapping[str, Any] | None, run_uid: str | None) -> bool:
    """A held pod whose run no pass will record it in: the run is gone (deleted, its history limit's
    garbage collection, its namespace deleted), another of its name (a different uid), being deleted
    (a foreground deletion waits for its pods), or finished (nothing of it launches again). Then the
    pod goes at once: nothing can create its try again."""
    if run is None:
        return True
    meta = run.get("metadata") or {}
    if run_uid is not None and meta.get("uid") != run_uid:
        return True
    if meta.get("deletionTimestamp"):
        return True
    state = (run.get("status") or {}).get("state")
    return state in FINISHED_WIRE_STATES


def removal_patch(pod: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """The JSON patch that removes our finalizer from this pod as read (None: it has none): it tests
    the pod's uid and the finalizer at its index, so a pod of that name created again since, or a
    finalizer list changed since, is refused (422) rather than patched blindly."""
    meta = pod.get("metadata") or {}
    finalizers = list(meta.get("finalizers") or [])
    if FINALIZER_TRY_TRACKING not in finalizers:
        return None
    index = finalizers.index(FINALIZER_TRY_TRACKING)
    path = f"/metadata/finalizers/{index}"
    return [
        {"op": "test", "path": "/metadata/uid", "value": meta.get("uid")},
        {"op": "test", "path": path, "value": FINALIZER_TRY_TRACKING},
        {"op": "remove", "path": path},
    ]
