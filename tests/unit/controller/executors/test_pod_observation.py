"""What `observe_pod` reads from a Pending pod: since when, and why (the pending timeout's inputs)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from controller.executors import pods
from zonda.passes.decisions import AttemptPhase

CREATED = "2026-01-02T03:04:05Z"


def pending_pod(status: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "p", "creationTimestamp": CREATED}, "status": {"phase": "Pending", **status}}


def test_a_pending_pod_reports_its_creation_and_the_kubelets_waiting_reason() -> None:
    waiting = {"reason": "ErrImageNeverPull", "message": 'Container image "missing:1" is not present'}
    pod = pending_pod({"containerStatuses": [{"name": "base", "state": {"waiting": waiting}}]})
    observed = pods.observe_pod(pod, task_id="t", try_number=1)
    assert observed.phase is AttemptPhase.PENDING
    assert observed.pending_since == datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert observed.message == 'ErrImageNeverPull: Container image "missing:1" is not present'


def test_an_unschedulable_pod_reports_the_schedulers_reason() -> None:
    condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/1 nodes"}
    observed = pods.observe_pod(pending_pod({"conditions": [condition]}), task_id="t", try_number=1)
    assert observed.message == "Unschedulable: 0/1 nodes"


def test_a_pod_just_created_has_no_reason_yet() -> None:
    observed = pods.observe_pod(pending_pod({}), task_id="t", try_number=1)
    assert observed.phase is AttemptPhase.PENDING and observed.message is None
