"""Params' JSON schema through the real apiserver: `zonda trigger` refuses an invalid conf, and a DagRun
created with kubectl whose conf breaks the schema fails with a message naming the param."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from controller.devtools.devcluster import Cluster
from tests.cluster.zonda_processes import apply, controller, get, wait_run_finished, zonda

DAG: dict[str, Any] = {
    "apiVersion": "zonda.dev/v1alpha1",
    "kind": "DAG",
    "metadata": {"name": "greet"},
    "spec": {
        "schedule": None,
        "params": {"count": 2},
        "paramsSchema": {
            "type": "object",
            "properties": {"count": {"type": "integer", "minimum": 1, "description": "How many"}},
        },
        "tasks": [
            {"id": "hello", "operator": "BashOperator", "args": {"bash_command": "echo {{ params.count }}"}}
        ],
    },
}
MESSAGE = "conf does not match the DAG's params: param 'count': 0 is less than the minimum of 1"


def test_an_invalid_conf_is_refused_by_trigger_and_fails_a_run_created_with_kubectl(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    apply(cluster, namespace, DAG)
    assert get(cluster, namespace, "dag", "greet")["spec"]["paramsSchema"] == DAG["spec"]["paramsSchema"]
    refused = zonda(cluster, "trigger", "greet", "-n", namespace, "--conf", '{"count": 0}', check=False)
    assert refused.returncode != 0 and MESSAGE in refused.stderr, refused
    assert get(cluster, namespace, "dagruns")["items"] == []

    run = {
        "apiVersion": "zonda.dev/v1alpha1",
        "kind": "DagRun",
        "metadata": {"name": "greet-by-hand"},
        "spec": {"dagName": "greet", "runType": "manual", "conf": {"count": 0}},
    }
    apply(cluster, namespace, run)
    with controller(cluster, namespace, tmp_path, executor="local"):
        body = wait_run_finished(cluster, namespace, "greet-by-hand", timeout=60)
    status = body["status"]
    assert status["state"] == "failed" and status["message"] == MESSAGE
    assert not status.get("taskInstances") and "dagSpec" not in status
    [ready] = [c for c in status["conditions"] if c["type"] == "Ready"]
    assert (ready["status"], ready["reason"], ready["message"]) == ("False", "InvalidConf", MESSAGE)
    events = cluster.kubectl(
        "get", "events", "-n", namespace, "--field-selector", "involvedObject.name=greet-by-hand",
        "-o", "jsonpath={range .items[*]}{.reason}={.message}{'\\n'}{end}",
    ).stdout  # fmt: skip
    assert f"InvalidConf={MESSAGE}" in events.splitlines(), events
