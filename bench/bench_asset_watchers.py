"""Asset watchers against a real apiserver (run on demand; prints numbers, asserts nothing).

    python bench/bench_asset_watchers.py --changes 20 --watchers 100 --poll 1

One controller (local executor) and one triggerer process on a throwaway local control plane. A
consumer DAG is scheduled on an asset whose `AssetWatcher` is an `ObjectConditionEventTrigger` on a
ConfigMap's `data` (every new value is an event); `--watchers` other assets each watch a ConfigMap
of their own that never changes (idle polls: the triggerer's cost of watching). Reported:
- ConfigMap written -> AssetEvent created -> consumer run created, p50/p99/max over `--changes`
  sequential changes (each waits for its run; polled from the apiserver every 20 ms), with the poll
  interval `--poll` (the watcher's own wait dominates: half of it on average);
- the triggerer's CPU (user+system from /proc) per second while it only polls the idle watchers,
  and its RSS; events and runs counted from the apiserver (one each per change).
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

from bench.bench_assets import cpu_seconds, percentile, rss_mib
from controller.devtools.devcluster import connect_cluster
from controller.kube import DAGRUNS, Kube
from tests.cluster.zonda_processes import apply, controller, triggerer
from zonda.resources.asset_models import ASSETEVENTS

CLASSPATH = "controller.providers.kubernetes.triggers.ObjectConditionEventTrigger"


def watched_dag(name: str, uri: str, configmap: str, namespace: str, poll: float) -> dict[str, Any]:
    kwargs = {
        "api_version": "v1", "kind": "ConfigMap", "name": configmap, "namespace": namespace,
        "field_path": "data", "poll_interval": poll,
    }  # fmt: skip
    return {
        "apiVersion": "zonda.dev/v1alpha1",
        "kind": "DAG",
        "metadata": {"name": name},
        "spec": {
            "assetSchedule": {
                "uri": uri,
                "watchers": [{"name": "cm", "classpath": CLASSPATH, "kwargs": kwargs}],
            },
            "maxActiveRuns": 1000,
            "tasks": [{"id": "t", "operator": "EmptyOperator"}],
        },
    }


def configmap(name: str, value: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"v": value}}


async def main_async(args: argparse.Namespace) -> None:
    with connect_cluster("local") as cluster, tempfile.TemporaryDirectory() as tmp:
        namespace = f"bench-watchers-{int(time.time())}"
        cluster.kubectl("create", "namespace", namespace)
        kube = await Kube.connect(str(cluster.kubeconfig))
        for i in range(args.watchers):
            apply(cluster, namespace, configmap(f"idle-{i}", "0"))
            apply(
                cluster,
                namespace,
                watched_dag(f"idle-{i}", f"s3://bench/idle-{i}", f"idle-{i}", namespace, args.poll),
            )
        apply(cluster, namespace, configmap("watched", "0"))
        apply(
            cluster, namespace, watched_dag("consumer", "s3://bench/watched", "watched", namespace, args.poll)
        )
        print(f"load average at the start: {os.getloadavg()}")
        path = Path(tmp)
        with (
            controller(cluster, namespace, path, executor="local"),
            triggerer(cluster, namespace, path) as trig,
        ):
            assert trig.process is not None
            pid = trig.process.pid
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline:  # every watcher's state at start is one event
                events = await kube.list_custom(ASSETEVENTS, namespace)
                if len(events) >= args.watchers + 1:
                    break
                await asyncio.sleep(1)
            started_runs = len(await consumer_runs(kube, namespace))
            cpu0, t0 = cpu_seconds(pid), time.monotonic()
            await asyncio.sleep(args.idle)
            idle_cpu = (cpu_seconds(pid) - cpu0) / (time.monotonic() - t0)
            to_event, to_run = [], []
            for i in range(args.changes):
                apply(cluster, namespace, configmap("watched", str(i + 1)))
                began = time.monotonic()  # the write is done when kubectl returns
                seen_event = None
                while True:
                    if seen_event is None and any(
                        (e["spec"]["extra"].get("payload") or {}).get("value") == {"v": str(i + 1)}
                        for e in await kube.list_custom(ASSETEVENTS, namespace)
                    ):
                        seen_event = time.monotonic() - began
                    if len(await consumer_runs(kube, namespace)) >= started_runs + i + 1:
                        break
                    await asyncio.sleep(0.02)
                to_run.append(time.monotonic() - began)
                to_event.append(seen_event if seen_event is not None else to_run[-1])
            events = [
                e
                for e in await kube.list_custom(ASSETEVENTS, namespace)
                if e["spec"]["uri"] == "s3://bench/watched"
            ]
            runs = await consumer_runs(kube, namespace)
            print(
                f"{args.changes} sequential ConfigMap changes, poll interval {args.poll} s, "
                f"{args.watchers} idle watchers:"
            )
            for label, values in (("-> AssetEvent", to_event), ("-> consumer run", to_run)):
                print(
                    f"  ConfigMap written {label}: p50 {percentile(values, 0.5) * 1000:.0f} ms  "
                    f"p99 {percentile(values, 0.99) * 1000:.0f} ms  max {max(values) * 1000:.0f} ms"
                )
            print(
                f"  AssetEvents of the watched asset {len(events)} (1 at start + {args.changes}), "
                f"consumer runs {len(runs)}"
            )
            print(
                f"triggerer with {args.watchers + 1} watchers idle: CPU {idle_cpu * 100:.1f}% of a core; "
                f"RSS {rss_mib(pid):.0f} MiB"
            )
        await kube.close()
        print(f"load average at the end: {os.getloadavg()}")


async def consumer_runs(kube: Kube, namespace: str) -> list[dict[str, Any]]:
    return [r for r in await kube.list_custom(DAGRUNS, namespace) if r["spec"]["dagName"] == "consumer"]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--changes", type=int, default=20)
    parser.add_argument(
        "--watchers", type=int, default=100, help="other assets, each watching an idle ConfigMap"
    )
    parser.add_argument("--poll", type=float, default=1.0, help="the watchers' poll_interval (seconds)")
    parser.add_argument(
        "--idle", type=float, default=20.0, help="seconds the idle triggerer's CPU is measured"
    )
    asyncio.run(main_async(parser.parse_args()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
