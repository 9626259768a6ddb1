"""Try tracking (`zonda.passes.try_tracking`): a task pod deleted before any status recorded its try
stays, held by its finalizer, until a pass has recorded it: the next pass fails the try (its retries
apply) instead of creating it again under the same name, even when no watch told the controller of
the deletion (a broken pod watch: proxy reset, apiserver or etcd restart) or the controller restarted
in between. And the finalizer never holds a deletion no pass will record: the controller's own
deletions, a run gone or finished.

The audited mixed fault run (`tests/cluster/test_faults.py -k mixed`, MIXED_RUNS=20) found 8 such
duplicates that the watch-only fix (`test_a_deleted_orphan.py`) could not see.

Real: the reconcilers, the Kubernetes executor, the status writer, the pure core, the controller
process's pod-event handler. Fake: the API (`FakeKube`, which honours finalizers as the apiserver
does: tests/kube_contract.py), refusing the run's first status write as too large.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from controller.executors import pods
from controller.executors.kubernetes import KubernetesExecutor
from controller.executors.pods import PodDefaults
from controller.kube import DAGRUNS, DAGS
from controller.kube.fake import FakeKube
from controller.reconcilers.reconcilers import Reconcilers
from tests.unit.controller.executors import test_pod_snapshot as snapshot
from tests.unit.controller.executors.test_a_deleted_orphan import (
    RefusingOnceKube,
    assert_failed_once_and_retried,
    launched_and_refused,
)
from tests.unit.controller.manager.test_pool_wakeups import process
from tests.unit.fake_world import NS, dag_body, run_body, settle
from zonda.passes import try_tracking
from zonda.passes.decisions import AttemptPhase, ObservedAttempt
from zonda.resources.dagrun_models import DagRunStatus, TaskInstanceStatus
from zonda.resources.models import DagRunState
from zonda.resources.models import TaskInstanceState as S
from zonda.resources.names import attempt_name
from zonda.resources.wire import FINALIZER_TRY_TRACKING, LABEL_DAGRUN_UID


async def _task_pods(kube: FakeKube) -> list[dict[str, Any]]:
    return await kube.list_pods(NS, LABEL_DAGRUN_UID)


@pytest.mark.parametrize("restart", [False, True], ids=["watch-gap", "controller-restart"])
def test_a_try_whose_pod_was_deleted_unseen_before_any_status_recorded_it_is_failed_not_created_again(
    restart: bool,
) -> None:
    kube = RefusingOnceKube()
    executor = KubernetesExecutor(kube, PodDefaults())
    reconcilers = Reconcilers(kube, executor)

    async def scenario() -> dict[str, Any]:
        nonlocal executor, reconcilers
        pod = await launched_and_refused(kube, reconcilers)
        assert pod["metadata"]["finalizers"] == [FINALIZER_TRY_TRACKING]
        # evicted while no watch delivered it: `pod_deleted` is never called
        assert await kube.delete_pod(NS, pod["metadata"]["name"], grace_period_seconds=0)
        [held] = await _task_pods(kube)
        assert held["metadata"]["deletionTimestamp"], "positive control: the finalizer holds the pod"
        if restart:  # a new controller process: nothing in memory of the launch or the deletion
            executor = KubernetesExecutor(kube, PodDefaults())
            reconcilers = Reconcilers(kube, executor)
        await reconcilers.reconcile("run", NS, "etl-1")
        after_loss = dict(kube.objects[(DAGRUNS, NS, "etl-1")]["status"]["taskInstances"]["extract"])
        assert kube.creates.count(pod["metadata"]["name"]) == 1, f"created again: {kube.creates}"
        names = [p["metadata"]["name"] for p in await _task_pods(kube)]
        assert pod["metadata"]["name"] not in names, "released once the status recorded its end"
        await reconcilers.reconcile("run", NS, "etl-1")  # its retry
        await settle()
        return after_loss

    assert_failed_once_and_retried(kube, asyncio.run(scenario()))


def test_deleting_a_finished_runs_pods_is_not_held() -> None:
    """`delete_finished` (deleteWorkerPods) deletes the recorded tries of a finished run: the pod goes."""
    kube = FakeKube()
    executor = KubernetesExecutor(kube, PodDefaults())
    reconcilers = Reconcilers(kube, executor)

    async def scenario() -> None:
        await kube.create_custom(DAGS, NS, dag_body("etl"))
        run = await kube.create_custom(DAGRUNS, NS, run_body("etl-1", "etl"))
        await reconcilers.reconcile("run", NS, "etl-1")
        [pod] = await _task_pods(kube)
        assert pod["metadata"]["finalizers"] == [FINALIZER_TRY_TRACKING], "positive control: held if deleted"
        meta = pod["metadata"]
        assert await executor.delete_finished(run, meta["name"], uid=meta["uid"])
        assert await _task_pods(kube) == [], "deleteWorkerPods' deletion is not held"
        await settle()

    asyncio.run(scenario())


@pytest.mark.parametrize("how", ["run-deleted", "run-finished", "run-running"])
def test_a_held_pod_whose_run_no_pass_will_record_it_in_is_released_by_its_event(how: str) -> None:
    """The run deleted (its history limit, its namespace deleted: the garbage collector deletes its
    pods) or finished: the pod event releases it. A running run's held pod waits for its pass."""
    kube = FakeKube()
    executor = KubernetesExecutor(kube, PodDefaults())
    proc, _ = process(kube, executor)  # type: ignore[arg-type]

    async def scenario() -> list[str]:
        assert proc.services is not None
        await kube.create_custom(DAGS, NS, dag_body("etl"))
        await kube.create_custom(DAGRUNS, NS, run_body("etl-1", "etl"))
        await proc.services.reconcilers.reconcile("run", NS, "etl-1")
        [pod] = await _task_pods(kube)
        if how == "run-deleted":
            await kube.delete_custom(DAGRUNS, NS, "etl-1")
        elif how == "run-finished":
            stored = kube.objects[(DAGRUNS, NS, "etl-1")]
            stored["status"] = {**stored["status"], "state": "failed"}
        await kube.delete_pod(NS, pod["metadata"]["name"])  # the garbage collector's, a user's
        [held] = await _task_pods(kube)
        await proc.on_task_pod(
            type="MODIFIED", body=held, namespace=NS, event={"type": "MODIFIED", "object": held}
        )
        await settle()
        return [p["metadata"]["name"] for p in await _task_pods(kube)]

    left = asyncio.run(scenario())
    if how == "run-running":
        assert len(left) == 1, "positive control: a running run's held pod waits for its pass"
    else:
        assert left == [], f"released: {left}"


# --------------------------------------------------------------------------------- the pure rules


def _pod(name: str, *, deleting: bool = True, uid: str = "u1") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "uid": uid, "finalizers": ["other", FINALIZER_TRY_TRACKING]}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-05T06:00:00Z"
    return {"metadata": meta, "status": {"phase": "Running"}}


def _attempt(name: str, try_number: int, uid: str = "u1") -> ObservedAttempt:
    return ObservedAttempt("extract", try_number, name, AttemptPhase.FAILED, uid=uid)


def test_a_held_pod_goes_after_a_write_only_when_that_status_accounts_for_its_try() -> None:
    try1, try2 = attempt_name("etl-1", "extract", 1), attempt_name("etl-1", "extract", 2)
    ti = TaskInstanceStatus(state=S.UP_FOR_RETRY, try_number=1, pod_name=try1)
    written = DagRunStatus(state=DagRunState.RUNNING, task_instances={"extract": ti})
    seen = {try1: _attempt(try1, 1), try2: _attempt(try2, 2)}
    release = try_tracking.release_after_write
    assert release(_pod(try1), seen, written, "etl-1"), "recorded"
    assert not release(_pod(try2), seen, written, "etl-1"), "the next try, no status records: held"
    assert not release(_pod(try1, deleting=False), seen, written, "etl-1"), "not being deleted"
    assert not release(_pod(try1, uid="u2"), seen, written, "etl-1"), "another pod of that name"
    assert not release(_pod(try1), {}, written, "etl-1"), "not observed by the pass"
    moved_on = ti.model_copy(update={"try_number": 2, "pod_name": try2})
    later = DagRunStatus(state=DagRunState.RUNNING, task_instances={"extract": moved_on})
    assert release(_pod(try1), seen, later, "etl-1"), "an earlier try"
    finished = DagRunStatus(state=DagRunState.FAILED, task_instances={"extract": ti})
    assert release(_pod(try2), seen, finished, "etl-1"), "the run finished"


def test_what_a_held_pod_is_observed_as_and_how_it_is_released() -> None:
    running = ObservedAttempt("extract", 1, "p", AttemptPhase.RUNNING, uid="u1")
    gone = try_tracking.observe_held(_pod("p"), running)
    assert (gone.phase, gone.message) == (AttemptPhase.FAILED, try_tracking.DELETED_BEFORE_ITS_END)
    assert try_tracking.observe_held(_pod("p", deleting=False), running) == running
    before = datetime(2026, 12, 5, 5, 59, 59, tzinfo=UTC)  # the pod's deletion: 06:00:00
    ended = ObservedAttempt("extract", 1, "p", AttemptPhase.SUCCEEDED, finished_at=before, uid="u1")
    assert try_tracking.observe_held(_pod("p"), ended) == ended, "ended before its deletion: kept"
    late = replace(ended, finished_at=before + timedelta(seconds=2))  # ended in its grace period
    assert try_tracking.observe_held(_pod("p"), late).phase is AttemptPhase.FAILED
    assert try_tracking.removal_patch(_pod("p")) == [
        {"op": "test", "path": "/metadata/uid", "value": "u1"},
        {"op": "test", "path": "/metadata/finalizers/1", "value": FINALIZER_TRY_TRACKING},
        {"op": "remove", "path": "/metadata/finalizers/1"},
    ]
    assert try_tracking.removal_patch({"metadata": {"name": "p", "finalizers": ["other"]}}) is None
    run = {"metadata": {"uid": "r1"}, "status": {"state": "running"}}
    assert try_tracking.release_without_pass(None, "r1")
    assert try_tracking.release_without_pass({**run, "metadata": {"uid": "r2"}}, "r1")
    assert try_tracking.release_without_pass({**run, "status": {"state": "success"}}, "r1")
    deleting = {"uid": "r1", "deletionTimestamp": "2026-12-05T06:00:00Z"}
    assert try_tracking.release_without_pass({**run, "metadata": deleting}, "r1")
    assert not try_tracking.release_without_pass(run, "r1")


def test_a_pod_override_with_finalizers_adds_them_to_try_trackings() -> None:
    """A podOverride's `metadata.finalizers` are merged as a set (ObjectMeta's patchStrategy), never
    in place of ours: the strategic merge replaces every list without a merge key."""
    override = {"metadata": {"finalizers": ["example.com/keep", FINALIZER_TRY_TRACKING]}}
    task = snapshot.task("t", "BashOperator", {"bash_command": "true"}, pod_override=override)
    built = pods.build_task_pod(
        invocation=snapshot.invocation("t", "BashOperator", {"bash_command": "true"}),
        task=task,
        namespace=NS,
        name="p",
        owner=snapshot.OWNER,
        defaults=snapshot.DEFAULTS,
    )
    assert built["metadata"]["finalizers"] == [FINALIZER_TRY_TRACKING, "example.com/keep"]
