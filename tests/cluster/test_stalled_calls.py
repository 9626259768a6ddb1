"""A request the apiserver (or the network) accepts and never answers: the controller's calls are
bounded (`controller.kube.timeouts`, and the Lease calls' own bound in `controller.coordination.leases`),
so a stalled call fails, is retried by the loop that made it, and the work goes on.

The fault proxy (`tests/cluster/fault_proxy.py`) sits between the controller and the apiserver and
holds chosen requests for longer than the test lasts (accepted, never answered, as a half-open TCP
connection after a node or load balancer died, or a proxy that stopped forwarding). Without the bounds
a Lease renewal held so stopped the leader's renewals for good, and a pass whose status write was held
kept its run's key busy for good: the run never finished (tests/unit/controller/kube/
test_request_timeouts.py shows the unbounded client waiting on such a server).

Real: the apiserver, etcd, kwok's node running the pods, the controller process (with a 2 s bound on
ordinary calls, `$ZONDA_API_TIMEOUT_SECONDS`, and a 3 s Lease: its calls bounded at 1 s).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from controller.devtools.devcluster import ADMIN_TOKEN, Cluster
from tests.cluster.test_faults import identity, pod_task, proxy_for
from tests.cluster.zonda_processes import apply, controller, trigger, wait_for, wait_run_finished

LEASE = "zonda-stall-leader"
DAG = "stalls"
#: Longer than the test: a stalled request is never answered while it runs (the proxy ends it on exit).
NEVER = 3600.0


def lease_spec(cluster: Cluster, namespace: str) -> dict[str, Any]:
    """The Lease's spec as the apiserver has it ({} before it exists)."""
    found = cluster.kubectl("get", "lease", LEASE, "-n", namespace, "-o", "json", check=False)
    spec: dict[str, Any] = (json.loads(found.stdout).get("spec") or {}) if found.returncode == 0 else {}
    return spec


def held_status_write(method: str, path: str) -> bool:
    return method == "PUT" and "/dagruns/" in path and path.endswith("/status")


def test_a_stalled_lease_renewal_and_a_stalled_status_write_are_retried_not_waited_for(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    apply(cluster, namespace, {
        "apiVersion": "zonda.dev/v1alpha1", "kind": "DAG", "metadata": {"name": DAG},
        "spec": {"tasks": [pod_task("a", [], 200), pod_task("b", ["a"], 200)]},
    })  # fmt: skip
    with proxy_for(cluster) as proxy:
        proxy.stall_seconds = NEVER
        kubeconfig = str(proxy.kubeconfig(tmp_path / "proxied", ADMIN_TOKEN))
        with controller(
            cluster,
            namespace,
            tmp_path,
            extra=["--kubeconfig", kubeconfig, "--peering", LEASE, "--peering-lease-duration", "3"],
            env={"ZONDA_API_TIMEOUT_SECONDS": "2"},
        ) as process:
            me = identity(process)
            wait_for(
                lambda: lease_spec(cluster, namespace).get("holderIdentity") == me, "the controller to lead"
            )

            # A Lease call held: the next round renews anyway (its call cut off at 1 s).
            proxy.hurt("stall", 1, where=lambda method, path: f"/leases/{LEASE}" in path)
            wait_for(lambda: proxy.stalling == 1, "a Lease call of the controller held by the proxy")
            held_at = lease_spec(cluster, namespace).get("renewTime")
            renewed = wait_for(
                lambda: (spec := lease_spec(cluster, namespace)).get("renewTime") != held_at and spec,
                "the Lease renewed after its held call",
                timeout=30,
            )
            assert renewed["holderIdentity"] == me
            assert proxy.stalling == 1, "the held Lease call was answered: it proved nothing"

            # A run's status write held: the pass fails at 2 s, the run's key is retried, the run ends.
            proxy.hurt("stall", 1, where=held_status_write)
            run = trigger(cluster, namespace, DAG)
            wait_for(lambda: proxy.stalling == 2, "a status write of the run held by the proxy")
            started = time.monotonic()
            finished = wait_run_finished(cluster, namespace, run, timeout=60)
            took = time.monotonic() - started
            assert finished["status"]["state"] == "success"
            assert proxy.stalling == 2, "a held call was answered: the run did not finish around it"
            print(
                f"\nthe run finished {took:.1f}s after its status write was held; held now: {proxy.stalling}"
            )
            held = [(r.method, r.path.rsplit("/", 2)[-2:]) for r in proxy.requests if r.fault == "stall"]
            assert held[1] == ("PUT", [run, "status"]), held
