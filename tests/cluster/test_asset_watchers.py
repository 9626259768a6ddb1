"""An asset updated by a Kubernetes object meeting a condition (Airflow 3's AssetWatcher), end to end on a
real apiserver: the controller gives the asset a watcher Trigger, the triggerer runs
`ObjectConditionEventTrigger` on a ConfigMap and records an AssetEvent when the ConfigMap's field gets
the value, the consumer DAG runs once. Then the triggerer is SIGKILLed and another takes the shard
over: it sees the same state, names the same event, gets 409, and nothing runs again. Counts come
from the apiserver.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

from controller.devtools.devcluster import Cluster
from tests.cluster.zonda_processes import (
    apply,
    controller,
    get,
    runs_of,
    triggerer,
    wait_for,
    wait_run_finished,
)

URI = "s3://watched/flag"


def consumer(namespace: str) -> dict[str, Any]:
    watcher = {
        "name": "flag-ready",
        "classpath": "controller.providers.kubernetes.triggers.ObjectConditionEventTrigger",
        "kwargs": {
            "api_version": "v1",
            "kind": "ConfigMap",
            "name": "flag",
            "namespace": namespace,
            "field_path": "data.ready",
            "value": "true",
            "poll_interval": 0.5,
        },
    }
    return {
        "apiVersion": "zonda.dev/v1alpha1",
        "kind": "DAG",
        "metadata": {"name": "on-flag"},
        "spec": {
            "assetSchedule": {"uri": URI, "watchers": [watcher]},
            "tasks": [{"id": "report", "operator": "EmptyOperator"}],
        },
    }


def watched_events(cluster: Cluster, namespace: str) -> list[dict[str, Any]]:
    return [e for e in get(cluster, namespace, "assetevents")["items"] if e["spec"]["uri"] == URI]


def set_flag(cluster: Cluster, namespace: str, ready: str) -> None:
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "flag"}, "data": {"ready": ready}}
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(body))


def test_a_configmap_meeting_the_condition_runs_the_consumer_once_across_a_triggerer_failover(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    set_flag(cluster, namespace, "false")
    apply(cluster, namespace, consumer(namespace))
    with (
        controller(cluster, namespace, tmp_path, executor="local"),
        triggerer(cluster, namespace, tmp_path, identity="watch-a") as first,
    ):
        trigger = wait_for(
            lambda: next(iter(get(cluster, namespace, "triggers")["items"]), None),
            "the asset's watcher Trigger",
        )
        assert trigger["spec"]["asset"] == {"uri": URI, "watcher": "flag-ready"}
        name = trigger["metadata"]["name"]
        wait_for(lambda: f"/{name} started" in first.log(), "the triggerer to run it")
        set_flag(cluster, namespace, "true")
        run = wait_for(lambda: runs_of(cluster, namespace, "on-flag"), "the consumer's run")[0]
        [event] = watched_events(cluster, namespace)
        assert event["spec"]["extra"]["from_trigger"] is True
        assert event["spec"]["extra"]["payload"]["value"] == "true"
        assert event["spec"]["sourceWatcher"] == name
        assert [e["name"] for e in run["spec"]["triggeringAssetEvents"]] == [event["metadata"]["name"]]
        assert wait_run_finished(cluster, namespace, run["metadata"]["name"])["status"]["state"] == "success"
        first.stop(signal.SIGKILL)
        with triggerer(cluster, namespace, tmp_path, identity="watch-b") as second:
            # the positive signal: the new holder ran the watcher and its event was the one recorded
            wait_for(
                lambda: f"Asset event {event['metadata']['name']} of watcher" in second.log(),
                "the new triggerer to replay the event and get 409",
                timeout=90,
            )
    assert len(watched_events(cluster, namespace)) == 1, "one AssetEvent for one state of the ConfigMap"
    assert len(runs_of(cluster, namespace, "on-flag")) == 1, "one consumer run"
