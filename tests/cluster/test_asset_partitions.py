"""Partitioned assets end to end on a real apiserver (controller process, local executor).

A `CronPartitionTimetable` producer's scheduled runs carry their partition key, and so do the asset
events its task records; a `PartitionedAssetTimetable` consumer on two assets (the other updated
with `kubectl`, as Airflow's REST API with a `partition_key`) gets one run per hour once both assets
have that hour, exactly once, with the key in its run and its task's context. And Airflow 3.3.2's own
`example_asset_partition.py`, unchanged, applied with `zonda dags apply --airflow-compat`: its
PartitionedAtRuntime producers, triggered, drive its segment rollups, fan-out and AllowedKeyMapper
consumers as Airflow's scheduler would. Counted from the apiserver.
"""

from __future__ import annotations

import datetime as dt
import json
import signal
from pathlib import Path
from typing import Any

from controller.devtools.devcluster import Cluster
from tests.airflow_examples import compare
from tests.cluster.zonda_processes import (
    apply,
    controller,
    get,
    runs_of,
    trigger,
    wait_for,
    wait_run_finished,
    zonda,
)

HOURLY = "s3://partitions-test/hourly"
OTHER = "s3://partitions-test/other"


def _task(task_id: str, **more: Any) -> dict[str, Any]:
    return {
        "id": task_id,
        "operator": "PythonOperator",
        "args": {"python_callable": "tests.cluster.asset_callables:partition_of"},
        **more,
    }


def producer(start: dt.datetime, end: dt.datetime) -> dict[str, Any]:
    return {
        "apiVersion": "zonda.dev/v1alpha1",
        "kind": "DAG",
        "metadata": {"name": "hourly-producer"},
        "spec": {
            "airflowVersion": "3",
            "catchup": True,
            "startDate": start.isoformat(),
            "endDate": end.isoformat(),  # two firings, even if the test runs into the next hour
            "timetable": {
                "class": "zonda.timetables.trigger.CronPartitionTimetable",
                "params": {
                    "expression": "0 * * * *",
                    "timezone": "UTC",
                    "run_offset": 0,
                    "key_format": "%Y-%m-%dT%H:%M:%S",
                },
            },
            "tasks": [_task("produce", outlets=[{"uri": HOURLY}])],
        },
    }


def consumer() -> dict[str, Any]:
    return {
        "apiVersion": "zonda.dev/v1alpha1",
        "kind": "DAG",
        "metadata": {"name": "hourly-consumer"},
        "spec": {
            "airflowVersion": "3",
            "assetSchedule": {"all": [{"uri": HOURLY}, {"uri": OTHER}]},
            "assetPartitions": {"defaultMapper": {"kind": "StartOfHourMapper"}},
            "tasks": [_task("consume")],
        },
    }


def create_event(cluster: Cluster, namespace: str, name: str, key: str) -> None:
    event = {
        "apiVersion": "zonda.dev/v1alpha1",
        "kind": "AssetEvent",
        "metadata": {"name": name},
        "spec": {"uri": OTHER, "partitionKey": key},
    }
    cluster.kubectl("create", "-n", namespace, "-f", "-", input=json.dumps(event))


def runs_n(cluster: Cluster, namespace: str, dag: str, n: int) -> list[dict[str, Any]] | None:
    runs = runs_of(cluster, namespace, dag)
    return runs if len(runs) == n else None


def dag_status(cluster: Cluster, namespace: str) -> dict[str, Any]:
    return get(cluster, namespace, "dag", "hourly-consumer").get("status") or {}


def test_partitioned_producer_to_consumer_one_run_per_hour(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    hour = dt.datetime.now(dt.UTC).replace(minute=0, second=0, microsecond=0)
    previous = hour - dt.timedelta(hours=1)
    keys = [f"{t:%Y-%m-%dT%H:%M:%S}" for t in (previous, hour)]
    apply(cluster, namespace, producer(previous, hour + dt.timedelta(minutes=1)))
    apply(cluster, namespace, consumer())
    with controller(cluster, namespace, tmp_path, executor="local"):
        # (1) the producer's two firings since its start date, each run for its hour
        made = wait_for(lambda: runs_n(cluster, namespace, "hourly-producer", 2), "the producer's two runs")
        assert sorted(r["spec"]["partitionKey"] for r in made) == keys
        for run in made:
            body = wait_run_finished(cluster, namespace, run["metadata"]["name"])
            assert body["status"]["state"] == "success"
            assert body["status"]["taskInstances"]["produce"]["xcom"] == run["spec"]["partitionKey"]
        events = [e for e in get(cluster, namespace, "assetevents")["items"] if e["spec"]["uri"] == HOURLY]
        assert sorted(e["spec"]["partitionKey"] for e in events) == keys
        # (2) a pass saw the producer's events (only the other asset is awaited): no run yet
        awaited = lambda: dag_status(cluster, namespace).get("awaitedAssets") == [OTHER]  # noqa: E731
        wait_for(awaited, "the consumer to await only the other asset")
        assert runs_of(cluster, namespace, "hourly-consumer") == []
        # the other asset's event for the earlier hour (any minute of it): that hour's run, and only it
        create_event(cluster, namespace, "other-previous", f"{previous:%Y-%m-%dT%H}:30:00")
        [first] = wait_for(lambda: runs_of(cluster, namespace, "hourly-consumer"), "the earlier hour's run")
        assert first["spec"]["partitionKey"] == f"{previous:%Y-%m-%dT%H}"
        assert first["spec"]["runType"] == "asset_triggered"
        assert first["spec"]["partitionDate"].startswith(previous.strftime("%Y-%m-%dT%H:00:00"))
        consumed = sorted(e["name"] for e in first["spec"]["triggeringAssetEvents"])
        assert len(consumed) == 2 and "other-previous" in consumed
        body = wait_run_finished(cluster, namespace, first["metadata"]["name"])
        assert body["status"]["taskInstances"]["consume"]["xcom"] == f"{previous:%Y-%m-%dT%H}"
        # then the later hour's: a second run, for it
        create_event(cluster, namespace, "other-now", f"{hour:%Y-%m-%dT%H}:05:00")
        runs = wait_for(lambda: runs_n(cluster, namespace, "hourly-consumer", 2), "the later hour's run")
        assert sorted(r["spec"]["partitionKey"] for r in runs) == [
            f"{t:%Y-%m-%dT%H}" for t in (previous, hour)
        ]
        # exactly once: once the cursor says both hours' events are consumed, still two runs
        everything = {e["metadata"]["name"] for e in get(cluster, namespace, "assetevents")["items"]}
        wait_for(
            lambda: everything <= set(dag_status(cluster, namespace).get("assetCursorEvents") or ()),
            "the consumer's cursor to hold every event",
        )
        assert len(runs_of(cluster, namespace, "hourly-consumer")) == 2


EXAMPLES = compare.AF3 / "dags" / "core"


def _consumer_runs(cluster: Cluster, namespace: str, dag: str) -> list[tuple[str, int]]:
    """(partition key, number of events consumed) of each run of the DAG, sorted."""
    return sorted(
        (r["spec"].get("partitionKey"), len(r["spec"].get("triggeringAssetEvents") or []))
        for r in runs_of(cluster, namespace, dag)
    )


def test_airflows_partition_example_runs_its_runtime_partitions_as_airflow(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    zonda(
        cluster,
        "dags",
        "apply",
        str(EXAMPLES / "example_asset_partition.py"),
        "--airflow-compat",
        "-n",
        namespace,
    )
    # its cron producers are scheduled too (catchup off: each runs its latest firing); they feed other
    # consumers than those counted here
    for name in (
        "ingest-team-a-player-stats",
        "team-b-player-stats",
        "team-c-player-stats",
        "train-weekly-model",
    ):
        zonda(cluster, "dags", "pause", name, "-n", namespace)
    with controller(
        cluster,
        namespace,
        tmp_path,
        executor="local",
        env={"ZONDA_DAGS_FOLDER": str(EXAMPLES)},
        log_tail=6000,
    ):
        # add_partitions(["us", "eu", "apac"]): three events from one try
        multi = trigger(cluster, namespace, "multi-region-player-stats")
        assert wait_run_finished(cluster, namespace, multi, timeout=120)["status"]["state"] == "success"
        live = trigger(cluster, namespace, "live-region-player-stats")  # add_partitions("us")
        assert wait_run_finished(cluster, namespace, live, timeout=120)["status"]["state"] == "success"
        events = get(cluster, namespace, "assetevents")["items"]
        keys = sorted((e["spec"]["sourceRun"] == multi, e["spec"].get("partitionKey")) for e in events
                      if e["spec"].get("sourceRun") in (multi, live))  # fmt: skip
        assert keys == [(False, "us"), (True, "apac"), (True, "eu"), (True, "us")]
        # ingest_region_stats: externally triggered with a region code as its partition key
        for key in ("eu", "xx"):
            region = subprocess_trigger(cluster, namespace, "ingest-region-stats", key)
            assert wait_run_finished(cluster, namespace, region, timeout=120)["status"]["state"] == "success"
        expected = {
            "segment-region-stats-rollup": [("all_regions", 3)],  # WaitForAll over the three regions
            "scatter-live-region-to-segments": [("apac", 1), ("eu", 1), ("us", 1)],  # one event, three runs
            "summarize-live-region-stats": [("us", 1)],
            "regional-stats-breakdown": [("eu", 1)],  # AllowedKeyMapper: "xx" runs nothing
        }
        for dag, runs in expected.items():
            wait_for(lambda d=dag, r=runs: _consumer_runs(cluster, namespace, d) == r, f"{dag}'s runs {runs}")
        # MinimumCount(2): one run, of two or three events (as its pass saw them arrive)
        early = wait_for(lambda: _consumer_runs(cluster, namespace, "segment-region-stats-early-rollup"),
                         "the early rollup's run")  # fmt: skip
        assert len(early) == 1 and early[0][0] == "all_regions" and early[0][1] in (2, 3)
        for dag in (*expected, "segment-region-stats-early-rollup"):
            for run in runs_of(cluster, namespace, dag):
                body = wait_run_finished(cluster, namespace, run["metadata"]["name"], timeout=120)
                assert body["status"]["state"] == "success", dag
                assert body["spec"]["runType"] == "asset_triggered"
                # an Airflow 3 file's asset-triggered run: no logical date, run after its newest event
                assert "logicalDate" not in body["spec"] and body["status"].get("logicalDate") is None, dag
                assert body["status"]["runId"].startswith("asset_triggered__"), dag
        # exactly once: once every consumer's cursor holds the events its runs consumed, the counts hold
        for dag in expected:
            wait_for(lambda d=dag: _cursor_holds_its_runs(cluster, namespace, d), f"{dag}'s cursor")
        assert {dag: _consumer_runs(cluster, namespace, dag) for dag in expected} == expected


def _cursor_holds_its_runs(cluster: Cluster, namespace: str, dag: str) -> bool:
    consumed = {
        e["name"] for r in runs_of(cluster, namespace, dag) for e in r["spec"]["triggeringAssetEvents"]
    }
    cursor = (get(cluster, namespace, "dag", dag).get("status") or {}).get("assetCursorEvents") or []
    return consumed <= set(cursor)


def subprocess_trigger(cluster: Cluster, namespace: str, dag: str, partition_key: str) -> str:
    """`zonda trigger DAG --partition-key KEY` (Airflow 3.2+'s trigger with a partition_key)."""
    out = zonda(cluster, "trigger", dag, "-n", namespace, "--partition-key", partition_key).stdout
    return out.split()[0].split("/", 1)[1]


def test_a_controller_killed_after_the_first_run_of_a_fan_out_makes_each_key_once(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    """One event fans out to three keys; the controller exits (as SIGKILL) right after creating the
    first key's run, before its cursor is written; the next one makes the other two: three runs."""
    fan_out = {
        "kind": "FanOutMapper",
        "upstreamMapper": {"kind": "IdentityMapper"},
        "window": {"kind": "SegmentWindow", "segments": ["us", "eu", "apac"]},
        "downstreamMapper": {"kind": "IdentityMapper"},
    }
    dag = {
        "apiVersion": "zonda.dev/v1alpha1",
        "kind": "DAG",
        "metadata": {"name": "fan-out"},
        "spec": {
            "assetSchedule": {"uri": OTHER},
            "assetPartitions": {"defaultMapper": fan_out},
            "tasks": [{"id": "t", "operator": "EmptyOperator"}],
        },
    }
    apply(cluster, namespace, dag)
    create_event(cluster, namespace, "live", "us")
    with controller(
        cluster, namespace, tmp_path, executor="local", env={"ZONDA_FAULT_EXIT_AT": "asset-run-created"}
    ) as first:
        assert first.process is not None
        wait_for(lambda: first.process.poll() is not None, "the controller to exit after the first run")
        assert first.process.returncode == -signal.SIGKILL, "killed, not exited"
    [made] = runs_of(cluster, namespace, "fan-out")
    assert "live" not in (get(cluster, namespace, "dag", "fan-out").get("status") or {}).get(
        "assetCursorEvents", []
    )
    with controller(cluster, namespace, tmp_path, executor="local"):
        cursor = lambda: (get(cluster, namespace, "dag", "fan-out").get("status") or {}).get(  # noqa: E731
            "assetCursorEvents"
        )
        wait_for(lambda: cursor() == ["live"], "the event consumed: every key ran")
        runs = runs_of(cluster, namespace, "fan-out")
    assert sorted(r["spec"]["partitionKey"] for r in runs) == ["apac", "eu", "us"]
    assert made["metadata"]["name"] in {r["metadata"]["name"] for r in runs}, (
        "the first run kept, not made again"
    )
