"""Benchmark: real pods on the local control plane's real node (kubelet + containerd).

    python bench/bench_real_pods.py [--pods 20] [--chain 20]

Starts the local control plane with a real node (`start_local_cluster(real_node=True)`; the image
and node pieces come from the cache, or are built), cordons the kwok nodes and prints:

- node start: containerd + image import + kubelet until the Node is Ready;
- pod create -> container running: `--pods` pods of Zonda's image created one after another, each
  timed from the bench's create call to the watch event that shows its container running;
- upstream done -> downstream running for a `--chain`-task chain of BashOperator tasks run by
  `zonda controller` with the Kubernetes executor: for every edge, the watch event of the upstream
  pod's container terminating to the one of the downstream pod's container running.

One clock (this process's monotonic clock at watch-event arrival), ms resolution. It prints
numbers and the machine's load; it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from controller.devtools import realnode
from controller.devtools.devcluster import Cluster, start_local_cluster
from tests.cluster.zonda_processes import apply, controller, trigger, wait_run_finished


class PodWatch:
    """`kubectl get pods -w` in a thread; records when each pod's container was first seen
    running and terminated."""

    def __init__(self, cluster: Cluster, namespace: str) -> None:
        self.running: dict[str, float] = {}
        self.terminated: dict[str, float] = {}
        self.task_of: dict[str, tuple[str, str]] = {}
        kubectl = str(cluster.bin_dir / "kubectl")
        self.process = subprocess.Popen(
            [
                kubectl,
                "--kubeconfig",
                str(cluster.kubeconfig),
                "get",
                "pods",
                "-n",
                namespace,
                "-w",
                "--output-watch-events",
                "-o",
                "json",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        decoder = json.JSONDecoder()
        buffer = ""
        for line in self.process.stdout:
            buffer += line
            try:
                event, _ = decoder.raw_decode(buffer.strip())
            except json.JSONDecodeError:
                continue
            buffer = ""
            self._record(event["object"], time.monotonic())

    def _record(self, pod: dict[str, Any], now: float) -> None:
        name = pod["metadata"]["name"]
        annotations = pod["metadata"].get("annotations") or {}
        if "zonda.dev/task-id" in annotations:
            run = pod["metadata"]["labels"].get("zonda.dev/dagrun", "")
            self.task_of[name] = (run, annotations["zonda.dev/task-id"])
        for status in (pod.get("status") or {}).get("containerStatuses") or []:
            state = status.get("state") or {}
            if "running" in state or "terminated" in state:
                self.running.setdefault(name, now)
            if "terminated" in state:
                self.terminated.setdefault(name, now)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def summary(label: str, seconds: list[float]) -> None:
    ms = [s * 1000 for s in seconds]
    print(
        f"{label}: n={len(ms)} p50={percentile(ms, 0.5):.0f} ms p99={percentile(ms, 0.99):.0f} ms "
        f"mean={statistics.fmean(ms):.0f} ms max={max(ms):.0f} ms"
    )


def wait(predicate: Any, what: str, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.05)


def bench_pod_start(cluster: Cluster, image: str, count: int) -> None:
    namespace = "bench-pods"
    cluster.kubectl("create", "namespace", namespace)
    watch = PodWatch(cluster, namespace)
    time.sleep(1)
    created: dict[str, float] = {}
    for i in range(count):
        name = f"p{i}"
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name},
            "spec": {
                "restartPolicy": "Never",
                "terminationGracePeriodSeconds": 0,
                "containers": [{"name": "c", "image": image, "command": ["sleep", "30"]}],
            },
        }
        created[name] = time.monotonic()
        cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(pod))
        wait(lambda name=name: name in watch.running, f"pod {name} running")
    watch.stop()
    summary("pod create -> container running", [watch.running[n] - created[n] for n in created])
    cluster.kubectl("delete", "namespace", namespace, "--wait=false")


def bench_chain(cluster: Cluster, image: str, length: int) -> None:
    namespace = "bench-chain"
    cluster.kubectl("create", "namespace", namespace)
    tasks = [{"id": "t0", "operator": "BashOperator", "args": {"bash_command": "true"}}]
    tasks += [
        {
            "id": f"t{i}",
            "operator": "BashOperator",
            "args": {"bash_command": "true"},
            "dependsOn": [f"t{i - 1}"],
        }
        for i in range(1, length)
    ]
    apply(
        cluster,
        namespace,
        {
            "apiVersion": "zonda.dev/v1alpha1",
            "kind": "DAG",
            "metadata": {"name": "chain"},
            "spec": {"schedule": None, "tasks": tasks},
        },
    )
    watch = PodWatch(cluster, namespace)
    with (
        tempfile.TemporaryDirectory() as tmp,
        controller(cluster, namespace, Path(tmp), extra=["--task-image", image]),
    ):
        started = time.monotonic()
        run = trigger(cluster, namespace, "chain")
        body = wait_run_finished(cluster, namespace, run, timeout=900)
        elapsed = time.monotonic() - started
    time.sleep(1)
    watch.stop()
    print(f"chain of {length}: run {body['status']['state']} in {elapsed:.1f}s")
    pod_of = {task: pod for pod, (_, task) in watch.task_of.items()}
    gaps = [
        watch.running[pod_of[f"t{i}"]] - watch.terminated[pod_of[f"t{i - 1}"]]
        for i in range(1, length)
        if pod_of.get(f"t{i}") in watch.running and pod_of.get(f"t{i - 1}") in watch.terminated
    ]
    summary("upstream done -> downstream running", gaps)
    cluster.kubectl("delete", "namespace", namespace, "--wait=false")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pods", type=int, default=20)
    parser.add_argument("--chain", type=int, default=20)
    args = parser.parse_args()
    print(f"load before: {os.getloadavg()} on {os.cpu_count()} cores")
    cluster = start_local_cluster(real_node=True)
    try:
        node = cluster.real_node
        assert node is not None
        print(
            f"node start (containerd, {len(node.images)} image imports, kubelet Ready): "
            f"{node.started_seconds:.1f}s"
        )
        realnode.cordon_fake_nodes(cluster.kubectl)
        image = node.images[-1]
        bench_pod_start(cluster, image, args.pods)
        bench_chain(cluster, image, args.chain)
    finally:
        cluster.stop()
    print(f"load after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
