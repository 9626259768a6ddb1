"""A try whose pod the apiserver refuses for good fails, and its retries apply (Airflow's
KubernetesExecutor fails the task instance); a refusal of the moment is retried by the reconcile.

Real: the reconcilers, the Kubernetes executor, the status writer, the pure core. Fake: the API
(`FakeKube`, refusing the pods of one task with the Status a real apiserver returns; the cluster
test `tests/cluster/test_refused_pods.py` has the real apiserver refuse them).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from controller.executors.kubernetes import REFUSALS_KEPT, AttemptReports, KubernetesExecutor
from controller.executors.pods import PodDefaults
from controller.kube import DAGRUNS, DAGS, KubeError
from controller.kube.fake import FakeKube
from controller.reconcilers.reconcilers import Reconcilers
from tests.unit.fake_world import NS, dag_body, run_body, settle
from zonda.passes import launch_refusals
from zonda.passes.decisions import AttemptPhase, ObservedAttempt

INVALID = (
    'Pod "etl-1-extract-1-x" is invalid: spec.containers[0].resources.requests[cpu]: '
    'Invalid value: "1 core": must be less than or equal to cpu limit'
)
PSS = 'pods "etl-1-extract-1-x" is forbidden: violates PodSecurity "restricted:latest": privileged'
QUOTA = 'pods "p" is forbidden: exceeded quota: q, requested: pods=1, used: pods=2, limited: pods=2'
RBAC = 'pods is forbidden: User "system:serviceaccount:z:zonda" cannot create resource "pods" in API group ""'


@pytest.mark.parametrize(
    ("status", "message", "fails"),
    [
        pytest.param(422, INVALID, True, id="422 Invalid: the spec itself"),
        pytest.param(400, "bad request", True, id="400 BadRequest"),
        pytest.param(413, "Request entity too large", True, id="413 too large"),
        pytest.param(403, PSS, True, id="403 from Pod Security admission"),
        pytest.param(403, QUOTA, False, id="403 exceeded quota: waits for running pods to end"),
        pytest.param(403, RBAC, False, id="403 of the controller's own RBAC: the operator's setup"),
        pytest.param(429, "Too many requests", False, id="429"),
        pytest.param(500, "Internal error occurred: failed calling webhook", False, id="500"),
        pytest.param(503, "unavailable", False, id="503"),
        pytest.param(409, "Operation cannot be fulfilled", False, id="409 other than ours"),
    ],
)
def test_which_refusals_fail_the_try(status: int, message: str, fails: bool) -> None:
    words = launch_refusals.refusal(status, message)
    assert (words is not None) is fails
    if words is not None:
        assert f"({status})" in words and message in words


class RefusingKube(FakeKube):
    """Refuses every pod of task `extract` with one Status; counts the creates it was asked for."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__()
        self.refusal = (status, message)
        self.creates: list[str] = []

    async def create_pod(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        self.creates.append(body["metadata"]["name"])
        if "-extract-" in body["metadata"]["name"]:
            status, message = self.refusal
            raise KubeError(status, json.dumps({"kind": "Status", "code": status, "message": message}))
        return await super().create_pod(namespace, body)


def _run(kube: RefusingKube, passes: int) -> dict[str, Any]:
    """Reconcile the run `passes` times (or until it ended); its status."""
    reconcilers = Reconcilers(kube, KubernetesExecutor(kube, PodDefaults()))

    async def scenario() -> None:
        await kube.create_custom(DAGS, NS, dag_body("etl", defaultArgs={"retries": 1, "retryDelay": "0s"}))
        await kube.create_custom(DAGRUNS, NS, run_body("etl-1", "etl"))
        for _ in range(passes):
            await reconcilers.reconcile("run", NS, "etl-1")
            if kube.objects[(DAGRUNS, NS, "etl-1")].get("status", {}).get("state") == "failed":
                break
        await settle()

    asyncio.run(scenario())
    return dict(kube.objects[(DAGRUNS, NS, "etl-1")]["status"])


def test_a_pod_refused_for_good_fails_its_try_then_its_retry_and_the_run() -> None:
    kube = RefusingKube(422, INVALID)
    status = _run(kube, passes=8)
    extract = status["taskInstances"]["extract"]
    assert status["state"] == "failed"
    assert extract["state"] == "failed" and extract["tryNumber"] == 2
    assert "the apiserver refused its pod (422)" in extract["message"]
    assert "must be less than or equal to cpu limit" in extract["message"]
    assert status["taskInstances"]["load"]["state"] == "upstream_failed"
    assert len(kube.creates) == 2, f"one create a try, retry included: {kube.creates}"
    events = [e for e in kube.events if e.reason in ("TaskUpForRetry", "TaskFailed")]
    assert [e.reason for e in events] == ["TaskUpForRetry", "TaskFailed"]
    assert all("refused its pod (422)" in e.message for e in events)


def test_a_refusal_of_the_moment_is_retried_by_the_reconcile_not_failed() -> None:
    kube = RefusingKube(403, QUOTA)
    with pytest.raises(KubeError):
        _run(kube, passes=1)
    status = kube.objects[(DAGRUNS, NS, "etl-1")].get("status") or {}
    assert (status.get("taskInstances") or {}).get("extract", {}).get("state") != "failed"
    assert kube.creates, "positive control: the pod was asked for"


def test_the_executors_in_memory_reports_are_per_run_newest_kept_and_forgotten_at_a_launch() -> None:
    """`AttemptReports` (refused launches, deleted pods): a run sees only its own; past
    `REFUSALS_KEPT` the oldest goes; a report seen again is the newest; `forget` drops one."""

    def report(name: str) -> ObservedAttempt:
        return ObservedAttempt(task_id="t", try_number=1, name=name, phase=AttemptPhase.FAILED)

    reports = AttemptReports()
    reports.remember("run-a", "first", report("first"))
    reports.remember("run-b", "other", report("other"))
    for index in range(REFUSALS_KEPT - 2):
        reports.remember("run-c", f"filler-{index}", report(f"filler-{index}"))
    reports.remember("run-a", "first", report("first"))  # seen again: the newest now
    reports.remember("run-a", "second", report("second"))  # one past the bound: "other" goes
    assert len(reports) == REFUSALS_KEPT
    assert sorted(reports.of_run("run-a")) == ["first", "second"]
    assert reports.of_run("run-b") == {}
    reports.forget("run-a", "first")
    assert list(reports.of_run("run-a")) == ["second"]
