"""`inlet_events[asset]` beyond the run's own events, on a real apiserver: a manually triggered run (no
asset event triggered it) reads every AssetEvent of its inlet asset, oldest first, listed by the task
runner itself with the kubeconfig the local executor gives it."""

from __future__ import annotations

import json
from pathlib import Path

from controller.devtools.devcluster import Cluster
from tests.cluster.zonda_processes import apply, controller, trigger, wait_run_finished

URI = "s3://inlets/orders"


def test_a_run_reads_every_event_of_its_inlet_asset_most_recent_last(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    for n, (name, moment) in enumerate(
        [
            ("second", "2026-03-01T00:00:02Z"),
            ("first", "2026-03-01T00:00:01Z"),
            ("third", "2026-03-01T00:00:03Z"),
        ]
    ):
        event = {
            "apiVersion": "zonda.dev/v1alpha1", "kind": "AssetEvent", "metadata": {"name": name},
            "spec": {"uri": URI, "timestamp": moment, "extra": {"name": name, "n": n}},
        }  # fmt: skip
        cluster.kubectl("create", "-n", namespace, "-f", "-", input=json.dumps(event))
    other = {
        "apiVersion": "zonda.dev/v1alpha1", "kind": "AssetEvent", "metadata": {"name": "elsewhere"},
        "spec": {"uri": "s3://inlets/other"},
    }  # fmt: skip
    cluster.kubectl("create", "-n", namespace, "-f", "-", input=json.dumps(other))
    apply(cluster, namespace, {
        "apiVersion": "zonda.dev/v1alpha1", "kind": "DAG", "metadata": {"name": "reader"},
        "spec": {
            "schedule": None,
            "tasks": [{
                "id": "read", "operator": "PythonOperator", "inlets": [{"uri": URI}],
                "args": {"python_callable": "tests.cluster.inlet_callables:read_inlets"},
            }],
        },
    })  # fmt: skip
    with controller(cluster, namespace, tmp_path, executor="local"):
        run = trigger(cluster, namespace, "reader")
        body = wait_run_finished(cluster, namespace, run)
    assert body["status"]["state"] == "success", body["status"]
    assert "triggeringAssetEvents" not in body["spec"] or not body["spec"]["triggeringAssetEvents"]
    xcom = body["status"]["taskInstances"]["read"]["xcom"]
    assert [e["name"] for e in xcom["extras"]] == ["first", "second", "third"], "oldest first, by timestamp"
    assert xcom["last"] == "third" and xcom["by_uri"] == ["first", "second", "third"]
    assert xcom["newest_two"] == ["third", "second"], "after / ascending(False) / limit, as Airflow 3"
