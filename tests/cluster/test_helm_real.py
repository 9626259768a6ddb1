"""The Helm chart running for real: `helm install` of helm/zonda with the image just built, on the
real node. The controller and the triggerer are pods with the chart's ServiceAccounts and in-cluster
config (the `kubernetes` Service's ClusterIP, through kube-proxy), elect their leader and hold their
shards through Leases, pass their readiness probes, and run a DAG applied with kubectl as real task
pods; `helm upgrade` rolls them while a task runs, and `helm uninstall` leaves the CRDs and the
user's DAGs and DagRuns.

The tests share one release and run in file order (install, run, upgrade, uninstall), as a user
would. Nothing is skipped: if the node cannot start, they error with the piece that failed.
"""

from __future__ import annotations

import json
import re
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from controller.devtools import realnode
from controller.devtools.devcluster import Cluster
from tests.cluster.test_controller import dag
from tests.cluster.test_helm_rbac import CHART, run_helm
from tests.cluster.test_real_pods import bash
from tests.cluster.zonda_processes import (
    apply,
    get,
    load_example,
    release_task_pods,
    ti_states,
    trigger,
    wait_for,
    wait_run_finished,
)

RELEASE = "zonda"
REAL = dict([realnode.NODE_LABEL])
#: Probed often, so Ready follows /readyz closely (the chart's default waits 5 s, then every 10 s).
PROBE = {"initialDelaySeconds": 1, "periodSeconds": 2}


@dataclass
class Release:
    cluster: Cluster
    namespace: str
    values: dict[str, Any]
    install_seconds: float = 0.0
    uninstalled: bool = False

    def helm(self, *args: str, values: dict[str, Any] | None = None) -> None:
        result = run_helm(self.cluster, *args, "--namespace", self.namespace, values=values)
        assert result.returncode == 0, f"helm {' '.join(args)}: {result.stderr}"

    def pods(self, component: str) -> list[dict[str, Any]]:
        selector = f"app.kubernetes.io/instance={RELEASE},app.kubernetes.io/component={component}"
        listed = self.cluster.kubectl("get", "pods", "-n", self.namespace, "-l", selector, "-o", "json")
        return [p for p in json.loads(listed.stdout)["items"] if not p["metadata"].get("deletionTimestamp")]

    def task_pods(self, task_id: str) -> list[dict[str, Any]]:
        return [
            p
            for p in get(self.cluster, self.namespace, "pods")["items"]
            if p["metadata"].get("annotations", {}).get("zonda.dev/task-id") == task_id
        ]


def chart_values(cluster: Cluster) -> dict[str, Any]:
    """The chart with the image built from this tree, never pulled, every pod on the real node."""
    assert cluster.real_node is not None
    image = next(i for i in cluster.real_node.images if i.rsplit("/", 1)[-1].startswith("zonda:"))
    repository, tag = image.rsplit(":", 1)
    return {
        "image": {"repository": repository, "tag": tag, "pullPolicy": "Never"},
        "controller": {"nodeSelector": REAL, "readinessProbe": PROBE},
        "triggerer": {"nodeSelector": REAL, "readinessProbe": PROBE},
        "taskPods": {"nodeSelector": REAL},
        "ui": {"enabled": False},
    }


@pytest.fixture(scope="module")
def release(real_cluster: Cluster) -> Iterator[Release]:
    namespace = f"t-helm-real-{uuid.uuid4().hex[:8]}"
    real_cluster.kubectl("create", "namespace", namespace)
    installed = Release(real_cluster, namespace, chart_values(real_cluster))
    try:
        t0 = time.monotonic()
        # The CRDs are already in the cluster (the fixture's); helm leaves existing CRDs as they are.
        installed.helm("install", RELEASE, str(CHART), "--wait", "--timeout", "5m", values=installed.values)
        installed.install_seconds = time.monotonic() - t0
        yield installed
    finally:
        if not installed.uninstalled:
            run_helm(real_cluster, "uninstall", RELEASE, "--namespace", namespace, "--wait")
        release_task_pods(real_cluster, namespace)  # no controller left to release them
        real_cluster.kubectl("delete", "namespace", namespace, "--wait=false", check=False)


def ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def readyz(pod: dict[str, Any]) -> str:
    """The pod's /readyz, fetched from this host through the node's bridge (as the kubelet probes it)."""
    url = f"http://{pod['status']['podIP']}:8081/readyz"
    with urllib.request.urlopen(url, timeout=5) as response:
        return str(response.read().decode())


def lease_holder(release: Release, name: str) -> str:
    lease = get(release.cluster, release.namespace, "lease", name)
    return str(lease["spec"].get("holderIdentity") or "")


def test_helm_install_runs_the_controller_and_the_triggerer_as_ready_pods_on_the_real_node(
    release: Release,
) -> None:
    for component, account in (("controller", "zonda-controller"), ("triggerer", "zonda-triggerer")):
        (pod,) = release.pods(component)
        assert pod["spec"]["nodeName"] == realnode.NODE_NAME
        assert pod["spec"]["serviceAccountName"] == account
        assert ready(pod), pod["status"]
        container = pod["spec"]["containers"][0]
        assert not any("kubeconfig" in arg for arg in container["args"]), "in-cluster config only"
        assert pod["status"]["containerStatuses"][0]["restartCount"] == 0, f"{component} restarted"
        logs = release.cluster.kubectl("logs", "-n", release.namespace, pod["metadata"]["name"]).stdout
        # a 403 as a status code, not inside a timestamp's digits (CI: "08:04:20.540385" matched)
        assert not re.search(r"\b403\b", logs) and "Forbidden" not in logs, logs[-2000:]
    (controller,) = release.pods("controller")
    # The leader: the Lease named by --peering (the release's full name) is held by this pod.
    wait_for(
        lambda: lease_holder(release, RELEASE).startswith(controller["metadata"]["name"]),
        "the controller pod to lead",
        timeout=60,
    )
    assert readyz(controller) == "ok: leading\n"
    (triggerer,) = release.pods("triggerer")
    assert readyz(triggerer).startswith("ok: 1 shards")
    assert lease_holder(release, "zonda-triggerer-shard-0") == triggerer["metadata"]["name"]


def test_a_dag_applied_with_kubectl_runs_to_success_as_real_task_pods(release: Release) -> None:
    ns = release.namespace
    apply(
        release.cluster,
        ns,
        dag(
            "hello",
            [
                bash("hello", "echo hello from a pod"),
                bash("after", "echo after", dependsOn=["hello"]),
            ],
        ),
    )
    deferrable = load_example("example_deferrable")
    # Counted from the trigger time: a real pod must start and defer before it passes (else the sensor
    # succeeds at once and deferralCount is 0), which 5 s did not leave a loaded machine.
    deferrable["spec"]["tasks"][1]["args"]["delta"] = "20s"
    apply(release.cluster, ns, deferrable)
    runs = [trigger(release.cluster, ns, "hello"), trigger(release.cluster, ns, "example-deferrable")]
    bodies = [wait_run_finished(release.cluster, ns, run, timeout=240) for run in runs]
    assert ti_states(bodies[0]) == {"hello": "success", "after": "success"}, bodies[0]["status"]
    # The deferred sensor was resumed by the triggerer pod's trigger firing.
    assert ti_states(bodies[1]) == {"start": "success", "wait": "success", "done": "success"}
    assert bodies[1]["status"]["taskInstances"]["wait"]["deferralCount"] == 1
    (pod,) = release.task_pods("hello")
    assert pod["spec"]["nodeName"] == realnode.NODE_NAME and pod["spec"]["serviceAccountName"] == "zonda-task"
    assert "hello from a pod" in release.cluster.kubectl("logs", "-n", ns, pod["metadata"]["name"]).stdout


def test_helm_upgrade_rolls_the_pods_while_a_task_runs_and_no_run_or_task_is_lost_or_repeated(
    release: Release,
) -> None:
    ns = release.namespace
    apply(
        release.cluster,
        ns,
        dag(
            "across",
            [
                bash("long", "echo try {{ ti.try_number }}; sleep 25; echo slept"),
                bash("after", "echo after", dependsOn=["long"]),
            ],
        ),
    )
    before = {c: release.pods(c)[0]["metadata"]["name"] for c in ("controller", "triggerer")}
    run = trigger(release.cluster, ns, "across")

    def long_running() -> bool:
        return any(
            "running" in (s.get("state") or {})
            for p in release.task_pods("long")
            for s in p["status"].get("containerStatuses") or []
        )

    wait_for(long_running, "the long task's container to run", timeout=120)
    # A changed value: both Deployments' pod templates change, so both roll.
    release.values["logging"] = {"format": "text"}
    release.helm("upgrade", RELEASE, str(CHART), "--wait", "--timeout", "5m", values=release.values)
    after = {c: [p["metadata"]["name"] for p in release.pods(c)] for c in ("controller", "triggerer")}
    wait_for(
        lambda: all(before[c] not in [p["metadata"]["name"] for p in release.pods(c)] for c in before),
        "the old pods to be gone",
        timeout=120,
    )
    after = {c: [p["metadata"]["name"] for p in release.pods(c)] for c in ("controller", "triggerer")}
    assert all(len(names) == 1 and names[0] != before[c] for c, names in after.items()), (before, after)
    assert "--log-format=text" in release.pods("controller")[0]["spec"]["containers"][0]["args"]
    body = wait_run_finished(release.cluster, ns, run, timeout=240)
    assert ti_states(body) == {"long": "success", "after": "success"}, body["status"]
    assert body["status"]["taskInstances"]["long"]["tryNumber"] == 1, "the task ran once"
    assert len(release.task_pods("long")) == 1, "one pod: the new controller adopted the running one"
    wait_for(
        lambda: lease_holder(release, RELEASE).startswith(after["controller"][0]),
        "the new controller pod to lead",
        timeout=60,
    )
    assert len(get(release.cluster, ns, "dagruns")["items"]) == 3, "no run lost or added by the upgrade"


def test_helm_uninstall_leaves_the_crds_and_the_users_dags_and_runs(release: Release) -> None:
    ns = release.namespace
    dags_before = {d["metadata"]["name"] for d in get(release.cluster, ns, "dags")["items"]}
    runs_before = {r["metadata"]["name"] for r in get(release.cluster, ns, "dagruns")["items"]}
    assert dags_before and runs_before
    release.helm("uninstall", RELEASE, "--wait", "--timeout", "2m")
    release.uninstalled = True
    assert get(release.cluster, ns, "deployments")["items"] == []
    wait_for(lambda: not release.pods("controller") and not release.pods("triggerer"), "the pods to go")
    for crd in ("dags.zonda.dev", "dagruns.zonda.dev", "triggers.zonda.dev", "backfills.zonda.dev"):
        release.cluster.kubectl("get", "crd", crd)
    assert {d["metadata"]["name"] for d in get(release.cluster, ns, "dags")["items"]} == dags_before
    assert {r["metadata"]["name"] for r in get(release.cluster, ns, "dagruns")["items"]} == runs_before
