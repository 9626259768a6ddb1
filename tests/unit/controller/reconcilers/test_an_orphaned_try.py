"""A try's pod created, then the controller dies before the status write that records it: the pod is
orphaned, alive under its deterministic name with no status entry pointing at it.

Real: the reconcilers, the Kubernetes executor and its manifests, the pure core. Fake: the API
(`FakeKube`, refusing the first run write as a crash leaves it: unwritten). Pod creations and deletions
are the fake apiserver's own counts of create and delete calls. The restarted controller adopts the
pod when its pass launches that try (no second create call, an `AttemptAdopted` Event), and deletes it
with an `OrphanedAttemptStopped` Event naming why when it does not (the DAG changed meanwhile).
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest

from controller.executors.kubernetes import AttemptNameTaken, KubernetesExecutor
from controller.executors.pods import PodDefaults
from controller.kube import DAGRUNS, DAGS
from controller.kube.cache import LabelledObjects
from controller.kube.fake import FakeKube
from controller.reconcilers.reconcilers import Reconcilers
from tests.unit.fake_world import NS, dag_body, run_body, settle
from zonda.resources.invocations import TaskInvocation
from zonda.resources.names import attempt_name
from zonda.resources.run_types import RunType
from zonda.resources.wire import LABEL_DAGRUN_UID
from zonda.specs.dags import parse_dag_spec, resolve_dag


class Crash(Exception):
    """The controller died here."""


class CrashOnFirstRunWrite(FakeKube):
    crashed = False

    async def replace_custom_status(
        self, plural: str, namespace: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        if plural == DAGRUNS and not self.crashed:
            self.crashed = True
            raise Crash
        return await super().replace_custom_status(plural, namespace, body)


def pods(kube: FakeKube) -> dict[str, dict[str, Any]]:
    return {name: body for (kind, _, name), body in kube.objects.items() if kind == "pods"}


def deleted(kube: FakeKube, name: str) -> bool:
    """Gone, or deleted and held by its finalizer until a status accounts for its try (a stray
    orphan's: `zonda.passes.try_tracking`)."""
    pod = pods(kube).get(name)
    return pod is None or bool(pod["metadata"].get("deletionTimestamp"))


def succeed(kube: FakeKube, name: str) -> None:
    kube.objects[("pods", NS, name)]["status"] = {
        "phase": "Succeeded",
        "containerStatuses": [{"name": "base", "state": {"terminated": {"exitCode": 0}}}],
    }


async def crash_after_the_first_launch(kube: CrashOnFirstRunWrite) -> str:
    """The first controller's pass creates extract's pod and dies before its status write."""
    await kube.create_custom(DAGS, NS, dag_body("etl"))
    await kube.create_custom(DAGRUNS, NS, run_body("etl-1", "etl"))
    with pytest.raises(Crash):
        await Reconcilers(kube, KubernetesExecutor(kube, PodDefaults())).reconcile("run", NS, "etl-1")
    [orphan] = pods(kube)
    assert orphan == attempt_name("etl-1", "extract", 1)
    assert kube.writes["create pods"] == 1, "positive control: the counted create happened"
    assert "status" not in kube.objects[(DAGRUNS, NS, "etl-1")], "no status points at the pod"
    return orphan


def test_the_restarted_controller_adopts_the_orphaned_pod_and_launches_the_try_once() -> None:
    kube = CrashOnFirstRunWrite()

    async def scenario() -> None:
        orphan = await crash_after_the_first_launch(kube)
        restarted = Reconcilers(kube, KubernetesExecutor(kube, PodDefaults()))  # nothing in memory
        await restarted.reconcile("run", NS, "etl-1")
        assert kube.writes["create pods"] == 1, "adopted: not created again"
        status = kube.objects[(DAGRUNS, NS, "etl-1")]["status"]
        extract = status["taskInstances"]["extract"]
        assert (extract["state"], extract["tryNumber"], extract["podName"]) == ("queued", 1, orphan)
        succeed(kube, orphan)
        await restarted.reconcile("run", NS, "etl-1")
        [load] = [name for name in pods(kube) if name != orphan]
        succeed(kube, load)
        await restarted.reconcile("run", NS, "etl-1")
        await settle()

    asyncio.run(scenario())
    status = kube.objects[(DAGRUNS, NS, "etl-1")]["status"]
    assert status["state"] == "success"
    assert {t: ti["tryNumber"] for t, ti in status["taskInstances"].items()} == {"extract": 1, "load": 1}
    assert kube.writes["create pods"] == 2 and "delete pods" not in kube.writes
    [adopted] = [e for e in kube.events if e.reason == "AttemptAdopted"]
    assert attempt_name("etl-1", "extract", 1) in adopted.message
    assert not [e for e in kube.events if "Stopped" in e.reason]


def test_an_orphaned_pod_the_restarted_pass_does_not_launch_is_deleted_with_an_event_saying_why() -> None:
    kube = CrashOnFirstRunWrite()

    async def scenario() -> None:
        orphan = await crash_after_the_first_launch(kube)
        # while the controller is down the DAG loses `extract`: the run, not started, snapshots that
        dag = kube.objects[(DAGS, NS, "etl")]
        dag["spec"]["tasks"] = [{**dag["spec"]["tasks"][1], "dependsOn": []}]
        restarted = Reconcilers(kube, KubernetesExecutor(kube, PodDefaults()))
        await restarted.reconcile("run", NS, "etl-1")
        await settle()
        assert deleted(kube, orphan)
        [event] = [e for e in kube.events if e.reason == "OrphanedAttemptStopped"]
        assert event.warning and orphan in event.message
        assert "never recorded it" in event.message and "no task instance extract" in event.message

    asyncio.run(scenario())
    assert kube.writes["delete pods"] == 1
    live = [name for name in pods(kube) if not deleted(kube, name)]
    assert live == [attempt_name("etl-1", "load", 1)]


RUN = {"kind": "DagRun", "metadata": {"name": "etl-1", "namespace": NS, "uid": "u-1"}}


def pod_named(name: str, uid: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {LABEL_DAGRUN_UID: uid}}, "spec": {}}


async def test_a_create_that_meets_this_runs_pod_adopts_it_and_keeps_it_for_the_next_pass() -> None:
    """A 409 on create: the pod is this try's (seen late), so the launch is done, never a second try."""
    kube = FakeKube()
    name = attempt_name("etl-1", "extract", 1)
    await kube.create_pod(NS, pod_named(name, "u-1"))
    executor = KubernetesExecutor(kube, PodDefaults())
    executor.pods = LabelledObjects(LABEL_DAGRUN_UID)
    dag = resolve_dag("etl", parse_dag_spec(dag_body("etl")["spec"]))
    await executor.launch(RUN, task=dag.tasks["extract"], invocation=_invocation(), attempt_name=name)
    assert list(pods(kube)) == [name]
    assert list(await executor.observe(RUN)) == [name], "kept for the next pass to observe"


async def test_a_create_that_meets_another_runs_pod_of_that_name_is_an_error_naming_both() -> None:
    """A run deleted and made again under its name: the old run's pod is not this try."""
    kube = FakeKube()
    name = attempt_name("etl-1", "extract", 1)
    await kube.create_pod(NS, pod_named(name, "old-uid"))
    executor = KubernetesExecutor(kube, PodDefaults())
    dag = resolve_dag("etl", parse_dag_spec(dag_body("etl")["spec"]))
    with pytest.raises(AttemptNameTaken, match=r"old-uid, not u-1"):
        await executor.launch(RUN, task=dag.tasks["extract"], invocation=_invocation(), attempt_name=name)


def _invocation() -> TaskInvocation:
    moment = datetime(2026, 1, 1, tzinfo=UTC)
    return TaskInvocation(
        dag_name="etl", run_name="etl-1", run_type=RunType.MANUAL, task_id="extract", try_number=1,
        operator="BashOperator", logical_date=moment, data_interval_start=moment, data_interval_end=moment,
    )  # fmt: skip
