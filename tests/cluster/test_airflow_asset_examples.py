"""Airflow's own dataset and asset example files, unchanged, running end to end under the controller as
their docstrings say Airflow runs them (controller process, local executor, a real apiserver).

Airflow 2.10.5's `example_datasets.py`: `dataset_produces_1` (daily, catchup off: it runs its latest
day at once) triggers `dataset_consumes_1`, the `|` consumers, and not those that also need
`dataset_produces_2`'s dataset; triggering `dataset_produces_2` then runs `dataset_consumes_1_and_2`,
the `&` consumer, the `DatasetOrTimeSchedule` consumer, and the `|` consumer again; the two
`never_scheduled` DAGs never run. Airflow 3.3.2's `example_asset_alias.py` (an event through an alias
runs the alias's consumer, and once resolved any event of its asset does), `example_asset_decorator.py`
(`@asset` producers feeding an `|` consumer, the second reading the first's events through
`inlet_events`), `example_outlet_event_extra.py` into `example_inlet_event_extra.py` (the extras its
producers set, read back). Every run is counted, with the events it consumed, from the apiserver.
"""

from __future__ import annotations

from pathlib import Path

from controller.devtools.devcluster import Cluster
from tests.airflow_examples import compare
from tests.cluster.zonda_processes import (
    controller,
    get,
    runs_of,
    trigger,
    wait_for,
    wait_run_finished,
    zonda,
)

AF2 = compare.AF2 / "dags"
AF3 = compare.AF3 / "dags" / "core"


def apply_file(cluster: Cluster, namespace: str, path: Path) -> None:
    zonda(cluster, "dags", "apply", str(path), "--airflow-compat", "-n", namespace)


def consumed(cluster: Cluster, namespace: str, dag: str) -> list[list[str]]:
    """The URIs each asset-triggered run of the DAG consumed (sorted within a run, runs sorted)."""
    events = {
        e["metadata"]["name"]: e["spec"]["uri"] for e in get(cluster, namespace, "assetevents")["items"]
    }
    return sorted(
        sorted(events[e["name"]] for e in r["spec"].get("triggeringAssetEvents") or [])
        for r in runs_of(cluster, namespace, dag)
        if r["spec"].get("runType") in ("dataset_triggered", "asset_triggered")
    )


def settled(cluster: Cluster, namespace: str, dag: str, runs: int) -> bool:
    """The DAG has that many asset-triggered runs and its cursor holds every event they consumed (the
    cursor is written after the run: a second run of the same events would have had to come before)."""
    made = [
        r
        for r in runs_of(cluster, namespace, dag)
        if r["spec"].get("runType") in ("dataset_triggered", "asset_triggered")
    ]
    names = {e["name"] for r in made for e in r["spec"].get("triggeringAssetEvents") or []}
    cursor = set((get(cluster, namespace, "dag", dag).get("status") or {}).get("assetCursorEvents") or [])
    return len(made) == runs and names <= cursor


def wait_settled(cluster: Cluster, namespace: str, expected: dict[str, list[list[str]]]) -> None:
    for dag, runs in expected.items():
        wait_for(lambda d=dag, n=len(runs): settled(cluster, namespace, d, n), f"{dag}'s runs", timeout=120)


def succeeded(cluster: Cluster, namespace: str, run: str) -> bool:
    return bool(wait_run_finished(cluster, namespace, run, timeout=120)["status"]["state"] == "success")


def all_succeed(cluster: Cluster, namespace: str, dags: list[str]) -> None:
    for dag in dags:
        for run in runs_of(cluster, namespace, dag):
            body = wait_run_finished(cluster, namespace, run["metadata"]["name"], timeout=120)
            assert body["status"]["state"] == "success", (dag, body["status"])


def awaited(cluster: Cluster, namespace: str, dag: str) -> list[str]:
    found: list[str] = (get(cluster, namespace, "dag", dag).get("status") or {}).get("awaitedAssets") or []
    return found


def test_airflow2_example_datasets_runs_its_consumers_as_its_docstring_says(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    d1, d2 = "s3://dag1/output_1.txt", "s3://dag2/output_1.txt"
    apply_file(cluster, namespace, AF2 / "example_datasets.py")
    with controller(cluster, namespace, tmp_path, executor="local", env={"ZONDA_DAGS_FOLDER": str(AF2)}):
        # dataset_produces_1 is daily with catchup off: its latest day runs at once, and its event
        # triggers what depends on its dataset alone
        [produced_1] = wait_for(lambda: runs_of(cluster, namespace, "dataset-produces-1"), "produces_1's run")
        wait_run_finished(cluster, namespace, produced_1["metadata"]["name"], timeout=120)
        first_wave = {
            "dataset-consumes-1": [[d1]],
            "consume-1-or-2-with-dataset-expressions": [[d1]],
            "consume-1-or-both-2-and-3-with-dataset-expressions": [[d1]],
        }
        wait_settled(cluster, namespace, first_wave)
        # the positive control for "never scheduled": the DAG saw dag1's event and waits for the other
        wait_for(
            lambda: (
                awaited(cluster, namespace, "dataset-consumes-1-never-scheduled")
                == ["s3://unrelated/this-dataset-doesnt-get-triggered"]
            ),
            "never_scheduled to have seen dag1's dataset updated",
        )
        for dag in ("dataset-consumes-1-and-2", "consume-1-and-2-with-dataset-expressions"):
            wait_for(lambda d=dag: awaited(cluster, namespace, d) == [d2], f"{dag} to await dag2's only")
            assert consumed(cluster, namespace, dag) == [], f"{dag} needs dag2's dataset too"
        # dataset_produces_2 has no schedule: triggered by hand, it completes the `&` conditions
        produced_2 = trigger(cluster, namespace, "dataset-produces-2")
        wait_run_finished(cluster, namespace, produced_2, timeout=120)
        expected = {
            **first_wave,
            "consume-1-or-2-with-dataset-expressions": [[d1], [d2]],
            "dataset-consumes-1-and-2": [[d1, d2]],
            "consume-1-and-2-with-dataset-expressions": [[d1, d2]],
            "conditional-dataset-and-time-based-timetable": [[d1, d2]],
        }
        wait_settled(cluster, namespace, expected)
        all_succeed(cluster, namespace, list(expected))
        got = {dag: consumed(cluster, namespace, dag) for dag in expected}
        assert got == expected, "each satisfying set of events made exactly one run"
        for dag in expected:
            assert {r["spec"]["runType"] for r in runs_of(cluster, namespace, dag)} <= {
                "dataset_triggered",
                "scheduled",  # the DatasetOrTimeSchedule DAG's cron may also fire
            }, dag
        never = ("dataset-consumes-1-never-scheduled", "dataset-consumes-unknown-never-scheduled")
        for dag in never:
            assert runs_of(cluster, namespace, dag) == [], dag


def test_airflow3_asset_examples_alias_decorator_and_extras_run_as_under_airflow(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    task = "s3://bucket/my-task"
    for name in ("example_asset_alias.py", "example_asset_decorator.py", "example_outlet_event_extra.py"):
        apply_file(cluster, namespace, AF3 / name)
    with controller(cluster, namespace, tmp_path, executor="local", env={"ZONDA_DAGS_FOLDER": str(AF3)}):
        # example_asset_alias: an event through the alias runs both the asset's and the alias's consumer
        through_alias = trigger(cluster, namespace, "asset-alias-example-alias-producer")
        assert succeeded(cluster, namespace, through_alias)
        for dag in ("asset-s3-bucket-consumer", "asset-alias-example-alias-consumer"):
            wait_for(lambda d=dag: settled(cluster, namespace, d, 1), f"{dag}'s first run", timeout=120)
        # the alias now resolved to s3://bucket/my-task: a plain event of it runs the alias consumer too
        plain = trigger(cluster, namespace, "asset-s3-bucket-producer")
        assert succeeded(cluster, namespace, plain)
        # example_asset_decorator: @asset producers (schedule=None) into an `|` consumer
        first = trigger(cluster, namespace, "asset1-producer")
        assert succeeded(cluster, namespace, first)
        wait_for(lambda: settled(cluster, namespace, "consumes-asset-decorator", 1), "the decorator consumer")
        second = trigger(cluster, namespace, "asset2-producer")  # reads inlet_events[asset1_producer]
        assert succeeded(cluster, namespace, second)
        expected = {
            "asset-s3-bucket-consumer": [[task], [task]],
            "asset-alias-example-alias-consumer": [[task], [task]],
            "consumes-asset-decorator": [["s3://bucket/asset1_producer"], ["s3://bucket/object"]],
        }
        wait_settled(cluster, namespace, expected)
        all_succeed(cluster, namespace, list(expected))
        assert {dag: consumed(cluster, namespace, dag) for dag in expected} == expected
        # example_outlet_event_extra's three daily producers (catchup off: each runs its latest day)
        # set {"hi": "bye"} by yield, through the context and in a classic operator's post_execute
        producers = ("asset-with-extra-by-yield", "asset-with-extra-by-context",
                     "asset-with-extra-from-classic-operator")  # fmt: skip
        for dag in producers:
            [run] = wait_for(lambda d=dag: runs_of(cluster, namespace, d), f"{dag}'s run", timeout=120)
            assert succeeded(cluster, namespace, run["metadata"]["name"]), dag
        extras = [
            e["spec"].get("extra")
            for e in get(cluster, namespace, "assetevents")["items"]
            if e["spec"]["uri"] == "s3://output/1.txt"
        ]
        assert extras == [{"hi": "bye"}] * 3, extras
        # ... and example_inlet_event_extra's readers, applied now, read them back
        apply_file(cluster, namespace, AF3 / "example_inlet_event_extra.py")
        for dag in ("read-asset-event", "read-asset-event-from-classic"):
            [run] = wait_for(lambda d=dag: runs_of(cluster, namespace, d), f"{dag}'s run", timeout=120)
            body = wait_run_finished(cluster, namespace, run["metadata"]["name"], timeout=120)
            assert body["status"]["state"] == "success", (dag, body["status"])
        classic = body["status"]["taskInstances"]["read_asset_event_from_classic"]
        assert classic.get("xcom") == '{"hi": "bye"}', classic
