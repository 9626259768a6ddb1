"""Variables and connections from labelled ConfigMaps and Secrets reach a task, its templates and its
pod, on a real apiserver with the controller running as it does in production.

Real: the apiserver (ConfigMaps, Secrets, RBAC-free admin identity), the controller process, the local
executor running BashOperator for real, the Kubernetes executor creating pods on kwok nodes. Not real:
the kubelet (kwok), so for pods the test checks the references it would resolve, not their values.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

from controller.devtools.devcluster import Cluster
from tests.cluster.zonda_processes import apply, controller, trigger, wait_run_finished

PASSWORD = "p@ss/w0rd-never-logged"
TOKEN = "tok-3f9a-never-logged"


def labelled(kind: str, name: str, label: str, data: dict[str, str]) -> dict[str, Any]:
    field = "data" if kind == "ConfigMap" else "stringData"
    return {
        "apiVersion": "v1",
        "kind": kind,
        "metadata": {"name": name, "labels": {label: "true"}},
        field: data,
    }


def create_sources(cluster: Cluster, namespace: str) -> None:
    apply(
        cluster,
        namespace,
        labelled(
            "ConfigMap",
            "team-vars",
            "zonda.dev/variables",
            {"bucket": "s3://sales", "settings": json.dumps({"limit": 7})},
        ),
    )
    apply(cluster, namespace, labelled("Secret", "vault-vars", "zonda.dev/variables", {"api_token": TOKEN}))
    apply(cluster, namespace, labelled("Secret", "warehouse-conns", "zonda.dev/connections", {
        "warehouse": f"postgresql://etl:{quote(PASSWORD, safe='')}@db.example:5433/sales",
        "unnamed": "http://other:secret@elsewhere",
    }))  # fmt: skip
    apply(cluster, namespace, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "unlabelled"},
                               "stringData": {"warehouse": "http://wrong"}})  # fmt: skip


def dag(name: str, task: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "zonda.dev/v1alpha1", "kind": "DAG", "metadata": {"name": name},
            "spec": {"schedule": None, "tasks": [task]}}  # fmt: skip


def test_a_variable_and_a_connection_reach_a_task_and_its_templates(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    create_sources(cluster, namespace)
    command = (
        'echo "{{ var.value.bucket }}|{{ var.json.settings.limit }}|{{ conn.warehouse.host }}:'
        "{{ conn.warehouse.port }}|{{ conn.warehouse.password }}|{{ var.value.api_token }}|"
        '${AIRFLOW_CONN_UNNAMED:-not given}"'
    )
    apply(cluster, namespace, dag("uses-config", {"id": "show", "operator": "BashOperator",
                                                  "args": {"bash_command": command}}))  # fmt: skip
    with controller(cluster, namespace, tmp_path, executor="local") as process:
        run = trigger(cluster, namespace, "uses-config")
        result = wait_run_finished(cluster, namespace, run)
    show = result["status"]["taskInstances"]["show"]
    assert show["state"] == "success", show
    assert show["xcom"] == f"s3://sales|7|db.example:5433|{PASSWORD}|{TOKEN}|not given"
    assert PASSWORD not in process.log() and TOKEN not in process.log()
    # the try's log (the local executor's file, what `zonda logs` shows) masks both, as Airflow's
    # secrets masker does; the XCom above, as Airflow's, is the value (the control that they arrived)
    [task_log] = (tmp_path / "state").glob(f"*/{show['podName']}/log")
    text = task_log.read_text()
    assert "s3://sales|7|db.example:5433|***|***|not given" in text, text
    assert PASSWORD not in text and TOKEN not in text


def test_a_task_pod_references_only_the_secret_keys_its_task_names(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    create_sources(cluster, namespace)
    task = {
        "id": "load",
        "connections": ["warehouse", "missing"],
        "variables": ["api_token"],
        "container": {"image": "busybox", "command": ["sh", "-c", "true"]},
        "podOverride": {"metadata": {"annotations": {"kwok.zonda.dev/duration-ms": "100"}}},
    }
    apply(cluster, namespace, dag("pod-config", task))
    with controller(cluster, namespace, tmp_path) as process:
        run = trigger(cluster, namespace, "pod-config")
        result = wait_run_finished(cluster, namespace, run)
    assert result["status"]["state"] == "success"
    pods = json.loads(cluster.kubectl("get", "pods", "-n", namespace, "-o", "json").stdout)["items"]
    assert len(pods) == 1
    container = pods[0]["spec"]["containers"][0]
    references = {e["name"]: e.get("valueFrom", {}).get("secretKeyRef") for e in container.get("env", [])}
    assert references["AIRFLOW_CONN_WAREHOUSE"] == {"name": "warehouse-conns", "key": "warehouse"}
    assert references["AIRFLOW_VAR_API_TOKEN"] == {"name": "vault-vars", "key": "api_token"}
    assert "AIRFLOW_CONN_UNNAMED" not in references and "AIRFLOW_CONN_MISSING" not in references
    assert container["envFrom"] == [
        {"prefix": "AIRFLOW_VAR_", "configMapRef": {"name": "team-vars", "optional": True}}
    ]
    text = json.dumps(pods[0])
    assert PASSWORD not in text and TOKEN not in text and "s3://sales" not in text
    assert PASSWORD not in process.log() and TOKEN not in process.log()
