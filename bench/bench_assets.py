"""Data-aware scheduling against a real apiserver (run on demand; prints numbers, asserts nothing).

    python bench/bench_assets.py --events 30 --burst 50 --assets 100
    python bench/bench_assets.py --assets 1000 --events-per-asset 10 --consumers 100   # 10,000 events

One controller process (local executor), a consumer DAG scheduled on one asset. Reported:
- with `--assets` other assets given `--events-per-asset` events each, created `--concurrency` at a
  time (first), `--consumers` of them each the schedule of one more DAG (`any` of 10 assets,
  `maxActiveRuns` 1, so its runs queue the events as Airflow does): the controller's CPU (user+system
  from /proc) per event until every asset's status counts its events, the events retained, its RSS;
- event recorded -> consumer run created, with those events kept: an AssetEvent is created through
  the API, then the run is polled for (20 ms) from the apiserver; p50/p99/max over `--events`
  sequential events;
- a burst of `--burst` events created back to back: how many runs they made (Airflow queues events
  arriving faster than runs into the next run, so fewer runs than events, every event consumed once),
  and the controller's CPU per event over the burst.

The controller runs the tree on PYTHONPATH (the bench's own by default): run it with another tree
first on the path to compare.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from controller.devtools.devcluster import connect_cluster
from controller.kube import DAGRUNS, DAGS, Kube
from tests.cluster.zonda_processes import apply, controller
from zonda.resources.asset_models import ASSETEVENTS

URI = "s3://bench/orders"


def consumer() -> dict[str, Any]:
    return {
        "apiVersion": "zonda.dev/v1alpha1",
        "kind": "DAG",
        "metadata": {"name": "bench-consumer"},
        "spec": {
            "assetSchedule": {"uri": URI},
            "maxActiveRuns": 1000,
            "tasks": [{"id": "t", "operator": "EmptyOperator"}],
        },
    }


def other_consumer(i: int, uris: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": "zonda.dev/v1alpha1",
        "kind": "DAG",
        "metadata": {"name": f"bench-other-{i}"},
        "spec": {
            "assetSchedule": {"any": [{"uri": u} for u in uris]},
            "maxActiveRuns": 1,
            "tasks": [{"id": "t", "operator": "EmptyOperator"}],
        },
    }


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def event(name: str, uri: str) -> dict[str, Any]:
    return {
        "apiVersion": "zonda.dev/v1alpha1",
        "kind": "AssetEvent",
        "metadata": {"name": name},
        "spec": {"uri": uri, "extra": {"n": name}},
    }


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


async def runs(kube: Kube, namespace: str) -> list[dict[str, Any]]:
    return [r for r in await kube.list_custom(DAGRUNS, namespace) if r["spec"]["dagName"] == "bench-consumer"]


async def awaiting(kube: Kube, namespace: str) -> None:
    """Until the consumer's status names what it awaits: the controller has made its first pass."""
    while True:
        body = await kube.get_custom(DAGS, namespace, "bench-consumer") or {}
        if (body.get("status") or {}).get("awaitedAssets"):
            return
        await asyncio.sleep(0.1)


async def background(kube: Kube, namespace: str, pid: int, args: argparse.Namespace) -> None:
    """`--assets` assets with `--events-per-asset` events each: CPU per event, events kept, RSS."""
    total = args.assets * args.events_per_asset
    if not total:
        return
    cpu0, started = cpu_seconds(pid), time.monotonic()
    gate = asyncio.Semaphore(args.concurrency)

    async def create(i: int, j: int) -> None:
        async with gate:
            await kube.create_custom(ASSETEVENTS, namespace, event(f"other-{i}-{j}", f"s3://bench/other-{i}"))

    for j in range(args.events_per_asset):  # round by round, as producers would update them
        await asyncio.gather(*(create(i, j) for i in range(args.assets)))
    created = time.monotonic() - started
    deadline = time.monotonic() + args.timeout
    counted = 0
    while time.monotonic() < deadline:
        found = await kube.list_custom("assets", namespace)
        counted = sum(
            1
            for a in found
            if a["spec"]["uri"].startswith("s3://bench/other-")
            and (a.get("status") or {}).get("events") == args.events_per_asset
        )
        if counted >= args.assets:
            break
        await asyncio.sleep(1)
    cpu1, settled = cpu_seconds(pid), time.monotonic() - started
    kept = len(await kube.list_custom(ASSETEVENTS, namespace))
    runs_made = len(await kube.list_custom(DAGRUNS, namespace))
    print(
        f"{args.assets} assets x {args.events_per_asset} events ({total}) created in {created:.0f} s, "
        f"every asset's status counting them after {settled:.0f} s ({counted}/{args.assets} assets); "
        f"controller CPU {(cpu1 - cpu0) / total * 1000:.1f} ms per event; events retained {kept}; "
        f"{runs_made} runs of {args.consumers} consumers; controller RSS {rss_mib(pid):.0f} MiB"
    )


async def main_async(args: argparse.Namespace) -> None:
    with connect_cluster("local") as cluster, tempfile.TemporaryDirectory() as tmp:
        namespace = f"bench-assets-{int(time.time())}"
        cluster.kubectl("create", "namespace", namespace)
        apply(cluster, namespace, consumer())
        for i in range(args.consumers):
            uris = [f"s3://bench/other-{k}" for k in range(i * 10, i * 10 + 10)]
            apply(cluster, namespace, other_consumer(i, uris))
        kube = await Kube.connect(str(cluster.kubeconfig))
        print(f"load average at the start: {os.getloadavg()}")
        with controller(cluster, namespace, Path(tmp), executor="local") as process:
            assert process.process is not None
            pid = process.process.pid
            # the controller's first pass over the consumer (its status says what it awaits): started
            await awaiting(kube, namespace)
            await background(kube, namespace, pid, args)
            latencies = []
            for i in range(args.events):
                started = time.monotonic()
                await kube.create_custom(ASSETEVENTS, namespace, event(f"seq-{i}", URI))
                while len(await runs(kube, namespace)) < i + 1:  # noqa: ASYNC110 (polling the apiserver)
                    await asyncio.sleep(0.02)
                latencies.append(time.monotonic() - started)
            # the first after the controller started is its own figure (its watches may still be listing)
            first, latencies = latencies[0], latencies[1:]
            print(
                f"event recorded -> consumer run created, {args.events} sequential events: the first "
                f"{first * 1000:.0f} ms; the {len(latencies)} others:"
            )
            p50, p99 = percentile(latencies, 0.5) * 1000, percentile(latencies, 0.99) * 1000
            print(f"  p50 {p50:.0f} ms  p99 {p99:.0f} ms  max {max(latencies) * 1000:.0f} ms")
            slowest = sorted(range(len(latencies)), key=lambda k: -latencies[k])[:3]
            print(
                "  slowest (event #: ms): "
                + ", ".join(f"{k + 1}: {latencies[k] * 1000:.0f}" for k in slowest)
            )
            before_runs, cpu0 = len(await runs(kube, namespace)), cpu_seconds(pid)
            for i in range(args.burst):
                await kube.create_custom(ASSETEVENTS, namespace, event(f"burst-{i}", URI))
            consumed: set[str] = set()
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                found = await runs(kube, namespace)
                consumed = {
                    e["name"] for r in found for e in r["spec"].get("triggeringAssetEvents") or []
                    if e["name"].startswith("burst-")
                }  # fmt: skip
                if len(consumed) == args.burst:
                    break
                await asyncio.sleep(0.1)
            burst_runs = len(await runs(kube, namespace)) - before_runs
            cpu1 = cpu_seconds(pid)
            print(
                f"burst of {args.burst} events: {burst_runs} runs, {len(consumed)} events consumed once; "
                f"controller CPU {(cpu1 - cpu0) / max(args.burst, 1) * 1000:.1f} ms per event; "
                f"RSS {rss_mib(pid):.0f} MiB"
            )
        await kube.close()
        print(f"load average at the end: {os.getloadavg()}")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=30)
    parser.add_argument("--burst", type=int, default=50)
    parser.add_argument("--assets", type=int, default=100)
    parser.add_argument("--events-per-asset", type=int, default=1)
    parser.add_argument("--consumers", type=int, default=0, help="DAGs on 10 of the other assets each")
    parser.add_argument("--concurrency", type=int, default=16, help="events created at a time")
    parser.add_argument("--timeout", type=float, default=600, help="seconds for the assets to settle")
    asyncio.run(main_async(parser.parse_args()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
