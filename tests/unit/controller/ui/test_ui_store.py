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
