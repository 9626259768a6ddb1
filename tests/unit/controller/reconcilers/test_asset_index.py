"""The AssetEvents and DAGs kept by asset from the watch: what a filtered list would say, never older."""

from __future__ import annotations

import asyncio
from typing import Any

from controller.kube.fake import FakeKube
from controller.reconcilers.asset_index import AssetDagIndex, AssetEventIndex


def event(
    name: str, version: str, uri: str = "s3://b/orders", aliases: list[str] | None = None
) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "resourceVersion": version,
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": {"uri": uri, "aliases": aliases or []},
    }


def names(index: AssetEventIndex, *keys: str) -> list[str]:
    return [e.name for e in index.of_keys("ns", keys)]


def test_events_are_found_by_uri_and_by_the_aliases_they_came_through() -> None:
    index = AssetEventIndex()
    index.observed(event("b", "2"))
    index.observed(event("a", "3", uri="s3://b/other", aliases=["out"]))
    index.observed(event("c", "4", uri="s3://b/third"))
    assert names(index, "s3://b/orders") == ["b"]
    assert names(index, "alias:out") == ["a"]
    assert names(index, "s3://b/orders", "alias:out", "s3://b/other") == ["a", "b"]
    assert names(index, "s3://b/none") == []


def test_an_event_moved_to_another_asset_is_found_only_there_and_older_bodies_are_ignored() -> None:
    index = AssetEventIndex()
    index.observed(event("a", "5", uri="s3://b/x"))
    index.observed(event("a", "4"))  # late
    assert names(index, "s3://b/orders") == [] and names(index, "s3://b/x") == ["a"]
    index.observed(event("a", "6"))
    assert names(index, "s3://b/orders") == ["a"] and names(index, "s3://b/x") == []


def test_an_invalid_body_files_under_nothing_and_hides_the_older_valid_one() -> None:
    index = AssetEventIndex()
    index.observed(event("a", "3"))
    index.observed(event("a", "4", uri="airflow://reserved"))
    assert names(index, "s3://b/orders") == []
    index.observed(event("a", "3"))
    assert names(index, "s3://b/orders") == []


def test_a_deleted_event_is_not_brought_back_by_an_older_list_and_forget_counts_as_deleted() -> None:
    index = AssetEventIndex()
    index.observed(event("a", "3"))
    index.deleted(event("a", "6"))
    index.observed(event("a", "3"))  # a list answered before the deletion
    assert names(index, "s3://b/orders") == []
    index.observed(event("b", "7"))
    index.forget("ns", "b")  # we deleted it; the watch has not said so yet
    index.observed(event("b", "7"))  # the list or watch event we already had
    assert names(index, "s3://b/orders") == []
    index.observed(event("a", "9"))  # made again
    assert names(index, "s3://b/orders") == ["a"]


def test_a_namespace_is_listed_once() -> None:
    kube = FakeKube()
    asyncio.run(kube.create_custom("assetevents", "ns", event("a", "1")))
    index = AssetEventIndex()
    asyncio.run(index.seed(kube, "ns"))
    asyncio.run(kube.create_custom("assetevents", "ns", event("b", "1")))
    asyncio.run(index.seed(kube, "ns"))  # not listed again: the watch reports b
    assert names(index, "s3://b/orders") == ["a"]


def dag(name: str, version: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": version}, "spec": spec}


def test_dags_are_found_by_the_assets_they_produce_or_consume() -> None:
    index = AssetDagIndex()
    producer = {"tasks": [{"id": "t", "outlets": [{"uri": "S3://b/orders/"}]}, {"id": "u"}]}
    index.observed(dag("producer", "1", producer))
    index.observed(dag("consumer", "2", {"assetSchedule": {"any": [{"uri": "s3://b/orders"}]}, "tasks": []}))
    index.observed(dag("timed", "3", {"schedule": "@daily", "tasks": [{"id": "t"}]}))
    assert sorted(index.naming("ns", "s3://b/orders")) == ["consumer", "producer"]
    assert index.naming("ns", "s3://b/orders")["producer"] == {
        "assetSchedule": None,
        "tasks": [{"outlets": [{"uri": "S3://b/orders/"}]}],
    }
    index.observed(dag("consumer", "4", {"assetSchedule": {"uri": "s3://b/other"}, "tasks": []}))
    index.deleted(dag("producer", "5", producer))
    assert index.naming("ns", "s3://b/orders") == {}
    assert list(index.naming("ns", "s3://b/other")) == ["consumer"]
