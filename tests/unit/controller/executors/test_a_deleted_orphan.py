"""A try launched by a pass whose status write was refused (or lost), its pod then deleted before the
next pass: that pass must not create the same try again under the same name (one try, two pods, the
deleted one's work lost without a trace) but fail the try, so its retries apply.

Found by the fault suite's mixed schedule (`tests/cluster/test_faults.py -k mixed`: a status write
refused as too large, then the pod evicted): etcd saw `publish` try 1's pod created twice.

Real: the reconcilers, the Kubernetes executor, the status writer, the pure core. Fake: the API
(`FakeKube`, refusing the run's first status write as too large); the pod watch's DELETED event is
handed to the executor as `controller.manager.main` does.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from controller.executors.kubernetes import KubernetesExecutor
from controller.executors.pods import PodDefaults
from controller.kube import DAGRUNS, DAGS, KubeError
from controller.kube.fake import FakeKube
from controller.reconcilers.reconcilers import Reconcilers
from tests.unit.fake_world import NS, dag_body, run_body, settle
from zonda.resources.wire import LABEL_DAGRUN_UID


class RefusingOnceKube(FakeKube):
    """Refuses the first replace of a DagRun's status as too large; counts the pod creates."""

    def __init__(self) -> None:
        super().__init__()
        self.refusals = 1
        self.creates: list[str] = []

    async def create_pod(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        self.creates.append(body["metadata"]["name"])
        return await super().create_pod(namespace, body)

    async def replace_custom_status(
        self, plural: str, namespace: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        if plural == DAGRUNS and self.refusals:
            self.refusals -= 1
            message = "Request entity too large: limit is 3145728"
            raise KubeError(413, json.dumps({"kind": "Status", "code": 413, "message": message}))
        return await super().replace_custom_status(plural, namespace, body)


async def launched_and_refused(kube: RefusingOnceKube, reconcilers: Reconcilers) -> dict[str, Any]:
    """A run `etl-1` whose first pass launched `extract` try 1 and had its status write refused: the
    try's pod, which no status records."""
    await kube.create_custom(DAGS, NS, dag_body("etl", defaultArgs={"retries": 1, "retryDelay": "0s"}))
    await kube.create_custom(DAGRUNS, NS, run_body("etl-1", "etl"))
    await reconcilers.reconcile("run", NS, "etl-1")  # launches extract try 1; its status is refused
    assert kube.refusals == 0, "positive control: the pass's status write was refused"
    status = kube.objects[(DAGRUNS, NS, "etl-1")].get("status") or {}
    assert "extract" not in (status.get("taskInstances") or {}), "no status records the try"
    [pod] = await kube.list_pods(NS, LABEL_DAGRUN_UID)
    return pod


def test_a_try_whose_pod_went_before_any_status_recorded_it_is_failed_not_created_again() -> None:
    kube = RefusingOnceKube()
    executor = KubernetesExecutor(kube, PodDefaults())
    reconcilers = Reconcilers(kube, executor)

    async def scenario() -> dict[str, Any]:
        pod = await launched_and_refused(kube, reconcilers)
        # a pod without the finalizer zonda.dev/try-tracking (made before it, or a user removed it):
        # only the watch's DELETED event tells of it (test_try_tracking.py: the finalizer's own case)
        assert await executor.release(pod), "positive control: its finalizer removed"
        await kube.delete_pod(NS, pod["metadata"]["name"], grace_period_seconds=0)  # evicted, say
        assert await kube.list_pods(NS, LABEL_DAGRUN_UID) == [], "gone, not held"
        executor.pod_deleted(pod)  # the pod watch's DELETED event (its last state: Pending here)
        await reconcilers.reconcile("run", NS, "etl-1")
        after_loss = dict(kube.objects[(DAGRUNS, NS, "etl-1")]["status"]["taskInstances"]["extract"])
        await reconcilers.reconcile("run", NS, "etl-1")  # its retry
        await settle()
        return after_loss

    assert_failed_once_and_retried(kube, asyncio.run(scenario()))


def assert_failed_once_and_retried(kube: RefusingOnceKube, extract: dict[str, Any]) -> None:
    """Try 1's pod created once, the try failed as deleted before it ended, and try 2 launched."""
    first, *rest = kube.creates
    assert kube.creates.count(first) == 1, f"try 1's pod created again under its name: {kube.creates}"
    assert (extract["state"], extract["tryNumber"]) == ("up_for_retry", 1), extract
    assert "deleted before it ended" in extract["message"]
    assert [name for name in rest if "-extract-2-" in name], f"its retry launched: {kube.creates}"
