"""The issue's template, in a real try: `echo {{ 'a' * 10**9 }}` fails its try at once with a message
naming the field and the limit (it took 67 s of CPU and 3 GB before bash refused it), and the run
carries that message where the user looks.

Real: the apiserver, the controller process, the local executor running the task runner.
"""

from __future__ import annotations

from pathlib import Path

from controller.devtools.devcluster import Cluster
from tests.cluster.zonda_processes import apply, controller, trigger, wait_run_finished

DAG = {
    "apiVersion": "zonda.dev/v1alpha1",
    "kind": "DAG",
    "metadata": {"name": "huge-template"},
    "spec": {
        "schedule": None,
        "tasks": [
            {"id": "huge", "operator": "BashOperator", "args": {"bash_command": "echo {{ 'a' * 10**9 }}"}}
        ],
    },
}


def test_a_template_past_the_size_limit_fails_the_try_naming_the_field_and_the_limit(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    apply(cluster, namespace, DAG)
    with controller(cluster, namespace, tmp_path, executor="local"):
        run = trigger(cluster, namespace, "huge-template")
        body = wait_run_finished(cluster, namespace, run, timeout=120)
    ti = body["status"]["taskInstances"]["huge"]
    assert ti["state"] == "failed", ti
    message = ti.get("reason") or ""
    assert "cannot render bash_command" in message, ti
    assert "limit of 4000000 characters per template (ZONDA_TEMPLATE_MAX_CHARS)" in message, ti
