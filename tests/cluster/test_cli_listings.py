"""Airflow's everyday CLI as tables, against a real apiserver: `zonda dags list|pause|unpause|next-runs|
delete`, `zonda runs list`, `zonda tasks states`. The controller (kwok pods) produces a real run."""

from __future__ import annotations

from pathlib import Path

from controller.devtools.devcluster import Cluster
from tests.cluster.zonda_processes import apply, controller, get, trigger, wait_run_finished, zonda

DAG = {
    "apiVersion": "zonda.dev/v1alpha1",
    "kind": "DAG",
    "metadata": {"name": "nightly"},
    "spec": {
        "schedule": "0 2 * * *",
        "startDate": "2024-01-01T00:00:00Z",
        "catchup": False,
        "paused": True,
        "tags": ["etl"],
        "tasks": [
            {"id": "extract", "container": {"image": "busybox", "command": ["true"]}},
            {"id": "load", "dependsOn": ["extract"], "container": {"image": "busybox", "command": ["true"]}},
        ],
    },
}


def test_the_cli_lists_pauses_predicts_and_deletes(cluster: Cluster, namespace: str, tmp_path: Path) -> None:
    apply(cluster, namespace, DAG)
    ns = ["-n", namespace]
    with controller(cluster, namespace, tmp_path):
        run = trigger(cluster, namespace, "nightly")
        wait_run_finished(cluster, namespace, run)
    listed = zonda(cluster, "dags", "list", *ns).stdout.splitlines()
    assert listed[0].split()[:3] == ["DAG", "SCHEDULE", "PAUSED"]
    assert listed[1].split()[:3] == ["nightly", "0", "2"] and "True" in listed[1] and "etl" in listed[1]

    assert "unpaused" in zonda(cluster, "dags", "unpause", "nightly", *ns).stdout
    assert get(cluster, namespace, "dag", "nightly")["spec"]["paused"] is False
    zonda(cluster, "dags", "pause", "nightly", *ns)
    assert get(cluster, namespace, "dag", "nightly")["spec"]["paused"] is True

    upcoming = zonda(cluster, "dags", "next-runs", "nightly", "--count", "3", *ns).stdout.splitlines()
    assert upcoming[0].split()[:2] == ["LOGICAL", "DATE"] and len(upcoming) == 4
    assert all("T02:00:00+00:00" in line for line in upcoming[1:])

    runs = zonda(cluster, "runs", "list", "nightly", *ns).stdout.splitlines()
    assert runs[1].split()[:3] == [run, "success", "manual"]

    states = zonda(cluster, "tasks", "states", run, *ns).stdout.splitlines()
    assert [line.split()[:2] for line in states[1:]] == [["extract", "success"], ["load", "success"]]

    missing = zonda(cluster, "tasks", "states", "nope", *ns, check=False)
    assert missing.returncode != 0 and "DagRun 'nope' not found" in missing.stderr

    deleted = zonda(cluster, "dags", "delete", "nightly", "--yes", *ns).stdout
    assert "deleted with 1 run(s)" in deleted
    assert get(cluster, namespace, "dagruns")["items"] == []
