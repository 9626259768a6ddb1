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
  CPU per DAG pass over the run (the controller does nothing else: no pods);
- the machine at each boundary: CPU seconds of each process (the apiserver, etcd, the controller or
  the null creator, the rest of the control plane, this bench) in the boundary's first
  `--boundary-window` seconds, from /proc: who had the two cores while the runs were being created.

`--profile DIR` records the controller with py-spy over the measured minutes (raw collapsed stacks,
`DIR/many-dags-<tree>.txt`, idle samples included: where a pass waits matters as much as where it computes)
and prints the frames with the most samples.

`--replicas 1,2` runs each tree once per count: N > 1 starts N controllers with `--shards N` (each
acting for the DAGs of the shards it holds, `controller.manager.shards`); CPU and RSS are then the
replicas' sum, with each replica's CPU beside it.

The ceiling (unless `--no-null`): after the controllers' rounds, a null creator in a namespace of its
own with the same DAGs applied and no controller: at each of the `--minutes` boundaries it creates the
1,000 DagRuns Zonda would (the controller's own `scheduled_run` body, name and data interval), built
before the boundary and POSTed from the boundary on, `--null-inflight` at a time, from a process of its
own (as the controller is), while the bench's watch measures them the same way (`--null-first`: its
round before the controllers'). Each tree's p50 / p99 is printed beside the null's, with the ratio and
each round's load at its start and end: what this apiserver and etcd on this machine allow at a
boundary, and how far Zonda is from it.

It prints numbers; it asserts nothing (performance is measured here, not in tests).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import multiprocessing
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pendulum

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
from controller.reconcilers.dags import scheduled_run
from zonda.resources.run_types import RunType
from zonda.schedules.scheduling import DueRun, dagrun_name
from zonda.timetables import DataInterval

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


async def watch_runs(
    api: Api, namespace: str
) -> tuple[dict[str, float], dict[str, dict[str, Any]], asyncio.Task[None]]:
    """The namespace's DagRuns watched from now: run name -> wall clock the watch saw it ADDED, its
    body then, and the watching task (to cancel)."""
    seen: dict[str, float] = {}
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
    return seen, bodies, watcher


def cpu_or_nan(pid: int) -> float:
    """The process's CPU seconds; NaN once it is gone (it then shows as nan, not as idle)."""
    try:
        return cpu_seconds(pid)
    except OSError:
        return math.nan


async def cpu_at_boundaries(
    cluster: Cluster, ours: dict[str, int], first_boundary: int, minutes: int, window: float
) -> list[tuple[int, float, dict[str, float]]]:
    """Each of the `minutes` boundaries from `first_boundary`, the seconds actually covered from it
    and the CPU seconds each process spent in them (/proc: the kernel's count, not the processes'
    own): the control plane's, `ours` (the controllers or the null creator) and this bench's."""
    processes = {**{name: proc.pid for name, proc in cluster.processes.items()}, **ours, "bench": os.getpid()}
    taken = []
    for boundary in (first_boundary + 60 * k for k in range(minutes)):
        await asyncio.sleep(max(0.0, boundary - time.time()))
        started, start = time.time(), {name: cpu_or_nan(pid) for name, pid in processes.items()}
        await asyncio.sleep(max(0.0, boundary + window - time.time()))
        spent = {name: cpu_or_nan(pid) - start[name] for name, pid in processes.items()}
        taken.append((boundary, time.time() - started, spent))
    return taken


def report_boundary_cpu(taken: list[tuple[int, float, dict[str, float]]]) -> None:
    cores = os.cpu_count() or 1
    print(f"\nCPU seconds by process in each boundary's first seconds (/proc; {cores} cores):")
    for boundary, covered, spent in taken:
        stamp = datetime.fromtimestamp(boundary, UTC).strftime("%H:%M")
        print(
            f"  {stamp} (+{covered:.2f} s, at most {covered * cores:.2f}): "
            + ", ".join(
                f"{name} {seconds:.2f}" for name, seconds in sorted(spent.items(), key=lambda kv: -kv[1])
            )
            + f"; all {sum(spent.values()):.2f}"
        )


@dataclass
class Round:
    """One round's figures, for the summary beside the null creator's."""

    label: str
    skews: list[float]
    duplicates: int
    missing: int
    load_start: float
    load_end: float
    cpu_per_pass_ms: float | None = None

    def line(self, null: Round | None) -> str:
        p50, p99 = statistics.median(self.skews), percentile(self.skews, 0.99)
        text = (
            f"  {self.label:>12}: p50 {p50:6.3f} s  p99 {p99:6.3f} s  ({len(self.skews)} runs; duplicates "
            f"{self.duplicates}, missing {self.missing}; load {self.load_start:.1f} -> {self.load_end:.1f})"
        )
        if self.cpu_per_pass_ms is not None:
            text += f"; CPU per pass {self.cpu_per_pass_ms:.1f} ms"
        if null is not None and null is not self and null.skews:
            n50, n99 = statistics.median(null.skews), percentile(null.skews, 0.99)
            text += f"; x null: p50 {p50 / max(n50, 1e-6):.1f}x, p99 {p99 / max(n99, 1e-6):.1f}x"
        return text


def report_skews(
    seen: dict[str, float],
    bodies: dict[str, dict[str, Any]],
    listing: list[dict[str, Any]],
    first_boundary: int,
    end: float,
    dags: int,
) -> tuple[list[float], int, int]:
    """Print scheduled time -> DagRun seen ADDED per boundary and overall; (skews, duplicates, missing)
    from the apiserver's list."""
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
    missing = sum(max(0, len(boundaries) - per_dag.get(f"d{i:04d}", 0)) for i in range(dags))
    print(
        f"\nexactly once (apiserver's list, {len(listing)} DagRuns): duplicates {duplicates}, "
        f"missing {missing} over {len(boundaries)} boundaries x {dags} DAGs"
    )
    return skews, duplicates, missing


async def run(
    args: argparse.Namespace, cluster: Cluster, tmp: Path, label: str, tree: Path, replicas: int = 1
) -> Round:
    print(
        f"\n=== {label}: {tree} ({args.dags} DAGs, {args.minutes} minutes, {replicas} replicas)", flush=True
    )
    api = Api(cluster)
    namespace = f"many-{label}-{int(time.time()) % 100000}"
    await api.request("POST", "/api/v1/namespaces", {"metadata": {"name": namespace}})
    seen, bodies, watcher = await watch_runs(api, namespace)
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
        load = os.getloadavg()[0]
        gate = asyncio.Semaphore(16)

        async def create(i: int) -> None:
            async with gate:
                await api.request("POST", f"/apis/zonda.dev/v1alpha1/namespaces/{namespace}/dags", dag(i))

        applied_at = time.time()
        await asyncio.gather(*(create(i) for i in range(args.dags)))
        print(f"{args.dags} DAGs applied in {time.time() - applied_at:.1f} s (load {load:.1f})", flush=True)
        # Idle: every DAG reconciled once and waiting for its next minute (a pass per DAG done), and
        # the run each DAG's first pass creates seen: those creations (1,000 POSTs, seconds on a loaded
        # machine) are not part of the measured minutes' writes nor of their first boundary
        for _ in range(1200):
            if dag_passes_of(ports) >= args.dags and len(seen) >= args.dags:
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
        load_start = os.getloadavg()
        cpu_starts, passes_start = [cpu_seconds(pid) for pid in pids], summed_counters(ports)
        writes_start = api_writes(cluster)
        spy = None
        if args.profile:
            spy = start_py_spy(pids[0], args.profile / f"many-dags-{label}.txt")
        end = first_boundary + 60 * (args.minutes - 1) + 20
        ours = {f"controller-{n}" if replicas > 1 else "controller": pid for n, pid in enumerate(pids)}
        boundary_cpu = asyncio.create_task(
            cpu_at_boundaries(cluster, ours, first_boundary, args.minutes, args.boundary_window)
        )
        await asyncio.sleep(end - time.time())
        taken = await boundary_cpu
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            spy.wait(timeout=60)
        cpus = [cpu_seconds(pid) - start for pid, start in zip(pids, cpu_starts, strict=True)]
        cpu = sum(cpus)
        counters = summed_counters(ports)
        writes_end = api_writes(cluster)
        rss_end = sum(rss_bytes(pid) for pid in pids)
        load_end = os.getloadavg()
    watcher.cancel()
    listing = (await api.request("GET", f"/apis/zonda.dev/v1alpha1/namespaces/{namespace}/dagruns"))["items"]
    await api.close()

    skews, duplicates, missing = report_skews(seen, bodies, listing, first_boundary, end, args.dags)
    minutes = (end - first_boundary) / 60
    dag_passes = counters.get('zonda_reconciles_total{kind="dag"}', 0) - passes_start.get(
        'zonda_reconciles_total{kind="dag"}', 0
    )
    run_passes = counters.get('zonda_reconciles_total{kind="run"}', 0) - passes_start.get(
        'zonda_reconciles_total{kind="run"}', 0
    )
    per_pass = cpu * 1000 / max(1.0, dag_passes + run_passes)
    ahead = {
        outcome: counters.get(f'zonda_dag_plans_ahead_total{{outcome="{outcome}"}}', 0)
        - passes_start.get(f'zonda_dag_plans_ahead_total{{outcome="{outcome}"}}', 0)
        for outcome in ("used", "stale")
    }
    if replicas > 1:
        print("per replica CPU s per minute: " + ", ".join(f"{c / minutes:.1f}" for c in cpus))
    print(
        f"controller: CPU {cpu / minutes:.1f} s per minute; {dag_passes:.0f} DAG passes, "
        f"{run_passes:.0f} run passes (DAG passes with a plan made ahead: used {ahead['used']:.0f}, "
        f"no longer holding {ahead['stale']:.0f}); CPU per pass (DAG and run) {per_pass:.1f} ms; "
        f"RSS at the end {rss_end / 2**20:.1f} MiB"
    )
    writes = {k: writes_end.get(k, 0) - writes_start.get(k, 0) for k in set(writes_end) | set(writes_start)}
    created = max(1, len(skews))
    print(
        f"API writes over the measured minutes (apiserver_request_total, per run created of {created}): "
        + ", ".join(f"{k} {v:.0f} ({v / created:.2f})" for k, v in sorted(writes.items()) if v)
    )
    print(f"load average (1/5/15 min) at the first boundary {load_start}, at the end {load_end}")
    report_boundary_cpu(taken)
    if args.profile:
        top_frames(args.profile / f"many-dags-{label}.txt", limit=45)
    return Round(label, skews, duplicates, missing, load_start[0], load_end[0], per_pass)


async def run_null(args: argparse.Namespace, cluster: Cluster) -> Round:
    """The ceiling: the same DAGs, no controller, and a null creator that makes each boundary's runs."""
    print(f"\n=== null creator ({args.dags} DAGs, {args.minutes} minutes, {args.null_inflight} in flight)")
    api = Api(cluster)
    namespace = f"many-null-{int(time.time()) % 100000}"
    await api.request("POST", "/api/v1/namespaces", {"metadata": {"name": namespace}})
    seen, bodies, watcher = await watch_runs(api, namespace)
    gate = asyncio.Semaphore(16)

    async def apply(i: int) -> dict[str, Any]:
        async with gate:
            created: dict[str, Any] = await api.request(
                "POST", f"/apis/zonda.dev/v1alpha1/namespaces/{namespace}/dags", dag(i)
            )
            return created

    dags = await asyncio.gather(*(apply(i) for i in range(args.dags)))
    context = multiprocessing.get_context("spawn")
    boundaries: multiprocessing.Queue[int] = context.Queue()
    creator = context.Process(
        target=null_creator,
        args=(
            str(cluster.kubeconfig),
            dags,
            args.minutes,
            args.null_inflight,
            boundaries,
            args.boundary_window,
        ),
        name="null-creator",
    )
    creator.start()
    # its first boundary, chosen once it is started and imported (seconds on a loaded machine)
    first_boundary = await asyncio.to_thread(boundaries.get, True, 300)
    end = first_boundary + 60 * (args.minutes - 1) + 20
    assert creator.pid is not None
    boundary_cpu = asyncio.create_task(
        cpu_at_boundaries(
            cluster, {"null creator": creator.pid}, first_boundary, args.minutes, args.boundary_window
        )
    )
    await asyncio.sleep(max(0.0, first_boundary - time.time()))
    load_start = os.getloadavg()
    await asyncio.sleep(end - time.time())
    load_end = os.getloadavg()
    taken = await boundary_cpu
    creator.join(timeout=120)
    watcher.cancel()
    listing = (await api.request("GET", f"/apis/zonda.dev/v1alpha1/namespaces/{namespace}/dagruns"))["items"]
    await api.close()
    skews, duplicates, missing = report_skews(seen, bodies, listing, first_boundary, end, args.dags)
    print(f"load average (1/5/15 min) at the first boundary {load_start}, at the end {load_end}")
    report_boundary_cpu(taken)
    return Round("null", skews, duplicates, missing, load_start[0], load_end[0])


def null_creator(
    kubeconfig: str,
    dags: list[dict[str, Any]],
    minutes: int,
    inflight: int,
    boundaries: multiprocessing.Queue[int],
    window: float,
) -> None:
    """The null creator's process: each boundary's runs, bodies built before it, POSTed from it on."""
    cluster = Cluster(kubeconfig=Path(kubeconfig), bin_dir=Path())  # the client reads only the kubeconfig

    async def create(api: Api, gate: asyncio.Semaphore, body: dict[str, Any]) -> float:
        """POST one run; seconds from its boundary to the answer."""
        async with gate:
            namespace = body["metadata"]["namespace"]
            await api.request("POST", f"/apis/zonda.dev/v1alpha1/namespaces/{namespace}/dagruns", body)
            return time.time() - body_boundary(body)

    async def warm(api: Api, gate: asyncio.Semaphore, dag: dict[str, Any]) -> None:
        async with gate:
            namespace = dag["metadata"]["namespace"]
            await api.request("GET", f"/apis/zonda.dev/v1alpha1/namespaces/{namespace}/dagruns?limit=1")
            await asyncio.sleep(0.2)  # held, so the others open connections of their own

    async def main() -> None:
        api = Api(cluster)
        gate = asyncio.Semaphore(inflight)
        first = (int(time.time()) // 60 + 1) * 60
        if first - time.time() < 8:  # room to build the first boundary's bodies and warm up
            first += 60
        boundaries.put(first)
        for k in range(minutes):
            boundary = pendulum.from_timestamp(first + 60 * k, tz="UTC")
            start = boundary - timedelta(minutes=1)
            due = DueRun(logical_date=start, data_interval=DataInterval(start, boundary), run_after=boundary)
            runs = [
                scheduled_run(d, dagrun_name(d["metadata"]["name"], start, RunType.SCHEDULED.value), due)
                for d in dags
            ]
            # connections open and warm, as a running controller's are (it keeps idle ones 75 s; this
            # client's aiohttp closes them after 15 s)
            await asyncio.sleep(max(0.0, boundary.timestamp() - 3 - time.time()))
            await asyncio.gather(*(warm(api, gate, dags[0]) for _ in range(inflight)))
            await asyncio.sleep(max(0.0, boundary.timestamp() - time.time()))
            answered = await asyncio.gather(*(create(api, gate, body) for body in runs))
            print(
                f"  null creator {boundary:%H:%M}: {len(answered)} created, POST answered p50 "
                f"{statistics.median(answered):.3f} s, last {max(answered):.3f} s",
                flush=True,
            )
        await api.close()
        # alive until the bench has counted the last boundary's CPU (`--boundary-window`)
        await asyncio.sleep(max(0.0, boundary.timestamp() + window + 1 - time.time()))

    asyncio.run(main())


def body_boundary(run: dict[str, Any]) -> float:
    """A scheduled run's run_after (its data interval's end), as a timestamp."""
    return parse(run["spec"]["dataInterval"]["end"]).timestamp()


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
    parser.add_argument("--no-null", action="store_true", help="no null creator round (the ceiling)")
    parser.add_argument("--null-first", action="store_true", help="the null creator's round first")
    parser.add_argument(
        "--null-inflight", type=int, default=32, help="the null creator's creates in flight at once"
    )
    parser.add_argument(
        "--boundary-window",
        type=float,
        default=2.0,
        help="seconds from each boundary whose CPU is counted by process (default 2)",
    )
    args = parser.parse_args()
    if args.profile:
        args.profile = Path(args.profile).resolve()
        args.profile.mkdir(parents=True, exist_ok=True)
    trees = [(part.split("=", 1)[0], Path(part.split("=", 1)[1]).resolve()) for part in args.trees.split(",")]
    rounds: list[Round] = []
    null = None
    with connect_cluster("local") as cluster, tempfile.TemporaryDirectory() as tmp:
        if args.null_first and not args.no_null:
            null = asyncio.run(run_null(args, cluster))
        for label, tree in trees:
            for replicas in (int(n) for n in args.replicas.split(",")):
                rounds.append(
                    asyncio.run(run(args, cluster, Path(tmp), f"{label}-{replicas}", tree, replicas))
                )
        if null is None and not args.no_null:
            null = asyncio.run(run_null(args, cluster))
    print("\nscheduled time -> DagRun created, each round (the null creator is the ceiling):")
    for one in [*rounds, *([null] if null is not None else [])]:
        if one.skews:
            print(one.line(null))
    return 0


if __name__ == "__main__":
    sys.exit(main())
