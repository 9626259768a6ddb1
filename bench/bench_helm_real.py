"""Benchmark: the Helm chart on the local control plane's real node.

    python bench/bench_helm_real.py [--restarts 5]

Starts the local control plane with a real node (cached node pieces and image, or built), then:

- helm install -> controller Ready: `helm install` of helm/zonda with the image just built
  (imagePullPolicy Never, every pod on the real node) until the controller pod's Ready condition
  (its readiness probe on /readyz passed), and until `helm install --wait` returns;
- controller pod restart -> first reconcile, `--restarts` times: the controller pod is deleted
  and, while it is gone, a DagRun is created; timed from the delete call to the run's first status
  write (the new pod started, took the leader Lease and reconciled). The old pod releases its
  Lease on SIGTERM, so no Lease expiry is waited out.

It prints numbers and the machine's load; it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from controller.devtools.devcluster import Cluster, start_local_cluster
from tests.cluster.test_helm_rbac import CHART, run_helm
from tests.cluster.test_helm_real import RELEASE, chart_values
from tests.cluster.zonda_processes import apply, get, trigger

DAG = {
    "apiVersion": "zonda.dev/v1alpha1",
    "kind": "DAG",
    "metadata": {"name": "noop"},
    "spec": {
        "schedule": None,
        "tasks": [{"id": "t", "operator": "BashOperator", "args": {"bash_command": "true"}}],
    },
}


def controller_pods(cluster: Cluster, namespace: str) -> list[dict[str, Any]]:
    selector = f"app.kubernetes.io/instance={RELEASE},app.kubernetes.io/component=controller"
    listed = cluster.kubectl("get", "pods", "-n", namespace, "-l", selector, "-o", "json").stdout
    return [p for p in json.loads(listed)["items"] if not p["metadata"].get("deletionTimestamp")]


def is_ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def wait(predicate: Any, timeout: float = 300) -> float:
    """Seconds until `predicate()` holds (polled every 0.1 s)."""
    t0 = time.monotonic()
    while not predicate():
        if time.monotonic() - t0 > timeout:
            raise TimeoutError("condition not met")
        time.sleep(0.1)
    return time.monotonic() - t0


def bench_install(cluster: Cluster, namespace: str) -> None:
    values = chart_values(cluster)
    t0 = time.monotonic()
    installed = run_helm(cluster, "install", RELEASE, str(CHART), "--namespace", namespace, values=values)
    assert installed.returncode == 0, installed.stderr
    submitted = time.monotonic() - t0
    ready = submitted + wait(lambda: any(is_ready(p) for p in controller_pods(cluster, namespace)))
    waited = run_helm(
        cluster, "upgrade", RELEASE, str(CHART), "--namespace", namespace, "--reuse-values", "--wait"
    )
    assert waited.returncode == 0, waited.stderr
    everything = time.monotonic() - t0
    print(
        f"helm install: submitted {submitted:.1f}s, controller Ready {ready:.1f}s, all Deployments "
        f"available {everything:.1f}s"
    )


def bench_restarts(cluster: Cluster, namespace: str, restarts: int) -> None:
    apply(cluster, namespace, DAG)
    samples = []
    for _ in range(restarts):
        (old,) = controller_pods(cluster, namespace)
        t0 = time.monotonic()
        cluster.kubectl("delete", "pod", old["metadata"]["name"], "-n", namespace, "--wait=false")
        run = trigger(cluster, namespace, "noop")
        wait(lambda run=run: bool((get(cluster, namespace, "dagrun", run).get("status") or {}).get("state")))
        samples.append(time.monotonic() - t0)
        wait(lambda: any(is_ready(p) for p in controller_pods(cluster, namespace)))
    print(
        f"controller pod restart -> first reconcile ({restarts}x): p50 {statistics.median(samples):.1f}s, "
        f"max {max(samples):.1f}s ({', '.join(f'{s:.1f}' for s in samples)})"
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--restarts", type=int, default=5)
    args = parser.parse_args()
    print(f"load before: {os.getloadavg()} on {os.cpu_count()} cores")
    cluster = start_local_cluster(real_node=True)
    namespace = f"bench-helm-{uuid.uuid4().hex[:6]}"
    try:
        assert cluster.real_node is not None
        print(f"node start: {cluster.real_node.started_seconds:.1f}s")
        cluster.kubectl("create", "namespace", namespace)
        bench_install(cluster, namespace)
        bench_restarts(cluster, namespace, args.restarts)
        run_helm(cluster, "uninstall", RELEASE, "--namespace", namespace, "--wait")
    finally:
        cluster.stop()
    print(f"load after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
