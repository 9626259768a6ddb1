"""An asset updated by a Kubernetes object meeting a condition (Airflow 3's AssetWatcher), end to end on a
real apiserver: the controller gives the asset a watcher Trigger, the triggerer runs
`ObjectConditionEventTrigger` on a ConfigMap and records an AssetEvent when the ConfigMap's field gets
the value, the consumer DAG runs once. Then the triggerer is SIGKILLed and another takes the shard
over: it sees the same state, names the same event, gets 409, and nothing runs again. Counts come
from the apiserver. A real Job completing, and the file-delete watchers, are here too.
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


def test_a_custom_resource_becoming_ready_is_one_event_and_again_after_it_was_not_ready(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    """The watched object is a custom resource with conditions: a Zonda DAG, whose Ready condition the
    controller writes (False while paused). Each transition to Ready=True is one event, one run."""
    uri = "s3://watched/upstream"
    watcher = {
        "name": "upstream-ready",
        "classpath": "controller.providers.kubernetes.triggers.ObjectConditionEventTrigger",
        "kwargs": {
            "api_version": "zonda.dev/v1alpha1",
            "kind": "DAG",
            "name": "upstream",
            "namespace": namespace,
            "condition": "Ready",
            "poll_interval": 0.5,
        },
    }
    on_ready = consumer(namespace)
    on_ready["metadata"]["name"] = "on-upstream"
    on_ready["spec"]["assetSchedule"] = {"uri": uri, "watchers": [watcher]}
    upstream = {
        "apiVersion": "zonda.dev/v1alpha1",
        "kind": "DAG",
        "metadata": {"name": "upstream"},
        "spec": {"tasks": [{"id": "t", "operator": "EmptyOperator"}]},
    }
    apply(cluster, namespace, on_ready)

    def ready(status: str) -> dict[str, Any] | None:
        conditions = (get(cluster, namespace, "dag", "upstream").get("status") or {}).get("conditions") or []
        return next((c for c in conditions if c["type"] == "Ready" and c["status"] == status), None)

    def events() -> list[dict[str, Any]]:
        return [e for e in get(cluster, namespace, "assetevents")["items"] if e["spec"]["uri"] == uri]

    with (
        controller(cluster, namespace, tmp_path, executor="local"),
        triggerer(cluster, namespace, tmp_path, identity="watch-c") as running,
    ):
        wait_for(lambda: "started for s3://watched/upstream" in running.log(), "the watcher to run")
        apply(cluster, namespace, upstream)
        first = wait_for(lambda: ready("True"), "the upstream DAG to be Ready")
        wait_for(lambda: runs_of(cluster, namespace, "on-upstream"), "the consumer's first run")
        [event] = events()
        assert event["spec"]["extra"]["payload"]["lastTransitionTime"] == first["lastTransitionTime"]
        cluster.kubectl(
            "patch", "dag", "upstream", "-n", namespace, "--type=merge", "-p", '{"spec":{"paused":true}}'
        )
        wait_for(lambda: ready("False"), "the paused DAG not Ready")
        cluster.kubectl(
            "patch", "dag", "upstream", "-n", namespace, "--type=merge", "-p", '{"spec":{"paused":false}}'
        )
        again = wait_for(lambda: ready("True"), "the DAG Ready again")
        assert again["lastTransitionTime"] != first["lastTransitionTime"]
        wait_for(lambda: len(runs_of(cluster, namespace, "on-upstream")) == 2, "the consumer's second run")
        wait_for(lambda: len(events()) == 2, "two events")
        wait_for(lambda: running.log().count("Recorded asset event") >= 2, "both recorded by the triggerer")
    assert len(events()) == 2
    assert len(runs_of(cluster, namespace, "on-upstream")) == 2


def test_file_delete_watchers_record_one_event_per_file_and_each_runs_the_consumer_once(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    """Airflow 3's `example_asset_with_watchers`, with its paths under the test's directory: a
    `FileDeleteTrigger` and two `DirectoryFileDeleteTrigger`s on one directory. Each file is deleted
    and recorded once (Airflow's payload, `True` or the path, is the same for every file: the file's
    identity tells them apart), and every event is in exactly one consumer run."""
    single, inbox = tmp_path / "test", tmp_path / "region-flags"
    inbox.mkdir()

    def watched(uri: str, name: str, classpath: str, **kwargs: Any) -> dict[str, Any]:
        trigger = {"name": name, "classpath": f"zonda.triggers.file.{classpath}", "kwargs": kwargs}
        return {"uri": uri, "watchers": [trigger]}

    schedule = {
        "any": [
            watched("example_asset", "test_asset_watcher", "FileDeleteTrigger", filepath=str(single),
                    poke_interval=0.5),
            *(
                watched(f"region_{region}_flag", f"{region}_flag_watcher", "DirectoryFileDeleteTrigger",
                        directory=str(inbox), filename=f"{region}.flag", poke_interval=0.5)
                for region in ("us", "eu")
            ),
        ]
    }  # fmt: skip
    dag = consumer(namespace)
    dag["metadata"]["name"] = "on-files"
    dag["spec"]["assetSchedule"] = schedule
    apply(cluster, namespace, dag)

    def events(uri: str) -> list[dict[str, Any]]:
        return [e for e in get(cluster, namespace, "assetevents")["items"] if e["spec"]["uri"] == uri]

    with (
        controller(cluster, namespace, tmp_path, executor="local"),
        triggerer(cluster, namespace, tmp_path, identity="watch-files") as running,
    ):
        for uri in ("example_asset", "region_us_flag", "region_eu_flag"):
            wait_for(lambda uri=uri: f"started for {uri}" in running.log(), f"the watcher of {uri}")  # type: ignore[misc]
        for n in (1, 2, 3):
            single.write_text(f"file {n}")
            wait_for(lambda n=n: len(events("example_asset")) == n, f"file {n}'s AssetEvent")  # type: ignore[misc]
            assert not single.exists(), "the watcher deleted the file it reported"
        (inbox / "us.flag").write_text("us")
        [us] = wait_for(lambda: events("region_us_flag") or None, "us.flag's AssetEvent")
        assert us["spec"]["extra"] == {"from_trigger": True, "payload": {"filepath": str(inbox / "us.flag")}}
        assert events("region_eu_flag") == [] and list(inbox.iterdir()) == []
        (inbox / "eu.flag").write_text("eu")
        wait_for(lambda: events("region_eu_flag") or None, "eu.flag's AssetEvent")
        recorded = [e["metadata"]["name"] for uri in ("example_asset", "region_us_flag", "region_eu_flag")
                    for e in events(uri)]  # fmt: skip

        def consumed() -> list[str]:
            runs = runs_of(cluster, namespace, "on-files")
            return [e["name"] for run in runs for e in run["spec"].get("triggeringAssetEvents") or []]

        wait_for(lambda: sorted(consumed()) == sorted(recorded), "every event in a consumer run")
        assert running.log().count("Recorded asset event") == 5
        assert "was already recorded" not in running.log()
    payloads = [e["spec"]["extra"]["payload"] for e in events("example_asset")]
    assert payloads == [True, True, True], "Airflow's payload, one AssetEvent per file"
    assert len(set(recorded)) == 5
    assert sorted(consumed()) == sorted(recorded), "each event in exactly one run"


def test_a_job_completing_updates_the_asset_once_seen_by_a_watcher_live_before_it_completed(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    """A real Job (the controller-manager's job controller, its pod on a kwok node) held running until
    the watcher is proven live: a second watcher on the same Job, for `status.ready` 1, records its
    event while the Job runs (the triggerer reads this Job, not complete). Then the pod is let go, the
    Job completes, and the `Complete` watcher records one AssetEvent naming the Job's uid and the
    condition's transition, and the consumer runs once. Counts from the apiserver."""
    done_uri, running_uri = "s3://jobs/etl-output", "s3://jobs/etl-running"

    def watching(dag_name: str, uri: str, watcher: str, **wait: Any) -> dict[str, Any]:
        trigger = {
            "name": watcher,
            "classpath": "controller.providers.kubernetes.triggers.ObjectConditionEventTrigger",
            "kwargs": {"api_version": "batch/v1", "kind": "Job", "name": "etl", "namespace": namespace,
                       "poll_interval": 0.5, **wait},
        }  # fmt: skip
        dag = consumer(namespace)
        dag["metadata"]["name"] = dag_name
        dag["spec"]["assetSchedule"] = {"uri": uri, "watchers": [trigger]}
        return dag

    apply(cluster, namespace, watching("on-etl", done_uri, "etl-done", condition="Complete"))
    apply(cluster, namespace, watching("on-etl-running", running_uri, "etl-running",
                                       field_path="status.ready", value=1))  # fmt: skip
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "etl"},
        "spec": {
            "backoffLimit": 0,
            "template": {
                # kwok runs the pod until this is removed (controller/devtools/data/kwok-stages.yaml)
                "metadata": {"annotations": {"kwok.zonda.dev/hold": "true"}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "etl", "image": "busybox"}]},
            },
        },
    }

    def events(uri: str) -> list[dict[str, Any]]:
        return [e for e in get(cluster, namespace, "assetevents")["items"] if e["spec"]["uri"] == uri]

    def complete() -> dict[str, Any] | None:
        conditions = (get(cluster, namespace, "job", "etl").get("status") or {}).get("conditions") or []
        return next((c for c in conditions if c["type"] == "Complete" and c["status"] == "True"), None)

    with (
        controller(cluster, namespace, tmp_path, executor="local"),
        triggerer(cluster, namespace, tmp_path, identity="watch-job") as running,
    ):
        for uri in (done_uri, running_uri):
            wait_for(lambda uri=uri: f"started for {uri}" in running.log(), f"the watcher of {uri}")  # type: ignore[misc]
        apply(cluster, namespace, job)
        # The positive control: the triggerer reads this Job while it runs.
        [live] = wait_for(lambda: events(running_uri) or None, "the running Job's AssetEvent", timeout=90)
        uid = get(cluster, namespace, "job", "etl")["metadata"]["uid"]
        assert live["spec"]["extra"]["payload"]["uid"] == uid
        assert complete() is None and events(done_uri) == [], "not complete yet, nothing recorded for it"
        [pod] = get(cluster, namespace, "pods")["items"]
        assert pod["metadata"]["labels"]["job-name"] == "etl"
        cluster.kubectl("annotate", "pod", pod["metadata"]["name"], "-n", namespace, "kwok.zonda.dev/hold-")
        condition = wait_for(complete, "the Job to complete", timeout=90)
        [event] = wait_for(lambda: events(done_uri) or None, "the completed Job's AssetEvent")
        payload = event["spec"]["extra"]["payload"]
        assert (payload["kind"], payload["name"], payload["uid"]) == ("Job", "etl", uid)
        assert payload["lastTransitionTime"] == condition["lastTransitionTime"]
        [run] = wait_for(lambda: runs_of(cluster, namespace, "on-etl"), "the consumer's run")
        assert [e["name"] for e in run["spec"]["triggeringAssetEvents"]] == [event["metadata"]["name"]]
        assert wait_run_finished(cluster, namespace, run["metadata"]["name"])["status"]["state"] == "success"
    assert len(events(done_uri)) == 1, "one Job completion, one AssetEvent"
    assert len(runs_of(cluster, namespace, "on-etl")) == 1
