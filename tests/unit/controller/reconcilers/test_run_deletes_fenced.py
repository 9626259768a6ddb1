"""A run's pass deletes a pod or Trigger only as it observed it: each delete carries the uid the pass saw
(`PassPlan.fenced`, `ObservedAttempt.uid`, `ObservedTrigger.uid`), so one of that name created again
since (by a newer leader, while this replica's pass was stale) is refused with 409 and stays.

Real: the reconcilers, the Kubernetes executor, the pure core, `FakeKube`'s preconditions (which
`tests/kube_contract.py` checks against the apiserver). The recreation is `FakeKube`'s object given a
new uid just before the delete arrives: what a delete and create between the pass's read and its
delete leave. Each test first shows the delete going through when nothing was created again.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from controller.executors.kubernetes import KubernetesExecutor
from controller.executors.pods import PodDefaults
from controller.kube import DAGRUNS, DAGS, TRIGGERS
from controller.reconcilers.reconcilers import Reconcilers
from tests.unit.controller.reconcilers.test_an_orphaned_try import (
    CrashOnFirstRunWrite,
    crash_after_the_first_launch,
    deleted,
    pods,
)
from tests.unit.fake_world import NS, dag_body, run_body, settle
from zonda.resources.names import trigger_name
from zonda.resources.wire import LABEL_DAGRUN_UID


class RecreatedBeforeDelete(CrashOnFirstRunWrite):
    """Objects named in `recreate` are made again (a new uid) just before a delete of them arrives."""

    def __init__(self) -> None:
        super().__init__()
        self.recreate: set[str] = set()

    def _again(self, kind: str, name: str) -> None:
        if name in self.recreate:
            self.objects[(kind, NS, name)]["metadata"]["uid"] = f"again-{name}"

    async def delete_pod(self, namespace: str, name: str, **options: Any) -> bool:
        self._again("pods", name)
        return await super().delete_pod(namespace, name, **options)

    async def delete_custom(self, plural: str, namespace: str, name: str, **options: Any) -> bool:
        self._again(plural, name)
        return await super().delete_custom(plural, namespace, name, **options)


def reconcilers(kube: RecreatedBeforeDelete) -> Reconcilers:
    return Reconcilers(kube, KubernetesExecutor(kube, PodDefaults()))


@pytest.mark.parametrize("again", [False, True], ids=["control", "created-again"])
def test_a_stray_pod_is_killed_only_as_the_pass_observed_it(again: bool) -> None:
    """The orphaned pod of a task the DAG lost is a stray the pass kills: at the uid it observed."""
    kube = RecreatedBeforeDelete()

    async def scenario() -> str:
        orphan = await crash_after_the_first_launch(kube)
        dag = kube.objects[(DAGS, NS, "etl")]
        dag["spec"]["tasks"] = [{**dag["spec"]["tasks"][1], "dependsOn": []}]
        if again:
            kube.recreate.add(orphan)
        await reconcilers(kube).reconcile("run", NS, "etl-1")
        await settle()
        return orphan

    orphan = asyncio.run(scenario())
    assert kube.writes["delete pods"] == 1, "positive control: the pass decided to kill the stray"
    if again:
        assert pods(kube)[orphan]["metadata"]["uid"] == f"again-{orphan}", "the pod made again stays"
    else:
        assert deleted(kube, orphan)


def stray_trigger(run_uid: str) -> dict[str, Any]:
    """A Trigger of the run for `extract`, which is queued, not deferred: a stray to delete."""
    return {
        "apiVersion": "zonda.dev/v1alpha1",
        "kind": "Trigger",
        "metadata": {"name": trigger_name("etl-1", "extract", 1, 1), "labels": {LABEL_DAGRUN_UID: run_uid}},
        "spec": {
            "classpath": "x.Trigger",
            "kwargs": {},
            "dagRun": "etl-1",
            "taskId": "extract",
            "tryNumber": 1,
        },
    }


@pytest.mark.parametrize("again", [False, True], ids=["control", "created-again"])
def test_a_stray_trigger_is_deleted_only_as_the_pass_observed_it(again: bool) -> None:
    kube = RecreatedBeforeDelete()
    kube.crashed = True  # no crash: every write goes through
    name = trigger_name("etl-1", "extract", 1, 1)

    async def scenario() -> None:
        await kube.create_custom(DAGS, NS, dag_body("etl"))
        run = await kube.create_custom(DAGRUNS, NS, run_body("etl-1", "etl"))
        zonda = reconcilers(kube)
        await zonda.reconcile("run", NS, "etl-1")  # extract launched: queued
        await kube.create_custom(TRIGGERS, NS, stray_trigger(run["metadata"]["uid"]))
        if again:
            kube.recreate.add(name)
        await zonda.reconcile("run", NS, "etl-1")
        await settle()

    asyncio.run(scenario())
    assert kube.writes["delete triggers"] == 1, "positive control: the pass decided to delete the stray"
    left = {n: body for (kind, _, n), body in kube.objects.items() if kind == TRIGGERS}
    if again:
        assert left[name]["metadata"]["uid"] == f"again-{name}", "the Trigger made again stays"
    else:
        assert not left
