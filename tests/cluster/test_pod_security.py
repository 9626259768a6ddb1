"""Every kind of pod Zonda builds for a task passes Pod Security "restricted" as built.

The apiserver's own PodSecurity admission judges them (real here; kwok then runs the pods) in a
namespace that enforces `restricted`: an operator's runner pod (BashOperator), a container task, a
KubernetesPodOperator's pod, a retry's pod, and the callback try the controller launches for a DAG's
`on_failure_callback`. `tests/cluster/test_real_pods.py::test_a_task_pod_passes_pod_security_
restricted` runs the first kind on a real kubelet; the chart's controller, triggerer and UI pods are
`tests/cluster/test_helm_rbac.py::test_pods_meet_the_restricted_pod_security_standard`.

The positive control: in the same namespace a task whose `podOverride` asks for a privileged
container is refused by the same admission, and the user is told so on the run: its try fails with
the apiserver's words and the run ends failed (`zonda.passes.launch_refusals`: a 403 of admission
fails the try, as Airflow's KubernetesExecutor fails the task instance).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from controller.devtools.devcluster import Cluster
from tests.cluster.test_controller import container_task, dag
from tests.cluster.zonda_processes import apply, controller, trigger, wait_for, wait_run_finished
from zonda.resources.names import is_callback_name

TARGETS = "tests.cluster.callback_targets"
#: Over the builder's own securityContext (which forbids escalation: both at once is invalid).
ESCALATES = {"privileged": True, "allowPrivilegeEscalation": True}


def pods_of(cluster: Cluster, namespace: str, run: dict[str, Any]) -> list[dict[str, Any]]:
    selector = f"zonda.dev/dagrun-uid={run['metadata']['uid']}"
    listed = cluster.kubectl("get", "pods", "-n", namespace, "-l", selector, "-o", "json").stdout
    pods: list[dict[str, Any]] = json.loads(listed)["items"]
    return pods


def test_every_kind_of_task_pod_is_admitted_where_restricted_is_enforced(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    cluster.kubectl("label", "namespace", namespace, "pod-security.kubernetes.io/enforce=restricted")
    kinds = dag(
        "kinds",
        [
            {"id": "runner", "operator": "BashOperator", "args": {"bash_command": "true"}},
            container_task("container"),
            {
                "id": "kpo",
                "operator": "KubernetesPodOperator",
                "args": {"image": "busybox", "cmds": ["sh", "-c"], "arguments": ["true"]},
            },
            container_task("fails", exit_code=1, retries=1, retryDelay="1s", dependsOn=["runner"]),
        ],
        onFailureCallback=[f"{TARGETS}:on_dag_failure"],
    )
    privileged = dag(
        "privileged",
        [
            container_task(
                "escalates",
                podOverride={"spec": {"containers": [{"name": "base", "securityContext": ESCALATES}]}},
            )
        ],
    )
    apply(cluster, namespace, kinds)
    apply(cluster, namespace, privileged)
    with controller(cluster, namespace, tmp_path):
        run = wait_run_finished(cluster, namespace, trigger(cluster, namespace, "kinds"), timeout=120)
        wait_for(
            lambda: any(is_callback_name(p["metadata"]["name"]) for p in pods_of(cluster, namespace, run)),
            "the DAG's on_failure_callback try pod",
            timeout=60,
        )
        refused_run = trigger(cluster, namespace, "privileged")
        refused = wait_run_finished(cluster, namespace, refused_run, timeout=120)
    states = {tid: ti["state"] for tid, ti in run["status"]["taskInstances"].items()}
    assert states == {"runner": "success", "container": "success", "kpo": "success", "fails": "failed"}, (
        states
    )
    names = [p["metadata"]["name"] for p in pods_of(cluster, namespace, run)]
    by_task = sorted(
        p["metadata"]["annotations"].get("zonda.dev/task-id", "") for p in pods_of(cluster, namespace, run)
    )
    assert by_task.count("fails") >= 2, f"the retry's pod too: {names}"
    assert {"runner", "container", "kpo"} <= set(by_task), names
    # The positive control: the same admission refused the privileged pod, and its try says so.
    assert not pods_of(cluster, namespace, refused), "no privileged pod was admitted"
    escalates = refused["status"]["taskInstances"]["escalates"]
    assert refused["status"]["state"] == "failed" and escalates["state"] == "failed", escalates
    message = escalates["message"]
    assert "the apiserver refused its pod (403)" in message, message
    assert "is forbidden: violates PodSecurity" in message and "securityContext.privileged=true" in message
    print(f"\nadmitted: {names}\nrefused, its try failed: {message[:400]}")
