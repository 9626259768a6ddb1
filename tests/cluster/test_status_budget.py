"""A run's status never outgrows the apiserver's object limit unnoticed, on the real apiserver + etcd.

1. The budget: a real controller (local executor) with a small `--status-budget-bytes` fails a mapped
   task whose expansion would pass it, with the message, and the run finishes (fast: no instance runs).
2. The write guard: the run reconciler, in this process against the real apiserver, writes a status
   larger than etcd takes (its default `--max-request-bytes`, 1.5 MiB). etcd refuses it
   (``500 etcdserver: request is too large``); the run gets `StatusWritten=False` and one Event, and
   keeps the status last written. Only the executor is fake there (it records launches): the size
   comes from the run's own task instances, 4 mapped tasks of 2,048 (about 200 bytes each while scheduled),
   kept in the DagRun's own status (`--inline-task-instances` above that: by default they go to shards).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from controller.devtools.devcluster import Cluster
from controller.kube import DAGRUNS, DAGS, TRIGGERS
from controller.kube.client import Kube
from controller.kube.errors import KubeError
from controller.reconcilers.pools import POOLS
from controller.reconcilers.reconcilers import Reconcilers
from tests.cluster.test_mapping import DAG_FOLDER, local_controller
from tests.cluster.zonda_processes import get, ti_states, trigger, wait_run_finished, zonda
from tests.unit.fake_world import FakeExecutor
from zonda.passes.limits import PassLimits


def test_a_mapped_task_past_the_status_budget_fails_with_the_sizes_and_the_run_finishes(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    zonda(cluster, "dags", "apply", str(DAG_FOLDER), "-n", namespace)
    process = local_controller(cluster, namespace, tmp_path, "--status-budget-bytes", "30000").start()
    try:
        run = trigger(cluster, namespace, "mapped-wide", {"count": 200})
        body = wait_run_finished(cluster, namespace, run, timeout=300)
    finally:
        process.stop()
        print(f"--- controller log\n{process.log()[-3000:]}")
    assert ti_states(body) == {"make_numbers": "success", "square": "failed", "count": "upstream_failed"}
    assert body["status"]["state"] == "failed"
    reason = body["status"]["taskInstances"]["square"]["reason"]
    assert "200 instances" in reason and "status budget of 30,000 bytes" in reason, reason
    assert "--status-budget-bytes" in reason
    messages = get(cluster, namespace, "events")["items"]
    assert any(e["reason"] == "TaskFailed" and "200 instances" in e["message"] for e in messages)


def wide_dag(tasks: int, items: int) -> dict[str, Any]:
    mapped = [
        {
            "id": f"wide{n}",
            "operator": "BashOperator",
            "args": {"bash_command": "true"},
            "dependsOn": ["make"],
            "expand": {"kwargs": {"env": list(range(items))}},
        }
        for n in range(tasks)
    ]
    make = {"id": "make", "operator": "BashOperator", "args": {"bash_command": "true"}}
    return {"apiVersion": "zonda.dev/v1alpha1", "kind": "DAG", "metadata": {"name": "too-wide"},
            "spec": {"tasks": [make, *mapped]}}  # fmt: skip


async def storage_ready(kube: Kube, namespace: str) -> None:
    """Wait out the 429 "storage is (re)initializing" of CRDs installed moments ago (the controller's
    work queue would retry; this test calls the reconciler once per step)."""
    for _ in range(120):
        try:
            for plural in (DAGS, DAGRUNS, TRIGGERS, POOLS):
                await kube.list_custom(plural, namespace)
            return
        except KubeError as error:
            if error.status != 429:
                raise
            await asyncio.sleep(0.5)
    raise AssertionError("the apiserver kept answering 429 to listing Zonda's resources")


def test_a_status_etcd_refuses_sets_a_condition_and_one_event_and_keeps_the_last_status(
    cluster: Cluster, namespace: str
) -> None:
    async def scenario() -> tuple[list[Any], dict[str, Any], str, list[Any]]:
        async with await Kube.connect(str(cluster.kubeconfig)) as kube:
            executor = FakeExecutor()
            # No budget to speak of, a raised max_map_length, and every instance kept in the DagRun's
            # own status (no DagRunShards: test_big_runs.py has those): only etcd stops this status.
            kube.run_shards.inline_limit = 10**6
            reconcilers = Reconcilers(
                kube,
                executor,
                limits=PassLimits(
                    max_map_length=4096, status_budget_bytes=10**9, inline_task_instances=10**6
                ),
            )
            await storage_ready(kube, namespace)
            await kube.create_custom(DAGS, namespace, wide_dag(4, 2048))
            await kube.create_custom(
                DAGRUNS,
                namespace,
                {"apiVersion": "zonda.dev/v1alpha1", "kind": "DagRun", "metadata": {"name": "too-wide-1"},
                 "spec": {"dagName": "too-wide", "runType": "manual"}},
            )  # fmt: skip
            await reconcilers.reconcile("run", namespace, "too-wide-1")  # `make` launched, a small status
            before = await kube.get_custom(DAGRUNS, namespace, "too-wide-1")
            assert before is not None
            executor.finish(executor.launched[0])
            wakes = [await reconcilers.reconcile("run", namespace, "too-wide-1") for _ in range(2)]
            # The Events are posted in the background: wait for those posts, as a stopping controller does.
            assert await reconcilers.writer.flush_events(within=30) == 0, "Event posts still unfinished"
            after = await kube.get_custom(DAGRUNS, namespace, "too-wide-1")
            assert after is not None
            events = await kube.list_events(namespace, "DagRun", "too-wide-1")
            return wakes, after, json.dumps(before["status"]["taskInstances"]), events

    wakes, after, tis_before, events = asyncio.run(scenario())
    assert all(wake is not None for wake in wakes)  # looked at again later: not a failing reconcile
    status = after["status"]
    assert json.dumps(status["taskInstances"]) == tis_before  # the status last written, kept whole
    written = {c["type"]: c for c in status["conditions"]}["StatusWritten"]
    assert written["status"] == "False" and written["reason"] == "StatusTooLarge"
    assert "etcdserver: request is too large" in written["message"], written["message"]
    refused = [e for e in events if e["reason"] == "StatusTooLarge"]
    assert len(refused) == 1 and refused[0]["type"] == "Warning", [e["reason"] for e in events]
    print(f"refused: {written['message']}")
