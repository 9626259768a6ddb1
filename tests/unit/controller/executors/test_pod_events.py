"""Which task pod watch events need a pass: those that change what the pass would observe."""

from __future__ import annotations

from typing import Any

import pytest

from controller.executors import kubernetes
from controller.executors.kubernetes import KubernetesExecutor, PodNews
from controller.executors.pods import PodDefaults
from controller.kube.cache import LabelledObjects
from controller.kube.fake import FakeKube
from zonda.resources.wire import LABEL_DAGRUN_UID


def pod(
    version: str, status: dict[str, Any], node: str | None = None, name: str = "run-t-1"
) -> dict[str, Any]:
    meta = {
        "name": name,
        "namespace": "ns",
        "uid": "u1",
        "resourceVersion": version,
        "creationTimestamp": "2026-01-02T03:04:05Z",
        "labels": {LABEL_DAGRUN_UID: "u1"},
    }
    return {"metadata": meta, "spec": {"nodeName": node} if node else {}, "status": status}


SUCCEEDED = {
    "phase": "Succeeded",
    "containerStatuses": [{"name": "base", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}],
}


def watched() -> KubernetesExecutor:
    executor = KubernetesExecutor(FakeKube(), PodDefaults())  # type: ignore[arg-type]
    executor.pods = LabelledObjects(LABEL_DAGRUN_UID)
    return executor


def test_our_create_and_the_binding_need_no_pass_but_the_pod_running_or_failing_to_start_does() -> None:
    executor = watched()
    assert executor.pods is not None
    created = pod("1", {"phase": "Pending"})
    assert executor.news(created) is PodNews.CHANGED  # nothing kept yet: a pass decides
    executor.pods.observed(created)  # what the create answered
    assert executor.news(pod("1", {"phase": "Pending"})) is PodNews.NONE  # its ADDED event
    assert executor.news(pod("2", {"phase": "Pending"}, node="kwok-0")) is PodNews.NONE  # bound
    waiting = {"waiting": {"reason": "ErrImagePull", "message": "no such image"}}
    failing = pod("3", {"phase": "Pending", "containerStatuses": [{"name": "base", "state": waiting}]})
    assert executor.news(failing) is PodNews.CHANGED
    running = pod("3", {"phase": "Running", "startTime": "2026-01-02T03:04:06Z"})
    assert executor.news(running) is PodNews.STARTED


def test_only_a_start_may_wait_for_the_next_pass_an_end_or_a_failure_to_start_may_not() -> None:
    executor = watched()
    assert executor.pods is not None
    running = pod("2", {"phase": "Running", "startTime": "2026-01-02T03:04:06Z"})
    assert executor.news(running) is PodNews.CHANGED, "nothing kept: not known to be news of a start only"
    executor.pods.observed(pod("1", {"phase": "Pending"}))
    assert executor.news(running) is PodNews.STARTED
    waiting = {"waiting": {"reason": "ErrImagePull", "message": "no such image"}}
    failing = pod("3", {"phase": "Pending", "containerStatuses": [{"name": "base", "state": waiting}]})
    assert executor.news(failing) is PodNews.CHANGED
    assert executor.news(pod("4", SUCCEEDED)) is PodNews.CHANGED, "an end is news at once"
    executor.pods.observed(running)
    assert executor.news(pod("5", SUCCEEDED)) is PodNews.CHANGED


def test_each_pod_version_is_observed_once_by_its_events_and_its_runs_passes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A pod event compared the kept pod and the new one four times over, and each pass observed
    every pod of its run again (20 for a 20-task chain): a third of the pod handler, profiled."""
    calls: list[str] = []
    real = kubernetes._observe

    def counting(body: Any) -> Any:
        calls.append(body["metadata"]["resourceVersion"])
        return real(body)

    monkeypatch.setattr(kubernetes, "_observe", counting)
    executor = watched()
    assert executor.pods is not None
    executor.pods.seed("ns", [pod("1", {"phase": "Pending"}), pod("1", SUCCEEDED, name="done")])
    for version, status in (
        ("2", {"phase": "Pending"}),
        ("3", {"phase": "Running"}),
        ("4", SUCCEEDED),
    ):
        event = pod(version, status)
        executor.news(event)
        executor.pods.observed(event)
    run = {"metadata": {"namespace": "ns", "uid": "u1", "name": "run"}}
    for _ in range(3):
        observed = asyncio_run(executor.observe(run))
    assert observed["run-t-1"].phase.value == "succeeded"
    assert sorted(calls) == ["1", "1", "2", "3", "4"], calls  # each version once; "done" once, in a pass
    executor.pod_deleted(pod("5", SUCCEEDED))
    assert ("ns", "run-t-1") not in executor._observations  # forgotten with the pod


def asyncio_run(awaitable: Any) -> Any:
    import asyncio

    return asyncio.run(awaitable)
