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
