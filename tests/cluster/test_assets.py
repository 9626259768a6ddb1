"""Data-aware scheduling end to end on a real apiserver: controller processes, local executor.

A producer's success records an AssetEvent; the consumer DAG scheduled on that asset gets exactly
one `dataset_triggered` run naming it. Exactly once is checked where it can break: the controller
SIGKILLed (deterministically: it kills itself at `ZONDA_FAULT_EXIT_AT`) right after writing the
event, and right after creating the consumer's run before its cursor is written. Runs are counted
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
    create_asset_events,
    get,
    runs_of,
    trigger,
    wait_for,
    wait_run_finished,
    zonda,
)

URI = "s3://assets-test/orders"


def producer(name: str = "asset-producer") -> dict[str, Any]:
    return {
        "apiVersion": "zonda.dev/v1alpha1",
        "kind": "DAG",
        "metadata": {"name": name},
        "spec": {
            "schedule": None,
            "tasks": [
                {
                    "id": "produce",
                    "operator": "PythonOperator",
                    "args": {"python_callable": "tests.cluster.asset_callables:produce"},
                    "outlets": [{"uri": URI}],
                }
            ],
        },
    }


def consumer(name: str = "asset-consumer", schedule: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "zonda.dev/v1alpha1",
        "kind": "DAG",
        "metadata": {"name": name},
        "spec": {
            "assetSchedule": schedule or {"uri": URI},
            "assetRunType": "dataset_triggered",
            "tasks": [
                {
                    "id": "report",
                    "operator": "PythonOperator",
                    "args": {"python_callable": "tests.cluster.asset_callables:report"},
                }
            ],
        },
    }


def gated_consumer(gate: Path) -> dict[str, Any]:
    """The consumer at maxActiveRuns 1 whose task waits for the gate file: its runs are held."""
    dag = consumer()
    dag["spec"]["maxActiveRuns"] = 1
    dag["spec"]["tasks"] = [
        {
            "id": "report",
            "operator": "BashOperator",
            "args": {"bash_command": f"while [ ! -e {gate} ]; do sleep 0.1; done"},
        }
    ]
    return dag


def limited_asset(limit: int) -> dict[str, Any]:
    from zonda.resources.asset_models import asset_name

    return {
        "apiVersion": "zonda.dev/v1alpha1",
        "kind": "Asset",
        "metadata": {"name": asset_name(URI)},
        "spec": {"uri": URI, "eventsHistoryLimit": limit},
    }


def open_gate_and_finish(cluster: Cluster, namespace: str, gate: Path, last: str) -> list[dict[str, Any]]:
    """Open the gated consumer's gate, wait until its cursor names `last`, then every run succeeded."""
    gate.touch()
    wait_for(lambda: consumed_by_cursor(cluster, namespace, "asset-consumer", last), f"{last} consumed")
    runs: list[dict[str, Any]] = runs_of(cluster, namespace, "asset-consumer")
    for run in runs:
        assert wait_run_finished(cluster, namespace, run["metadata"]["name"])["status"]["state"] == "success"
    return runs


def asset_events(cluster: Cluster, namespace: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = get(cluster, namespace, "assetevents")["items"]
    return items


def consumed_by_cursor(cluster: Cluster, namespace: str, dag: str, event: str) -> bool:
    """The consumer DAG's status says the event is consumed (written after its run was created)."""
    return event in (get(cluster, namespace, "dag", dag).get("status") or {}).get("assetCursorEvents", [])


def test_a_producers_success_makes_one_consumer_run_with_its_event(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    apply(cluster, namespace, producer())
    apply(cluster, namespace, consumer())
    with controller(cluster, namespace, tmp_path, executor="local"):
        wait_for(
            lambda: (get(cluster, namespace, "dag", "asset-consumer").get("status") or {}).get(
                "awaitedAssets"
            ),
            "the consumer to say what it awaits",
        )
        assert runs_of(cluster, namespace, "asset-consumer") == [], "no event yet, no run"
        produced = trigger(cluster, namespace, "asset-producer")
        wait_run_finished(cluster, namespace, produced)
        run = wait_for(lambda: runs_of(cluster, namespace, "asset-consumer"), "the consumer's run")[0]
        body = wait_run_finished(cluster, namespace, run["metadata"]["name"])
        assert body["status"]["state"] == "success"
        assert body["spec"]["runType"] == "dataset_triggered"
        [event] = asset_events(cluster, namespace)
        assert event["spec"]["sourceRun"] == produced and event["spec"]["sourceTask"] == "produce"
        # the producer's try wrote its context's run_id: Airflow's run id, not the DagRun's name
        producer_run_id = get(cluster, namespace, "dagrun", produced)["status"]["runId"]
        assert producer_run_id != produced
        assert event["spec"]["extra"] == {"rows": 42, "run": producer_run_id}
        assert [e["name"] for e in body["spec"]["triggeringAssetEvents"]] == [event["metadata"]["name"]]
        assert body["status"]["taskInstances"]["report"]["xcom"] == [
            {
                "uri": URI,
                "extra": {"rows": 42, "run": producer_run_id},
                "source_dag_id": "asset-producer",
                "source_task_id": "produce",
            }
        ]
        asset = wait_for(
            lambda: next(
                (
                    a
                    for a in get(cluster, namespace, "assets")["items"]
                    if (a.get("status") or {}).get("lastEvent")
                ),
                None,
            ),
            "the Asset's status",
        )
        assert asset["spec"]["uri"] == URI
        assert asset["status"]["producingDags"] == ["asset-producer"]
        assert asset["status"]["consumingDags"] == ["asset-consumer"]
        assert event["metadata"]["ownerReferences"][0]["uid"] == asset["metadata"]["uid"], "GC bounds events"
        # what `kubectl get` shows: the asset's URI, last event, producer and consumer; the event's source
        assets_table = cluster.kubectl("get", "assets", "-n", namespace, "-o", "wide").stdout
        for shown in (URI, asset["status"]["lastEvent"], "asset-producer", "asset-consumer"):
            assert shown in assets_table, f"{shown} in kubectl get assets"
        events_table = cluster.kubectl("get", "assetevents", "-n", namespace, "-o", "wide").stdout
        for shown in (URI, produced, "produce", '"rows":42'):
            assert shown in events_table, f"{shown} in kubectl get assetevents"
        wait_for(
            lambda: consumed_by_cursor(cluster, namespace, "asset-consumer", event["metadata"]["name"]),
            "cursor",
        )
        assert len(runs_of(cluster, namespace, "asset-consumer")) == 1
    # owned: deleting the Asset has the garbage collector delete its events; the run keeps its copy
    cluster.kubectl("delete", "asset", asset["metadata"]["name"], "-n", namespace)
    wait_for(lambda: asset_events(cluster, namespace) == [], "the garbage collector to delete the events")
    [kept] = runs_of(cluster, namespace, "asset-consumer")
    assert [e["name"] for e in kept["spec"]["triggeringAssetEvents"]] == [event["metadata"]["name"]]


def test_an_asset_event_created_with_kubectl_triggers_an_any_of_consumer_once_per_event(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    apply(cluster, namespace, consumer(schedule={"any": [{"uri": URI}, {"uri": "s3://assets-test/other"}]}))
    with controller(cluster, namespace, tmp_path, executor="local"):
        event = {
            "apiVersion": "zonda.dev/v1alpha1",
            "kind": "AssetEvent",
            "metadata": {"name": "external-1"},
            "spec": {"uri": URI, "extra": {"from": "kubectl"}},
        }
        cluster.kubectl("create", "-n", namespace, "-f", "-", input=json.dumps(event))
        wait_for(lambda: consumed_by_cursor(cluster, namespace, "asset-consumer", "external-1"), "consumed")
        assert len(runs_of(cluster, namespace, "asset-consumer")) == 1
        # the other asset of the any-of, through the CLI (and its trailing slash normalised away)
        created = zonda(cluster, "assets", "create-event", "s3://assets-test/other/", "-n", namespace)
        second = created.stdout.split()[0].split("/", 1)[1]
        wait_for(lambda: consumed_by_cursor(cluster, namespace, "asset-consumer", second), "consumed")
        runs = runs_of(cluster, namespace, "asset-consumer")
        assert len(runs) == 2, "one run per event"
        consumed = sorted(e["name"] for r in runs for e in r["spec"]["triggeringAssetEvents"])
        assert consumed == sorted(["external-1", second])
        first_run = next(r for r in runs if r["spec"]["triggeringAssetEvents"][0]["name"] == "external-1")

        def described() -> str | None:
            out: str = cluster.kubectl(
                "describe", "dagrun", "-n", namespace, first_run["metadata"]["name"]
            ).stdout
            return out if "TriggeredByAssetEvents" in out else None

        description = wait_for(described, "the run's Event naming its asset events")
        assert "external-1" in description
        listed = zonda(cluster, "assets", "events", "-n", namespace).stdout
        assert "external-1" in listed and second in listed
        wait_for(
            lambda: "asset-consumer" in zonda(cluster, "assets", "list", "-n", namespace).stdout,
            "zonda assets list to name the consumer",
        )


def test_an_invalid_asset_uri_in_a_yaml_dag_is_said_on_the_dag_with_its_field(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    """As Airflow's `_sanitize_uri` raises at parse time: a YAML DAG whose schedule names a reserved
    URI is `Valid=False` naming the field and why, where `kubectl describe dag` shows it."""
    apply(cluster, namespace, consumer("bad-consumer", {"all": [{"uri": URI}, {"uri": "airflow://x"}]}))
    apply(cluster, namespace, consumer("good-consumer"))

    def valid(dag: str) -> dict[str, Any] | None:
        conditions = (get(cluster, namespace, "dag", dag).get("status") or {}).get("conditions") or []
        return next((c for c in conditions if c["type"] == "Valid"), None)

    with controller(cluster, namespace, tmp_path, executor="local"):
        good = wait_for(lambda: valid("good-consumer"), "the valid DAG's Valid condition")
        assert good["status"] == "True"  # the positive control: the same DAG with a good URI is valid
        bad = wait_for(lambda: valid("bad-consumer"), "the invalid DAG's Valid condition")
        assert bad["status"] == "False"
        assert "spec.assetSchedule.all[1]" in bad["message"] and "reserved" in bad["message"]
        described = cluster.kubectl("describe", "dag", "bad-consumer", "-n", namespace).stdout
        assert "Asset scheme 'airflow' is reserved" in described
        create_asset_events(cluster, namespace, URI, ["for-both"])
        wait_for(lambda: consumed_by_cursor(cluster, namespace, "good-consumer", "for-both"), "consumed")
        assert runs_of(cluster, namespace, "bad-consumer") == [], "an invalid DAG makes no run"


def test_a_controller_killed_after_recording_the_event_or_creating_the_run_makes_one_run(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    apply(cluster, namespace, producer())
    apply(cluster, namespace, consumer())
    with controller(
        cluster,
        namespace,
        tmp_path,
        executor="local",
        # the consumer's pass can see the event (its watch) before the producer's create returns: it
        # exits before creating the run, so either way the event is recorded and nothing consumed it
        # (CI: the consumer's create was sent before the producer resumed to exit)
        env={"ZONDA_FAULT_EXIT_AT": "asset-event-recorded,asset-run-due"},
    ) as first:
        produced = trigger(cluster, namespace, "asset-producer")
        assert first.process is not None
        wait_for(lambda: first.process.poll() is not None, "the controller to exit after writing the event")
        assert first.process.returncode == -signal.SIGKILL, "killed, not exited"
    [event] = asset_events(cluster, namespace)
    assert runs_of(cluster, namespace, "asset-consumer") == [], "killed before anything consumed it"
    with controller(
        cluster, namespace, tmp_path, executor="local", env={"ZONDA_FAULT_EXIT_AT": "asset-run-created"}
    ) as second:
        assert second.process is not None
        wait_for(lambda: second.process.poll() is not None, "the controller to exit after creating the run")
        assert second.process.returncode == -signal.SIGKILL, "killed, not exited"
    assert len(runs_of(cluster, namespace, "asset-consumer")) == 1
    assert not consumed_by_cursor(cluster, namespace, "asset-consumer", event["metadata"]["name"])
    with controller(cluster, namespace, tmp_path, executor="local"):
        wait_run_finished(cluster, namespace, produced)
        wait_for(
            lambda: consumed_by_cursor(cluster, namespace, "asset-consumer", event["metadata"]["name"]),
            "cursor",
        )
        [run] = runs_of(cluster, namespace, "asset-consumer")
        wait_run_finished(cluster, namespace, run["metadata"]["name"])
    assert len(asset_events(cluster, namespace)) == 1, "the restarted producer pass wrote no second event"
    assert len(runs_of(cluster, namespace, "asset-consumer")) == 1


def test_an_event_recorded_late_with_an_old_timestamp_is_consumed_once(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    """Airflow queues a consumer when an event is recorded, whatever its time: an event created after
    the consumer's cursor moved on, with a timestamp older than that (and than the DAG), still runs it."""
    apply(cluster, namespace, consumer())

    def create(name: str, **spec: Any) -> None:
        body = {
            "apiVersion": "zonda.dev/v1alpha1",
            "kind": "AssetEvent",
            "metadata": {"name": name},
            "spec": {"uri": URI, **spec},
        }
        cluster.kubectl("create", "-n", namespace, "-f", "-", input=json.dumps(body))

    with controller(cluster, namespace, tmp_path, executor="local"):
        create("first")
        wait_for(lambda: consumed_by_cursor(cluster, namespace, "asset-consumer", "first"), "first consumed")
        create("late", timestamp="2020-01-01T00:00:00Z", extra={"late": True})
        wait_for(lambda: consumed_by_cursor(cluster, namespace, "asset-consumer", "late"), "late consumed")
        create("after")  # the pass that consumes it sees both earlier events again: a positive control
        wait_for(lambda: consumed_by_cursor(cluster, namespace, "asset-consumer", "after"), "after consumed")
        runs = runs_of(cluster, namespace, "asset-consumer")
    consumed = sorted([e["name"] for e in r["spec"]["triggeringAssetEvents"]] for r in runs)
    assert consumed == [["after"], ["first"], ["late"]], "each event in exactly one run"
    late_run = next(r for r in runs if r["spec"]["triggeringAssetEvents"][0]["name"] == "late")
    assert late_run["spec"]["logicalDate"].startswith("2020-01-01"), "the run's dates are its events'"


def ready_message(cluster: Cluster, namespace: str, dag: str) -> str:
    conditions = (get(cluster, namespace, "dag", dag).get("status") or {}).get("conditions") or []
    return next((c.get("message") or "" for c in conditions if c["type"] == "Ready"), "")


def test_events_faster_than_runs_finish_queue_into_the_next_run(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    """As Airflow's queue: events recorded while the consumer's run is going wait for the next run and
    all go into it. The first run is held on a gate file (its task waits for it) at maxActiveRuns 1."""
    gate = tmp_path / "gate"
    apply(cluster, namespace, gated_consumer(gate))
    with controller(cluster, namespace, tmp_path, executor="local"):
        create_asset_events(cluster, namespace, URI, ["burst-0"])
        [first] = wait_for(lambda: runs_of(cluster, namespace, "asset-consumer"), "the first run")
        queued = [f"burst-{i}" for i in range(1, 5)]
        create_asset_events(cluster, namespace, URI, queued)
        # the positive signal that the controller saw them and held them for the next run
        wait_for(
            lambda: ready_message(cluster, namespace, "asset-consumer").startswith(
                "4 asset events queued for the next run"
            ),
            "the DAG to say four events are queued",
        )
        assert [r["metadata"]["name"] for r in runs_of(cluster, namespace, "asset-consumer")] == [
            first["metadata"]["name"]
        ], "no second run while the first is going"
        runs = open_gate_and_finish(cluster, namespace, gate, "burst-4")
    consumed = sorted([e["name"] for e in r["spec"]["triggeringAssetEvents"]] for r in runs)
    assert consumed == [["burst-0"], queued], "two runs: the first event, then the four queued"


def test_an_assets_history_limit_keeps_its_newest_events_and_runs_keep_their_copies(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    from zonda.resources.asset_models import asset_name

    apply(cluster, namespace, consumer())
    apply(cluster, namespace, limited_asset(3))
    names = [f"kept-{i}" for i in range(7)]
    with controller(cluster, namespace, tmp_path, executor="local"):
        for name in names:  # each consumed before the next: every one is in a run before any is deleted
            create_asset_events(cluster, namespace, URI, [name])
            wait_for(
                lambda n=name: consumed_by_cursor(cluster, namespace, "asset-consumer", n), f"{name} consumed"
            )
        wait_for(
            lambda: sorted(e["metadata"]["name"] for e in asset_events(cluster, namespace)) == names[-3:],
            "the apiserver to hold the newest three events",
        )
        status = wait_for(
            lambda: (
                (s := get(cluster, namespace, "asset", asset_name(URI)).get("status") or {}).get("events")
                == 3
                and s
            ),
            "the Asset to count three",
        )
        assert status["lastEvent"] == names[-1]
        runs = runs_of(cluster, namespace, "asset-consumer")
    consumed = sorted(e["name"] for r in runs for e in r["spec"]["triggeringAssetEvents"])
    assert consumed == sorted(names), "every event in exactly one run, deleted ones included"


def test_the_history_limit_keeps_the_events_a_held_consumer_has_not_consumed(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    """Limit 3, and a consumer held at maxActiveRuns 1 (its first run waits on a gate file) while seven
    events arrive: none is deleted before its run takes them, and that run names all seven. The positive
    control: once consumed, the same limit prunes them to the newest three."""
    from zonda.resources.asset_models import asset_name

    gate = tmp_path / "gate"
    apply(cluster, namespace, gated_consumer(gate))
    apply(cluster, namespace, limited_asset(3))
    held = [f"held-{i}" for i in range(7)]

    def asset_status() -> dict[str, Any]:
        status: dict[str, Any] = get(cluster, namespace, "asset", asset_name(URI)).get("status") or {}
        return status

    with controller(cluster, namespace, tmp_path, executor="local"):
        create_asset_events(cluster, namespace, URI, ["first"])
        wait_for(lambda: runs_of(cluster, namespace, "asset-consumer"), "the first run")
        wait_for(lambda: consumed_by_cursor(cluster, namespace, "asset-consumer", "first"), "first consumed")
        create_asset_events(cluster, namespace, URI, held)
        wait_for(
            lambda: ready_message(cluster, namespace, "asset-consumer").startswith(
                "7 asset events queued for the next run"
            ),
            "the DAG to say seven events are queued",
        )
        # the asset reconciler saw all seven past its limit of three and kept the four held ones
        wait_for(
            lambda: (s := asset_status()).get("events") == 7 and s.get("heldEvents") == 4,
            "the Asset to keep seven, four of them held",
        )
        assert sorted(e["metadata"]["name"] for e in asset_events(cluster, namespace)) == held
        assert "unconsumedDeleted" not in asset_status()
        runs = open_gate_and_finish(cluster, namespace, gate, "held-6")
        # the positive control: nothing pending any more, the limit prunes to the newest three
        wait_for(
            lambda: sorted(e["metadata"]["name"] for e in asset_events(cluster, namespace)) == held[-3:],
            "the apiserver to hold the newest three events",
        )
        wait_for(
            lambda: (s := asset_status()).get("events") == 3 and s.get("heldEvents", 0) == 0,
            "the Asset to count three, none held",
        )
    consumed = sorted([e["name"] for e in r["spec"]["triggeringAssetEvents"]] for r in runs)
    assert consumed == [["first"], held], "two runs: the first event, then all seven held ones"


def test_a_consumer_held_past_the_ceiling_loses_its_oldest_events_and_is_told(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    """Limit 1, so the ceiling is 10 events in all: a paused consumer (Zonda keeps its queue) and twelve
    events recorded before the controller starts, none consumed. The apiserver holds all twelve then
    (the positive control: nothing deleted them early); the controller's pass deletes the two oldest,
    posts the Asset's Warning `UnconsumedEventsDeleted` naming the DAG and them, and records it in
    `status.unconsumedDeleted`; unpaused, the consumer's one run names the ten kept, not the two."""
    from zonda.resources.asset_models import asset_name

    dag = consumer()
    dag["spec"]["paused"] = True
    apply(cluster, namespace, dag)
    apply(cluster, namespace, limited_asset(1))
    names = [f"held-{i:02d}" for i in range(12)]
    create_asset_events(cluster, namespace, URI, names)

    def kept() -> list[str]:
        return sorted(e["metadata"]["name"] for e in asset_events(cluster, namespace))

    def asset_status() -> dict[str, Any]:
        status: dict[str, Any] = get(cluster, namespace, "asset", asset_name(URI)).get("status") or {}
        return status

    def warnings() -> list[dict[str, Any]]:
        items = get(cluster, namespace, "events")["items"]
        return [e for e in items if e.get("reason") == "UnconsumedEventsDeleted"]

    assert kept() == names, "all twelve recorded before any pass"
    with controller(cluster, namespace, tmp_path, executor="local"):
        wait_for(lambda: kept() == names[2:], "the apiserver to keep the newest ten (the ceiling)")
        status = wait_for(
            lambda: (s := asset_status()).get("heldEvents") == 9 and s.get("unconsumedDeleted") and s,
            "the Asset to hold nine past its limit and say what it deleted",
        )
        assert status["events"] == 10
        said = status["unconsumedDeleted"]
        assert "asset-consumer" in said and "held-00" in said and "held-01" in said
        assert "held-02" not in said, "only the two past the ceiling"
        [warning] = wait_for(warnings, "the Asset's UnconsumedEventsDeleted Event")
        assert warning["type"] == "Warning"
        assert warning["involvedObject"]["kind"] == "Asset"
        assert warning["involvedObject"]["name"] == asset_name(URI)
        message = warning["message"]
        assert "asset-consumer" in message and "held-00" in message and "held-01" in message
        assert "held-02" not in message
        assert runs_of(cluster, namespace, "asset-consumer") == [], "paused: no run yet"
        cluster.kubectl(
            "patch",
            "dag",
            "asset-consumer",
            "-n",
            namespace,
            "--type=merge",
            "-p",
            '{"spec":{"paused":false}}',
        )
        wait_for(
            lambda: consumed_by_cursor(cluster, namespace, "asset-consumer", "held-11"), "held-11 consumed"
        )
        [run] = runs_of(cluster, namespace, "asset-consumer")
        assert wait_run_finished(cluster, namespace, run["metadata"]["name"])["status"]["state"] == "success"
        # consumed: the limit alone again, the newest one
        wait_for(lambda: kept() == names[-1:], "the apiserver to hold the newest event")
        assert len(warnings()) == 1, "told once"
    assert [e["name"] for e in run["spec"]["triggeringAssetEvents"]] == names[2:], "not the two deleted"
