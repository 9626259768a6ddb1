"""Which task pod watch events need a pass: those that change what the pass would observe."""

from __future__ import annotations

from typing import Any

from controller.executors.kubernetes import KubernetesExecutor
from controller.executors.pods import PodDefaults
from controller.kube.cache import LabelledObjects
from controller.kube.fake import FakeKube
from zonda.resources.wire import LABEL_DAGRUN_UID


def pod(version: str, status: dict[str, Any], node: str | None = None) -> dict[str, Any]:
    meta = {
        "name": "run-t-1",
        "namespace": "ns",
        "resourceVersion": version,
        "creationTimestamp": "2026-01-02T03:04:05Z",
        "labels": {LABEL_DAGRUN_UID: "u1"},
    }
    return {"metadata": meta, "spec": {"nodeName": node} if node else {}, "status": status}


def test_our_create_and_the_binding_need_no_pass_but_the_pod_running_or_failing_to_start_does() -> None:
    executor = KubernetesExecutor(FakeKube(), PodDefaults())  # type: ignore[arg-type]
    executor.pods = LabelledObjects(LABEL_DAGRUN_UID)
    created = pod("1", {"phase": "Pending"})
    assert executor.changes_observation(created)  # nothing kept yet: a pass decides
    executor.pods.observed(created)  # what the create answered
    assert not executor.changes_observation(pod("1", {"phase": "Pending"}))  # its ADDED event
    assert not executor.changes_observation(pod("2", {"phase": "Pending"}, node="kwok-0"))  # bound
    waiting = {"waiting": {"reason": "ErrImagePull", "message": "no such image"}}
    assert executor.changes_observation(
        pod("3", {"phase": "Pending", "containerStatuses": [{"name": "base", "state": waiting}]})
    )
    assert executor.changes_observation(pod("3", {"phase": "Running", "startTime": "2026-01-02T03:04:06Z"}))


def test_only_a_start_may_wait_for_the_next_pass_an_end_or_a_failure_to_start_may_not() -> None:
    executor = KubernetesExecutor(FakeKube(), PodDefaults())  # type: ignore[arg-type]
    executor.pods = LabelledObjects(LABEL_DAGRUN_UID)
    running = pod("2", {"phase": "Running", "startTime": "2026-01-02T03:04:06Z"})
    assert not executor.only_started(running), "nothing kept: not known to be news of a start only"
    executor.pods.observed(pod("1", {"phase": "Pending"}))
    assert executor.only_started(running)
    waiting = {"waiting": {"reason": "ErrImagePull", "message": "no such image"}}
    assert not executor.only_started(
        pod("2", {"phase": "Pending", "containerStatuses": [{"name": "base", "state": waiting}]})
    )
    assert not executor.only_started(pod("2", {"phase": "Succeeded"})), "an end is news at once"
    executor.pods.observed(running)
    assert not executor.only_started(pod("3", {"phase": "Succeeded"}))
