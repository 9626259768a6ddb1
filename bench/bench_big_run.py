"""Benchmark: one run of 10,000 mapped task instances, its instances in DagRunShards.

    python bench/bench_big_run.py [--items 10000] [--slots 128,10000] [--existing]

A local control plane (etcd, kube-apiserver; `--existing`: $KUBECONFIG) and the run reconciler of
this process (`controller.reconcilers.Reconcilers`, the controller's own, through `client.Kube`);
only the executor is fake: it records each launch and the bench finishes every try launched after
each pass, so what is measured is the controller's side of a run, not task processes. For each
`--slots` (the default-pool's slots: 128 is Airflow's default, so the instances run in waves of
128 as a real run's would; 10,000 lets every instance launch at once) it prints: passes, wall,
the reconciler's CPU (this process's CPU time: the fake executor's share is a dict update per
try), API writes per instance (the apiserver's own `apiserver_request_total`, by resource), bytes
written per pass (the JSON bodies of every create and status replace), and the largest object the
run keeps (its DagRun, its largest shard). The machine's load is printed before and after.
Asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from controller.devtools.devcluster import Cluster, connect_cluster
from controller.kube import DAGRUNS, DAGS, POOLS
from controller.kube.client import Kube
from controller.reconcilers.reconcilers import Reconcilers
from tests.cluster.test_mapping import api_writes
from tests.unit.fake_world import FakeExecutor
from zonda.passes.decisions import AttemptPhase
from zonda.passes.limits import PassLimits
from zonda.resources import run_shards


def wide_dag(name: str, items: int) -> dict[str, Any]:
    make = {"id": "make", "operator": "BashOperator", "args": {"bash_command": "true"}}
    wide = {
        "id": "wide",
        "operator": "BashOperator",
        "args": {"bash_command": "true"},
        "dependsOn": ["make"],
        "expand": {"kwargs": {"env": [{"N": str(i)} for i in range(items)]}},
    }
    done = {"id": "done", "operator": "BashOperator", "args": {"bash_command": "true"}, "dependsOn": ["wide"]}
    return {"apiVersion": "zonda.dev/v1alpha1", "kind": "DAG", "metadata": {"name": name},
            "spec": {"maxActiveTasks": 100_000, "tasks": [make, wide, done]}}  # fmt: skip


def counting(kube: Kube, written: list[int]) -> None:
    """Every create and status replace the client sends: its body's JSON bytes."""
    custom = kube.custom
    for method in ("create_namespaced_custom_object", "replace_namespaced_custom_object_status"):
        original: Callable[..., Any] = getattr(custom, method)

        def wrapped(*args: Any, _original: Callable[..., Any] = original, **kwargs: Any) -> Any:
            written.append(len(json.dumps(args[-1], separators=(",", ":"))))
            return _original(*args, **kwargs)

        setattr(custom, method, wrapped)


async def one_run(cluster: Cluster, namespace: str, items: int, slots: int) -> dict[str, Any]:
    name = f"big-{slots}"
    executor = FakeExecutor()
    written: list[int] = []
    async with await Kube.connect(str(cluster.kubeconfig)) as kube:
        counting(kube, written)
        await kube.create_custom(DAGS, namespace, wide_dag(name, items))
        await kube.create_custom(
            POOLS,
            namespace,
            {"apiVersion": "zonda.dev/v1alpha1", "kind": "Pool", "metadata": {"name": "default-pool"},
             "spec": {"slots": slots}},
        )  # fmt: skip
        await kube.create_custom(
            DAGRUNS,
            namespace,
            {"apiVersion": "zonda.dev/v1alpha1", "kind": "DagRun", "metadata": {"name": f"{name}-1"},
             "spec": {"dagName": name, "runType": "manual"}},
        )  # fmt: skip
        reconcilers = Reconcilers(kube, executor, limits=PassLimits(max_map_length=items))
        before = api_writes(cluster)
        written.clear()
        cpu, wall, passes, pass_times = time.process_time(), time.monotonic(), 0, []
        state = None
        while state not in ("success", "failed") and passes < 10 * (items // max(slots, 1) + 10):
            started = time.monotonic()
            await reconcilers.reconcile("run", namespace, f"{name}-1")
            pass_times.append(time.monotonic() - started)
            passes += 1
            for attempt in executor.launched:
                if executor.attempts[attempt].phase is AttemptPhase.PENDING:
                    executor.finish(attempt)
            run = await kube.get_custom(DAGRUNS, namespace, f"{name}-1")
            state = (run or {}).get("status", {}).get("state")
        cpu, wall = time.process_time() - cpu, time.monotonic() - wall
        await reconcilers.writer.flush_events(within=30)
        after = api_writes(cluster)
    stored = json.loads(cluster.kubectl("get", "dagrun", f"{name}-1", "-n", namespace, "-o", "json").stdout)
    shards = json.loads(cluster.kubectl("get", "dagrunshards", "-n", namespace, "-o", "json").stdout)["items"]
    shards = [s for s in shards if s["spec"]["dagRun"] == f"{name}-1"]
    instances = items + 2
    writes = {r: after.get(r, 0) - before.get(r, 0) for r in sorted(set(after) | set(before))}
    writes = {r: n for r, n in writes.items() if n}
    return {
        "slots": slots,
        "state": state,
        "passes": passes,
        "wall": wall,
        "cpu": cpu,
        "cpu_per_instance_ms": 1000 * cpu / instances,
        "pass_p50": sorted(pass_times)[len(pass_times) // 2],
        "pass_max": max(pass_times),
        "writes": writes,
        "writes_per_instance": sum(writes.values()) / instances,
        "bytes_per_pass": sum(written) / passes,
        "bytes_total": sum(written),
        "dagrun_bytes": len(json.dumps(stored, separators=(",", ":"))),
        "largest_shard_bytes": max(len(json.dumps(s, separators=(",", ":"))) for s in shards),
        "shards": len(shards),
        "progress": stored["status"].get("progress"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--slots", default="128,10000", help="default-pool slots, one run each")
    parser.add_argument("--existing", action="store_true", help="use $KUBECONFIG instead of a local cluster")
    args = parser.parse_args()
    print(f"load before: {os.getloadavg()} on {os.cpu_count()} CPUs")
    with connect_cluster("existing" if args.existing else "local") as cluster:
        for slots in (int(s) for s in args.slots.split(",")):
            namespace = f"bench-big-{slots}-{int(time.time())}"  # a default-pool of its own
            cluster.kubectl("create", "namespace", namespace)
            result = asyncio.run(one_run(cluster, namespace, args.items, slots))
            print(
                f"\n{args.items} mapped instances (+2), default-pool {slots} slots: {result['state']} "
                f"({result['progress']}) in {result['passes']} passes, wall {result['wall']:.1f} s, "
                f"reconciler CPU {result['cpu']:.1f} s = {result['cpu_per_instance_ms']:.2f} ms per instance;"
                f" "
                f"pass p50 {result['pass_p50']:.2f} s, max {result['pass_max']:.2f} s"
            )
            print(
                f"  API writes {result['writes']} = {result['writes_per_instance']:.3f} per instance; "
                f"bytes written {result['bytes_total']:,} = {result['bytes_per_pass']:,.0f} per pass"
            )
            print(
                f"  stored: DagRun {result['dagrun_bytes']:,} bytes, {result['shards']} shards of "
                f"{run_shards.SHARD_INSTANCES}, the largest {result['largest_shard_bytes']:,} bytes"
            )
    print(f"\nload after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
