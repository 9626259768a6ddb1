"""The UI's store keeps Pools beside DAGs and DagRuns: listed, changed, deleted, announced as "Pool"."""

from __future__ import annotations

from typing import Any

from controller.kube import DAGS, POOLS
from controller.ui.store import Store


def body(name: str, namespace: str = "team", **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace}, "spec": spec}


def test_pools_are_listed_changed_and_deleted_and_each_change_is_announced() -> None:
    store = Store()
    with store.subscription() as queue:
        assert not store.listed(POOLS, "team")
        store.replace(POOLS, "team", [body("gpu", slots=2), body("etl", slots=1)])
        assert store.listed(POOLS, "team") and not store.listed(POOLS, "other")
        store.apply(POOLS, "MODIFIED", body("gpu", slots=4))
        store.replace(POOLS, "team", [body("gpu", slots=4)])  # a re-list after a dropped watch: etl gone
        store.replace(DAGS, "team", [body("nightly")])
        changes = [queue.get_nowait() for _ in range(queue.qsize())]
    assert [(c.kind, c.type, c.name, c.dag) for c in changes] == [
        ("Pool", "ADDED", "gpu", ""),
        ("Pool", "ADDED", "etl", ""),
        ("Pool", "MODIFIED", "gpu", ""),
        ("Pool", "DELETED", "etl", ""),
        ("Pool", "MODIFIED", "gpu", ""),
        ("DAG", "ADDED", "nightly", "nightly"),
    ]
    assert [p["spec"]["slots"] for p in store.pools_in("team")] == [4]
    assert store.pools_in("other") == [] and list(store.dags) == [("team", "nightly")]


def test_a_cluster_wide_list_counts_for_every_namespace() -> None:
    store = Store()
    store.replace(POOLS, None, [body("gpu", "a"), body("gpu", "b")])
    assert store.listed(POOLS, "a") and store.listed(POOLS, "anything")
    assert [p["metadata"]["namespace"] for p in store.pools_in("b")] == ["b"]


def test_a_big_run_is_kept_whole_from_its_summary_and_its_shards_and_a_shard_change_is_the_runs() -> None:
    """A split run's watch delivers its summary; its DagRunShards' watch the instances: the grid and
    the run page read it whole, and a shard's change is announced as its DagRun's."""
    from controller.kube import DAGRUNS
    from zonda.resources import run_shards
    from zonda.resources.wire import LABEL_DAGRUN_UID

    tis = {f"w[{i}]": {"state": "running"} for i in range(300)}
    stored = run_shards.split({"state": "running", "taskInstances": tis}, "big-1", inline_limit=10)
    run = {"metadata": {"name": "big-1", "namespace": "team", "uid": "u1"}, "spec": {"dagName": "big"},
           "status": stored.summary}  # fmt: skip

    def shard(name: str, held: dict[str, Any], version: str) -> dict[str, Any]:
        meta = {
            "name": name,
            "namespace": "team",
            "labels": {LABEL_DAGRUN_UID: "u1"},
            "resourceVersion": version,
        }
        return {"metadata": meta, "spec": {}, "status": {"taskInstances": held}}

    store = Store()
    store.replace(DAGRUNS, "team", [run])
    assert "taskInstances" not in store.runs[("team", "big-1")]["status"]  # shards not seen yet: the summary
    store.replace(run_shards.PLURAL, "team", [shard(n, held, "1") for n, held in stored.shards.items()])
    assert store.runs[("team", "big-1")]["status"]["taskInstances"] == tis
    assert store.runs_of("team", "big") == [store.runs[("team", "big-1")]]
    with store.subscription() as queue:
        store.apply(
            run_shards.PLURAL,
            "MODIFIED",
            shard("big-1-1", {**stored.shards["big-1-1"], "w[300]": {"state": "success"}}, "2"),
        )
        change = queue.get_nowait()
    assert (change.kind, change.name, change.dag) == ("DagRun", "big-1", "big")
    assert store.runs[("team", "big-1")]["status"]["taskInstances"]["w[300]"] == {"state": "success"}
