"""Benchmark: how fast the controller reacts, and how many API writes a task instance costs.

    python bench/bench_controller.py [--runs 3] [--chain 20] [--fanout 20]

Starts the local control plane (or uses $KUBECONFIG with --existing), runs `zonda controller` with
the Kubernetes executor against kwok nodes, triggers runs of a DAG with a chain of `--chain` tasks
and a fan-out of `--fanout` tasks, and prints:

- upstream done -> downstream pod created: for every chain edge, the time between the bench's watch
  seeing the upstream pod Succeeded and seeing the downstream pod ADDED (one clock, ms resolution);
- API writes per task instance, from the apiserver's own `apiserver_request_total` counters
  (POST/PUT/PATCH/DELETE by resource), before and after; and the controller's share (its objects'
  writes, plus the Events Zonda reported in the namespace).

It also prints the LISTs of labelled ConfigMaps and Secrets (a pod's variables and connections) per
task instance: 3.00 before a pass's launches shared one read, 0.60 after (`--runs 2 --chain 5
--fanout 15`, load 10-30).

It prints numbers; it asserts nothing (performance is measured here, not in tests).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from controller.devtools.devcluster import ADMIN_TOKEN, Cluster, connect_cluster
from controller.kube import Kube
from tests.cluster.zonda_processes import apply, controller, trigger, wait_run_finished

WRITE_VERBS = ("POST", "PUT", "PATCH", "DELETE")
_METRIC = re.compile(r"^apiserver_request_total\{(?P<labels>[^}]*)\} (?P<value>[0-9.e+]+)$")


def api_requests(cluster: Cluster) -> dict[tuple[str, str, str], float]:
    """Requests served so far by (resource[/subresource], verb, code), from the apiserver's /metrics."""
    config = json.loads(cluster.kubeconfig.read_text())
    server = config["clusters"][0]["cluster"]["server"]
    import ssl

    request = urllib.request.Request(f"{server}/metrics", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    with urllib.request.urlopen(request, context=ssl._create_unverified_context(), timeout=10) as response:
        text = response.read().decode()
    totals: dict[tuple[str, str, str], float] = {}
    for line in text.splitlines():
        match = _METRIC.match(line)
        if not match:
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', match.group("labels")))
        resource = labels.get("resource", "") + (
            f"/{labels['subresource']}" if labels.get("subresource") else ""
        )
        key = (resource, labels.get("verb", ""), labels.get("code", ""))
        totals[key] = totals.get(key, 0) + float(match.group("value"))
    return totals


def api_writes(cluster: Cluster, verbs: tuple[str, ...] = WRITE_VERBS) -> dict[str, float]:
    """Requests (writes by default) served so far, by resource[/subresource], from /metrics."""
    totals: dict[str, float] = {}
    for (resource, verb, _code), value in api_requests(cluster).items():
        if verb in verbs:
            totals[resource] = totals.get(resource, 0) + value
    return totals


#: What the controller writes (the rest: the scheduler binds pods, kwok writes their status).
CONTROLLER_RESOURCES = ("dagruns", "dagruns/status", "dags/status", "pods", "triggers")


def zonda_events(cluster: Cluster, namespace: str) -> int:
    """Events in `namespace` reported by Zonda (core/v1 `source` or events.k8s.io `reportingController`)."""
    items = json.loads(cluster.kubectl("get", "events", "-n", namespace, "-o", "json").stdout)["items"]
    return sum(
        1
        for event in items
        if "zonda" in (event.get("reportingComponent") or (event.get("source") or {}).get("component") or "")
    )


def dag(chain: int, fanout: int) -> dict[str, object]:
    def task(task_id: str, upstream: list[str]) -> dict[str, object]:
        return {
            "id": task_id,
            "dependsOn": upstream,
            "container": {"image": "busybox"},
            "podOverride": {"metadata": {"annotations": {"kwok.zonda.dev/duration-ms": "100"}}},
        }

    tasks = [task("c0", [])]
    tasks += [task(f"c{i}", [f"c{i - 1}"]) for i in range(1, chain)]
    tasks += [task(f"f{i}", ["c0"]) for i in range(fanout)]
    return {
        "apiVersion": "zonda.dev/v1alpha1",
        "kind": "DAG",
        "metadata": {"name": "bench"},
        "spec": {"schedule": None, "maxActiveTasks": 64, "tasks": tasks},
    }


async def watch_pods(
    kube: Kube, namespace: str, seen: dict[str, dict[str, float]], stop: asyncio.Event
) -> None:
    from kubernetes_asyncio import watch

    stream = watch.Watch()
    async with stream.stream(kube.core.list_namespaced_pod, namespace, timeout_seconds=600) as events:
        async for event in events:
            pod = event["object"]
            now = time.monotonic()
            run = pod.metadata.labels.get("zonda.dev/dagrun")
            key = f"{run}/{pod.metadata.annotations.get('zonda.dev/task-id')}"
            record = seen.setdefault(key, {})
            if event["type"] == "ADDED":
                record.setdefault("added", now)
            if pod.status and pod.status.phase == "Succeeded":
                record.setdefault("succeeded", now)
            if stop.is_set():
                break


def measure_schedule_precision(cluster: Cluster, namespace: str, metrics_port: int, ticks: int) -> None:
    """run_after -> DagRun created, as the controller's histogram records it (its own clock, ms)."""
    start = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 2))
    apply(
        cluster,
        namespace,
        {
            "apiVersion": "zonda.dev/v1alpha1",
            "kind": "DAG",
            "metadata": {"name": "ticker"},
            "spec": {
                "schedule": "2s",
                "startDate": start,
                "catchup": False,
                "maxActiveRuns": 64,
                "tasks": [{"id": "e", "operator": "EmptyOperator"}],
            },
        },
    )
    deadline = time.monotonic() + ticks * 2 + 30
    while time.monotonic() < deadline:
        runs = [
            r
            for r in json.loads(cluster.kubectl("get", "dagruns", "-n", namespace, "-o", "json").stdout)[
                "items"
            ]
            if r["spec"]["dagName"] == "ticker"
        ]
        if len(runs) >= ticks:
            break
        time.sleep(0.5)
    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).read().decode()
    kind = 'kind="run_after_to_run_created"'
    count = sum(
        float(line.split()[-1])
        for line in text.splitlines()
        if line.startswith("zonda_scheduling_delay_seconds_count") and kind in line
    )
    total = sum(
        float(line.split()[-1])
        for line in text.splitlines()
        if line.startswith("zonda_scheduling_delay_seconds_sum") and kind in line
    )
    buckets = [
        (line.split('le="')[1].split('"')[0], float(line.split()[-1]))
        for line in text.splitlines()
        if line.startswith("zonda_scheduling_delay_seconds_bucket") and kind in line
    ]
    print(f"\nrun_after -> DagRun created ({count:.0f} scheduled runs of a 2s schedule):")
    if count:
        print(
            f"  mean {total / count * 1000:7.1f} ms   cumulative buckets: "
            + ", ".join(f"<={le}s: {n:.0f}" for le, n in buckets if n)
        )


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--chain", type=int, default=20)
    parser.add_argument("--fanout", type=int, default=20)
    parser.add_argument("--ticks", type=int, default=10, help="scheduled runs of a 2s schedule to time")
    parser.add_argument("--existing", action="store_true", help="use $KUBECONFIG instead of a local cluster")
    args = parser.parse_args()
    with (
        connect_cluster("existing" if args.existing else "local") as cluster,
        tempfile.TemporaryDirectory() as tmp,
    ):
        namespace = f"bench-{int(time.time())}"
        cluster.kubectl("create", "namespace", namespace)
        apply(cluster, namespace, dag(args.chain, args.fanout))
        seen: dict[str, dict[str, float]] = {}

        async def run() -> list[str]:
            kube = await Kube.connect(str(cluster.kubeconfig))
            stop = asyncio.Event()
            watcher = asyncio.create_task(watch_pods(kube, namespace, seen, stop))
            await asyncio.sleep(0.5)
            names = []
            metrics_port = free_port()
            extra = ["--workers", "4", "--metrics-port", str(metrics_port)]
            with controller(cluster, namespace, Path(tmp), extra=extra):
                before = api_writes(cluster)
                lists_before = api_writes(cluster, ("LIST",))
                for _ in range(args.runs):
                    names.append(await asyncio.to_thread(trigger, cluster, namespace, "bench"))
                    await asyncio.sleep(0.01)
                for name in names:
                    await asyncio.to_thread(wait_run_finished, cluster, namespace, name, 300)
                after = api_writes(cluster)
                lists_after = api_writes(cluster, ("LIST",))
                await asyncio.sleep(1)  # Events are posted in the background, after the status write
                events = await asyncio.to_thread(zonda_events, cluster, namespace)
                await asyncio.to_thread(
                    measure_schedule_precision, cluster, namespace, metrics_port, args.ticks
                )
            stop.set()
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
            await kube.close()
            task_instances = args.runs * (args.chain + args.fanout)
            print(f"\nAPI writes per task instance ({task_instances} task instances, {args.runs} runs):")
            total = 0.0
            for resource in sorted(set(after) | set(before)):
                delta = after.get(resource, 0) - before.get(resource, 0)
                if delta:
                    total += delta
                    print(f"  {resource:24s} {delta / task_instances:6.2f}  ({delta:.0f} writes)")
            print(f"  {'all':24s} {total / task_instances:6.2f}")
            # The variables and connections a pod may reference: labelled ConfigMaps and Secrets.
            lists = sum(lists_after.get(r, 0) - lists_before.get(r, 0) for r in ("configmaps", "secrets"))
            print(f"  ConfigMap/Secret LISTs per task instance: {lists / task_instances:.2f} ({lists:.0f})")
            own = sum(after.get(r, 0) - before.get(r, 0) for r in CONTROLLER_RESOURCES)
            print(
                f"  by the controller: {(own + events) / task_instances:.2f} per task instance "
                f"({own:.0f} object writes + {events} Events, of which Events {events / task_instances:.2f})"
            )
            return names

        names = asyncio.run(run())
        gaps = []
        for name in names:
            label = name[:63]
            for i in range(1, args.chain):
                up, down = seen.get(f"{label}/c{i - 1}", {}), seen.get(f"{label}/c{i}", {})
                if "succeeded" in up and "added" in down:
                    gaps.append((down["added"] - up["succeeded"]) * 1000)
        if gaps:
            print(f"\nupstream done -> downstream pod created, {len(gaps)} chain edges:")
            print(
                f"  p50 {statistics.median(gaps):7.1f} ms   p99 {percentile(gaps, 0.99):7.1f} ms   "
                f"max {max(gaps):7.1f} ms   mean {statistics.fmean(gaps):7.1f} ms"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
