"""Data-aware scheduling against a real apiserver (run on demand; prints numbers, asserts nothing).

    python bench/bench_assets.py --events 30 --burst 50 --assets 100

One controller process (local executor), a consumer DAG scheduled on one asset. Reported:
- event recorded -> consumer run created: an AssetEvent is created through the API, then the run is
  polled for (20 ms) from the apiserver; p50/p99/max over `--events` sequential events;
- a burst of `--burst` events created back to back: how many runs they made (Airflow queues events
  arriving faster than runs into the next run, so fewer runs than events, every event consumed once);
- the controller's CPU (user+system from /proc) per event over the burst, and with `--assets` other
  assets each given one event (events of assets nobody consumes), CPU per event and events retained.
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
from controller.kube import DAGRUNS, Kube
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


async def main_async(args: argparse.Namespace) -> None:
    with connect_cluster("local") as cluster, tempfile.TemporaryDirectory() as tmp:
        namespace = f"bench-assets-{int(time.time())}"
        cluster.kubectl("create", "namespace", namespace)
        apply(cluster, namespace, consumer())
        kube = await Kube.connect(str(cluster.kubeconfig))
        with controller(cluster, namespace, Path(tmp), executor="local") as process:
            assert process.process is not None
            pid = process.process.pid
            await asyncio.sleep(3)  # the controller's watches start (a warm-up, not a correctness wait)
            latencies = []
            for i in range(args.events):
                started = time.monotonic()
                await kube.create_custom(ASSETEVENTS, namespace, event(f"seq-{i}", URI))
                while len(await runs(kube, namespace)) < i + 1:  # noqa: ASYNC110 (polling the apiserver)
                    await asyncio.sleep(0.02)
                latencies.append(time.monotonic() - started)
            print(f"event recorded -> consumer run created, {args.events} sequential events:")
            p50, p99 = percentile(latencies, 0.5) * 1000, percentile(latencies, 0.99) * 1000
            print(f"  p50 {p50:.0f} ms  p99 {p99:.0f} ms  max {max(latencies) * 1000:.0f} ms")
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
                f"controller CPU {(cpu1 - cpu0) / args.burst * 1000:.1f} ms per event"
            )
            for i in range(args.assets):
                await kube.create_custom(ASSETEVENTS, namespace, event(f"other-{i}", f"s3://bench/other-{i}"))
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline:
                assets = await kube.list_custom("assets", namespace)
                if sum(1 for a in assets if (a.get("status") or {}).get("lastEvent")) >= args.assets + 1:
                    break
                await asyncio.sleep(0.5)
            cpu2 = cpu_seconds(pid)
            kept = len(await kube.list_custom(ASSETEVENTS, namespace))
            print(
                f"{args.assets} more assets, one event each: controller CPU "
                f"{(cpu2 - cpu1) / max(args.assets, 1) * 1000:.1f} ms per event; events retained {kept}"
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
    asyncio.run(main_async(parser.parse_args()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
