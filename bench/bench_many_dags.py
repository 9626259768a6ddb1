"""Benchmark: many DAGs on `* * * * *` on one controller.

    python bench/bench_many_dags.py [--dags 1000] [--minutes 10] [--trees base=/tmp/base,new=.]
                                    [--workers N] [--profile DIR] [--replicas 1,2]

One local control plane and, for each tree in turn (back to back, each in a namespace of its own),
`zonda controller` of that tree (Kubernetes executor; the DAGs' one task is an
EmptyOperator, which needs no pod: the subject is scheduling). Applies `--dags` DAGs scheduled every
minute (catchup off), then watches DagRuns for `--minutes` minute boundaries and prints:

- scheduled time -> DagRun created: the bench's watch seeing the run ADDED minus its run_after (the
  end of its data interval), p50 / p99 / max, per minute boundary and overall;
- runs created exactly once: from the apiserver's list at the end, runs per (DAG, data interval)
  (more than one is a duplicate) and DAGs missing a run of a boundary that passed;
- the controller's RSS before any DAG, after the DAGs were applied and reconciled (idle), and at the
  end: bytes per idle DAG; its CPU seconds per minute;
- API writes by resource over the measured minutes (the apiserver's `apiserver_request_total`),
  and per run created;
- the DAG reconcile pass: passes counted by `zonda_reconciles_total{kind="dag"}` and the controller's
  CPU per DAG pass over the run (the controller does nothing else: no pods).

`--profile DIR` records the controller with py-spy over the measured minutes (raw collapsed stacks,
`DIR/many-dags-<tree>.txt`, idle samples included: where a pass waits matters as much as where it computes)
and prints the frames with the most samples.

`--replicas 1,2` runs each tree once per count: N > 1 starts N controllers with `--shards N` (each
acting for the DAGs of the shards it holds, `controller.manager.shards`); CPU and RSS are then the
replicas' sum, with each replica's CPU beside it.

It prints numbers; it asserts nothing (performance is measured here, not in tests).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_controller import api_writes, percentile
from bench.bench_scale import (
    Api,
    controller,
    controller_counters,
    cpu_seconds,
    free_port,
    rss_bytes,
    top_frames,
)
from controller.devtools.devcluster import Cluster, connect_cluster

TREE = Path(__file__).resolve().parents[1]


def dag(index: int) -> dict[str, Any]:
    return {
        "apiVersion": "zonda.dev/v1alpha1",
        "kind": "DAG",
        "metadata": {"name": f"d{index:04d}"},
        "spec": {
            "schedule": "* * * * *",
            "startDate": "2026-01-01T00:00:00Z",
            "catchup": False,
            "tasks": [{"id": "e", "operator": "EmptyOperator"}],
        },
    }


def start_py_spy(pid: int, out: Path) -> subprocess.Popen[bytes]:
    """Idle samples too: an idle controller with late runs is waiting, and on what matters."""
    args = ["py-spy", "record", "--pid", str(pid), "-r", "100", "-f", "raw", "--idle", "--nonblocking"]
    return subprocess.Popen([*args, "-o", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def parse(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


async def run(
    args: argparse.Namespace, cluster: Cluster, tmp: Path, label: str, tree: Path, replicas: int = 1
) -> None:
    print(
        f"\n=== {label}: {tree} ({args.dags} DAGs, {args.minutes} minutes, {replicas} replicas)", flush=True
    )
    api = Api(cluster)
    namespace = f"many-{label}-{int(time.time()) % 100000}"
    await api.request("POST", "/api/v1/namespaces", {"metadata": {"name": namespace}})
    seen: dict[str, float] = {}  # run name -> wall clock the watch saw it ADDED
    bodies: dict[str, dict[str, Any]] = {}

    def on_event(type: str, body: dict[str, Any], _monotonic: float) -> None:
        name = body["metadata"]["name"]
        if type == "ADDED" and name not in seen:
            seen[name] = time.time()
            bodies[name] = body

    ready = asyncio.Event()
    watcher = asyncio.create_task(
        api.watch(f"/apis/zonda.dev/v1alpha1/namespaces/{namespace}/dagruns", on_event, ready)
    )
    await ready.wait()
    ports = [free_port() for _ in range(replicas)]
    (tmp / "state").mkdir(exist_ok=True)
    extra = ["--shards", str(replicas), "--peering-lease-duration", "6"] if replicas > 1 else []
    with contextlib.ExitStack() as stack:
        pids = [
            stack.enter_context(
                controller(
                    cluster, tree, namespace, tmp / f"controller-{label}-{n}.log", port, args.workers, extra
                )
            )
            for n, port in enumerate(ports)
        ]
        await asyncio.sleep(2 if replicas == 1 else 6)  # sharded: the replicas have split the shards
        rss_empty = sum(rss_bytes(pid) for pid in pids)
        load = __import__("os").getloadavg()[0]
        gate = asyncio.Semaphore(16)

        async def create(i: int) -> None:
            async with gate:
                await api.request("POST", f"/apis/zonda.dev/v1alpha1/namespaces/{namespace}/dags", dag(i))

        applied_at = time.time()
        await asyncio.gather(*(create(i) for i in range(args.dags)))
        print(f"{args.dags} DAGs applied in {time.time() - applied_at:.1f} s (load {load:.1f})", flush=True)
        # Idle: every DAG reconciled once and waiting for its next minute (a pass per DAG done).
        for _ in range(1200):
            if dag_passes_of(ports) >= args.dags:
                break
            await asyncio.sleep(0.5)
        await asyncio.sleep(2)
        rss_idle = sum(rss_bytes(pid) for pid in pids)
        print(
            f"RSS: no DAG {rss_empty / 2**20:.1f} MiB, {args.dags} idle DAGs {rss_idle / 2**20:.1f} MiB: "
            f"{(rss_idle - rss_empty) / args.dags / 1024:.1f} KiB per idle DAG",
            flush=True,
        )
        first_boundary = (int(time.time()) // 60 + 1) * 60
        load_start = __import__("os").getloadavg()
        cpu_starts, passes_start = [cpu_seconds(pid) for pid in pids], summed_counters(ports)
        writes_start = api_writes(cluster)
        spy = None
        if args.profile:
            spy = start_py_spy(pids[0], args.profile / f"many-dags-{label}.txt")
        end = first_boundary + 60 * (args.minutes - 1) + 20
        await asyncio.sleep(end - time.time())
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            spy.wait(timeout=60)
        cpus = [cpu_seconds(pid) - start for pid, start in zip(pids, cpu_starts, strict=True)]
        cpu = sum(cpus)
        counters = summed_counters(ports)
        writes_end = api_writes(cluster)
        rss_end = sum(rss_bytes(pid) for pid in pids)
        load_end = __import__("os").getloadavg()
    watcher.cancel()
    listing = (await api.request("GET", f"/apis/zonda.dev/v1alpha1/namespaces/{namespace}/dagruns"))["items"]
    await api.close()

    skews: list[float] = []
    per_boundary: dict[int, list[float]] = {}
    for name, at in seen.items():
        spec = bodies[name]["spec"]
        run_after = parse((spec.get("dataInterval") or {}).get("end") or spec["logicalDate"]).timestamp()
        if run_after < first_boundary:
            continue
        skew = at - run_after
        skews.append(skew)
        per_boundary.setdefault(int(run_after), []).append(skew)
    print("\nscheduled time -> DagRun created (s), per minute boundary:")
    for boundary, values in sorted(per_boundary.items()):
        stamp = datetime.fromtimestamp(boundary, UTC).strftime("%H:%M")
        print(
            f"  {stamp}: {len(values):5d} runs  p50 {statistics.median(values):6.3f}  "
            f"p99 {percentile(values, 0.99):6.3f}  max {max(values):6.3f}"
        )
    if skews:
        print(
            f"  all: {len(skews)} runs  p50 {statistics.median(skews):.3f}  p99 {percentile(skews, 0.99):.3f}"
            f"  max {max(skews):.3f}"
        )
    intervals = Counter(
        (r["spec"]["dagName"], json.dumps(r["spec"].get("dataInterval"), sort_keys=True)) for r in listing
    )
    duplicates = sum(n - 1 for n in intervals.values() if n > 1)
    boundaries = [b for b in per_boundary if b + 60 <= end]
    per_dag = Counter(
        r["spec"]["dagName"]
        for r in listing
        if parse((r["spec"].get("dataInterval") or {}).get("end") or r["spec"]["logicalDate"]).timestamp()
        in set(boundaries)
    )
    missing = sum(max(0, len(boundaries) - per_dag.get(f"d{i:04d}", 0)) for i in range(args.dags))
    print(
        f"\nexactly once (apiserver's list, {len(listing)} DagRuns): duplicates {duplicates}, "
        f"missing {missing} over {len(boundaries)} boundaries x {args.dags} DAGs"
    )
    minutes = (end - first_boundary) / 60
    dag_passes = counters.get('zonda_reconciles_total{kind="dag"}', 0) - passes_start.get(
        'zonda_reconciles_total{kind="dag"}', 0
    )
    run_passes = counters.get('zonda_reconciles_total{kind="run"}', 0) - passes_start.get(
        'zonda_reconciles_total{kind="run"}', 0
    )
    per_pass = cpu * 1000 / max(1.0, dag_passes + run_passes)
    if replicas > 1:
        print("per replica CPU s per minute: " + ", ".join(f"{c / minutes:.1f}" for c in cpus))
    print(
        f"controller: CPU {cpu / minutes:.1f} s per minute; {dag_passes:.0f} DAG passes, "
        f"{run_passes:.0f} run passes; CPU per pass (DAG and run) {per_pass:.1f} ms; "
        f"RSS at the end {rss_end / 2**20:.1f} MiB"
    )
    writes = {k: writes_end.get(k, 0) - writes_start.get(k, 0) for k in set(writes_end) | set(writes_start)}
    created = max(1, len(skews))
    print(
        f"API writes over the measured minutes (apiserver_request_total, per run created of {created}): "
        + ", ".join(f"{k} {v:.0f} ({v / created:.2f})" for k, v in sorted(writes.items()) if v)
    )
    print(f"load average (1/5/15 min) at the first boundary {load_start}, at the end {load_end}")
    if args.profile:
        top_frames(args.profile / f"many-dags-{label}.txt", limit=45)


def summed_counters(ports: list[int]) -> Counter[str]:
    total: Counter[str] = Counter()
    for port in ports:
        total.update(controller_counters(port))
    return total


def dag_passes_of(ports: list[int]) -> float:
    return summed_counters(ports).get('zonda_reconciles_total{kind="dag"}', 0)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dags", type=int, default=1000)
    parser.add_argument("--minutes", type=int, default=10)
    parser.add_argument(
        "--trees", default=f"this={TREE}", help="label=path,...: the source trees whose controllers to run"
    )
    parser.add_argument(
        "--workers", type=int, default=None, help="the controllers' --workers (default: each tree's)"
    )
    parser.add_argument("--profile", default=None, help="record the controller with py-spy into DIR")
    parser.add_argument("--replicas", default="1", help="controller replicas, e.g. 1,2 (N > 1: --shards N)")
    args = parser.parse_args()
    if args.profile:
        args.profile = Path(args.profile).resolve()
        args.profile.mkdir(parents=True, exist_ok=True)
    trees = [(part.split("=", 1)[0], Path(part.split("=", 1)[1]).resolve()) for part in args.trees.split(",")]
    with connect_cluster("local") as cluster, tempfile.TemporaryDirectory() as tmp:
        for label, tree in trees:
            for replicas in (int(n) for n in args.replicas.split(",")):
                asyncio.run(run(args, cluster, Path(tmp), f"{label}-{replicas}", tree, replicas))
    return 0


if __name__ == "__main__":
    sys.exit(main())
