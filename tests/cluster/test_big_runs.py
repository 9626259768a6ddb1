"""A run with more task instances than one DagRun object can hold, on the real apiserver + etcd.

A DagRun's status took about 404 bytes per instance, and etcd refuses an object over 1.5 MiB: about
3,800 instances was the ceiling, and the status budget failed expansions well before it. Past
`--inline-task-instances` the instances are kept 256 to a `DagRunShard` the run owns
(`zonda.resources.run_shards`); every reader gets the run whole.

1. 5,000 mapped instances: the run reconciler of this process against the real apiserver, only the
   executor fake (it records launches; the test finishes them), a controller "restart" midway (new
   client and reconcilers: nothing of the old ones' memory) — the run succeeds, every instance's
   state is read back from the apiserver (whole, through the client, and the shards themselves), and
   `kubectl get dagrun` shows its progress and counts; deleting the run deletes its shards.
2. A real controller process (local executor: real task-runner processes) with a low inline limit,
   killed with SIGKILL midway and started again: the split run finishes, each instance ran once.
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

from controller.devtools.devcluster import Cluster
from controller.kube import DAGRUNS, DAGS, POOLS
from controller.kube.client import Kube
from controller.reconcilers.reconcilers import Reconcilers
from tests.cluster.test_mapping import DAG_FOLDER, api_writes, local_controller
from tests.cluster.test_status_budget import storage_ready
from tests.cluster.zonda_processes import get, trigger, wait_for, wait_run_finished, zonda
from tests.unit.fake_world import FakeExecutor
from zonda.passes.decisions import AttemptPhase
from zonda.passes.limits import PassLimits
from zonda.resources import run_shards

ITEMS = 5000


def wide_dag(items: int) -> dict[str, Any]:
    make = {"id": "make", "operator": "BashOperator", "args": {"bash_command": "true"}}
    wide = {
        "id": "wide",
        "operator": "BashOperator",
        "args": {"bash_command": "true"},
        "dependsOn": ["make"],
        "expand": {"kwargs": {"env": [{"N": str(i)} for i in range(items)]}},
    }
    done = {"id": "done", "operator": "BashOperator", "args": {"bash_command": "true"}, "dependsOn": ["wide"]}
    return {"apiVersion": "zonda.dev/v1alpha1", "kind": "DAG", "metadata": {"name": "big"},
            "spec": {"maxActiveTasks": 10_000, "tasks": [make, wide, done]}}  # fmt: skip


def test_a_run_of_5000_mapped_instances_succeeds_in_shards_across_a_restart(
    cluster: Cluster, namespace: str
) -> None:
    limits = PassLimits(max_map_length=10_000)
    executor = FakeExecutor()

    async def passes(kube: Kube, reconcilers: Reconcilers, most: int) -> int:
        """Reconcile, then finish every try launched, until the run finishes (or `most` passes)."""
        for done in range(1, most + 1):
            await reconcilers.reconcile("run", namespace, "big-1")
            for name in executor.launched:
                if (
                    executor.attempts.get(name) is not None
                    and executor.attempts[name].phase is AttemptPhase.PENDING
                ):
                    executor.finish(name)
            run = await kube.get_custom(DAGRUNS, namespace, "big-1")
            assert run is not None
            if run["status"].get("state") in ("success", "failed"):
                return done
        return most

    async def scenario() -> tuple[int, float]:
        started = time.monotonic()
        async with await Kube.connect(str(cluster.kubeconfig)) as kube:
            await storage_ready(kube, namespace)
            await kube.list_custom(run_shards.PLURAL, namespace)
            await kube.create_custom(DAGS, namespace, wide_dag(ITEMS))
            # Airflow's default_pool has 128 slots: 40 passes of 5,000 instances; with room for all, 5
            await kube.create_custom(
                POOLS,
                namespace,
                {"apiVersion": "zonda.dev/v1alpha1", "kind": "Pool", "metadata": {"name": "default-pool"},
                 "spec": {"slots": 10_000}},
            )  # fmt: skip
            await kube.create_custom(
                DAGRUNS,
                namespace,
                {"apiVersion": "zonda.dev/v1alpha1", "kind": "DagRun", "metadata": {"name": "big-1"},
                 "spec": {"dagName": "big", "runType": "manual"}},
            )  # fmt: skip
            first = await passes(kube, Reconcilers(kube, executor, limits=limits), 3)  # expanded, launched
        # a new controller: its client and reconcilers know nothing; the shards are read again
        async with await Kube.connect(str(cluster.kubeconfig)) as kube:
            reconcilers = Reconcilers(kube, executor, limits=limits)
            total = first + await passes(kube, reconcilers, 300)
            assert await reconcilers.writer.flush_events(within=30) == 0
        return total, time.monotonic() - started

    before = api_writes(cluster)
    total_passes, wall = asyncio.run(scenario())
    after = api_writes(cluster)

    async def read_back() -> dict[str, Any]:
        async with await Kube.connect(str(cluster.kubeconfig)) as kube:
            run = await kube.get_custom(DAGRUNS, namespace, "big-1")
            assert run is not None
            return run

    whole = asyncio.run(read_back())
    states = {key: ti["state"] for key, ti in whole["status"]["taskInstances"].items()}
    assert whole["status"]["state"] == "success", collections.Counter(states.values())
    assert states == {"make": "success", "done": "success", **{f"wide[{i}]": "success" for i in range(ITEMS)}}
    assert all(ti["tryNumber"] == 1 for ti in whole["status"]["taskInstances"].values())
    # what the apiserver stores: a summary, and the instances in shards the run owns
    stored = get(cluster, namespace, "dagrun", "big-1")
    assert "taskInstances" not in stored["status"]
    assert stored["status"]["progress"] == f"{ITEMS + 2}/{ITEMS + 2}"
    assert stored["status"]["taskCounts"] == {"success": ITEMS + 2}
    shards = get(cluster, namespace, "dagrunshards")["items"]
    expected = -(-(ITEMS + 2) // run_shards.SHARD_INSTANCES)
    assert sorted(s["metadata"]["name"] for s in shards) == sorted(
        run_shards.shard_name("big-1", k) for k in range(expected)
    )
    uid = stored["metadata"]["uid"]
    assert all(s["metadata"]["ownerReferences"][0]["uid"] == uid for s in shards)
    in_shards = {key: ti["state"] for s in shards for key, ti in s["status"]["taskInstances"].items()}
    assert in_shards == states  # every instance in exactly the shards, read from the apiserver
    table = cluster.kubectl("get", "dagrun", "big-1", "-n", namespace).stdout
    assert "PROGRESS" in table and f"{ITEMS + 2}/{ITEMS + 2}" in table, table
    listed = zonda(cluster, "tasks", "states", "big-1", "-n", namespace).stdout
    assert "wide[4999]" in listed and listed.index("wide[2]") < listed.index("wide[10]")
    sizes = [len(json.dumps(o, separators=(",", ":"))) for o in [stored, *shards]]
    writes = {kind: after.get(kind, 0) - before.get(kind, 0) for kind in ("dagruns", "dagrunshards")}
    load = os.getloadavg()
    print(
        f"{ITEMS} mapped instances in {len(shards)} shards, fake executor, in-process reconciler: "
        f"{total_passes} passes, wall {wall:.1f} s; largest object {max(sizes)} bytes (DagRun {sizes[0]}); "
        f"API writes {writes} = {sum(writes.values()) / ITEMS:.3f} per instance; "
        f"load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs"
    )
    assert max(sizes) < 1_572_864 // 4
    # the run owns its shards: deleting it deletes them (the garbage collector of the controller-manager)
    cluster.kubectl("delete", "dagrun", "big-1", "-n", namespace, "--wait=false")
    wait_for(
        lambda: not get(cluster, namespace, "dagrunshards")["items"],
        "the shards collected with the run",
        timeout=120,
    )


def test_a_split_run_survives_a_controller_kill_with_the_local_executor(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    """`--inline-task-instances 40`: 120 instances in shards of 256 (one DagRun summary, one shard);
    the controller is killed once the first instances are done, started again, and the run finishes
    from what the apiserver holds."""
    zonda(cluster, "dags", "apply", str(DAG_FOLDER), "-n", namespace)
    process = local_controller(
        cluster, namespace, tmp_path, "--parallelism", "16", "--inline-task-instances", "40"
    ).start()
    try:
        run = trigger(cluster, namespace, "mapped-wide", {"count": 120})

        def split_and_some_done() -> bool:
            status = get(cluster, namespace, "dagrun", run).get("status") or {}
            return (
                bool(status.get("taskInstanceShards"))
                and status.get("taskCounts", {}).get("success", 0) >= 10
            )

        wait_for(split_and_some_done, "the run split into shards and ten instances done", timeout=240)
        process.stop(signal.SIGKILL)
        process.start()
        wait_run_finished(cluster, namespace, run, timeout=400)
    finally:
        process.stop()
        print(f"--- controller log\n{process.log()[-3000:]}")
    stored = get(cluster, namespace, "dagrun", run)
    assert stored["status"]["state"] == "success" and stored["status"]["progress"] == "122/122"
    rows = [
        line.split() for line in zonda(cluster, "tasks", "states", run, "-n", namespace).stdout.splitlines()
    ]
    instances = {
        row[0]: (row[1], row[2]) for row in rows if row and row[0].startswith(("square[", "make_", "count"))
    }
    assert instances == {
        "make_numbers": ("success", "1"),
        "count": ("success", "1"),
        **{f"square[{i}]": ("success", "1") for i in range(120)},
    }  # read whole from the summary and its shard, every instance's one try
    assert get(cluster, namespace, "dagrunshards")["items"], "no DagRunShard"
