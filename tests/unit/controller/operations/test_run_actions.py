"""A user's clear/mark carried out against `FakeKube`: read, act, write back with the resourceVersion.

The fake refuses a stale write with Conflict as the apiserver does, so the retry is real: a
controller write between the user's read and write is never overwritten, the action is applied again
to the fresh status.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from controller.kube import DAGRUNS
from controller.kube.fake import FakeKube
from controller.operations.run_actions import act_on_run
from zonda.actions import clear_and_mark
from zonda.resources.dagrun_models import DagRunStatus, TaskInstanceStatus
from zonda.resources.models import DagRunState, DagSpec, TaskInstanceState, TaskSpec
from zonda.specs.dags import ResolvedDag

S = TaskInstanceState
NS = "ns"


def finished_run() -> dict[str, Any]:
    spec = DagSpec(
        tasks=[
            TaskSpec(id="a", operator="EmptyOperator"),
            TaskSpec(id="b", operator="EmptyOperator", depends_on=["a"]),
        ]
    )
    status = DagRunStatus(
        state=DagRunState.FAILED,
        dag_spec=spec.to_wire(),
        task_instances={
            "a": TaskInstanceStatus(state=S.FAILED, try_number=1),
            "b": TaskInstanceStatus(state=S.UPSTREAM_FAILED),
        },
    )
    return {
        "apiVersion": "zonda.dev/v1alpha1",
        "kind": "DagRun",
        "metadata": {"name": "r"},
        "spec": {"dagName": "d"},
        "status": status.to_wire(),
    }


NOW = datetime(2026, 1, 1, tzinfo=UTC)


def clear_all(dag: ResolvedDag, status: DagRunStatus) -> clear_and_mark.ActionResult:
    return clear_and_mark.clear(dag, status, now=NOW)


def test_a_conflicting_write_is_not_overwritten_the_action_is_applied_again() -> None:
    kube = FakeKube()

    async def scenario() -> Any:
        run = finished_run()
        status = run.pop("status")  # create ignores a status, as the apiserver's status subresource does
        await kube.create_custom(DAGRUNS, NS, run)
        await kube.patch_custom_status(DAGRUNS, NS, "r", status)
        original = kube.get_custom
        reads = 0

        async def get_then_controller_writes(plural: str, namespace: str, name: str) -> Any:
            nonlocal reads
            body = await original(plural, namespace, name)
            reads += 1
            if reads == 1:  # the controller writes between the user's first read and write
                await kube.patch_custom_status(
                    DAGRUNS, namespace, name, {"runId": "written by the controller"}
                )
            return body

        kube.get_custom = get_then_controller_writes  # type: ignore[method-assign]
        result = await act_on_run(kube, NS, "r", clear_all)
        return result, reads

    (result, before), reads = asyncio.run(scenario())
    assert reads == 2
    stored = kube.objects[(DAGRUNS, NS, "r")]["status"]
    assert stored["runId"] == "written by the controller"  # kept: the action was applied to it
    assert stored["queuedAt"] == "2026-01-01T00:00:00Z"
    assert {t: ti["state"] for t, ti in stored["taskInstances"].items()} == {"a": "none", "b": "none"}
    assert stored["state"] == "queued"
    assert result.changed == ("a", "b") and before["a"].state is S.FAILED
    assert [e.reason for e in kube.events] == ["TaskCleared", "TaskCleared"]
    assert kube.writes["replace-status dagruns"] == 2  # the refused write, and the one that landed


def test_a_clear_of_a_run_kept_in_shards_rewrites_only_the_shard_it_changed() -> None:
    """A big run (its instances in DagRunShards): the user's clear reads it whole, and the write
    replaces the one shard holding the cleared instance, then the DagRun; the rest stay as they were."""
    from zonda.resources import run_shards

    kube = FakeKube()
    kube.run_shards.inline_limit = 2
    spec = DagSpec(tasks=[TaskSpec(id=f"t{i}", operator="EmptyOperator") for i in range(600)])
    status = DagRunStatus(
        state=DagRunState.SUCCESS,
        dag_spec=spec.to_wire(),
        task_instances={f"t{i}": TaskInstanceStatus(state=S.SUCCESS, try_number=1) for i in range(600)},
    )

    def versions() -> dict[str, str]:
        return {
            s["metadata"]["name"]: s["metadata"]["resourceVersion"]
            for s in kube._list(run_shards.PLURAL, NS, None)
        }

    async def scenario() -> dict[str, Any]:
        created = await kube.create_custom(DAGRUNS, NS, {**finished_run(), "status": None})
        await kube.replace_custom_status(DAGRUNS, NS, {**created, "status": status.to_wire()})
        before = versions()
        assert len(before) == 3  # 600 instances, 256 a shard

        def clear_one(dag: ResolvedDag, s: DagRunStatus) -> clear_and_mark.ActionResult:
            return clear_and_mark.clear(dag, s, task_ids=["t300"], now=NOW)

        await act_on_run(kube, NS, "r", clear_one)
        after = versions()
        stored = run_shards.split(status.to_wire(), "r", inline_limit=2).shards
        (holder,) = [name for name, held in stored.items() if "t300" in held]
        assert [name for name in after if after[name] != before[name]] == [holder]
        run = await kube.get_custom(DAGRUNS, NS, "r")
        assert run is not None
        return run

    run = asyncio.run(scenario())
    tis = run["status"]["taskInstances"]
    assert tis["t300"]["state"] != "success" and tis["t299"]["state"] == "success" and len(tis) == 600
    assert "taskInstances" not in kube.objects[(DAGRUNS, NS, "r")]["status"]  # stored as a summary
