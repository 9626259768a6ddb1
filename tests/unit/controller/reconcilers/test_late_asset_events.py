"""An AssetEvent recorded after its consumer moved on, with an older timestamp, is still consumed once.

Real: the reconcilers, the asset index, the pure core. Fake: the API (`FakeKube`, whose clock stamps
creationTimestamp as the apiserver does) and the watch (the test feeds the index). Airflow queues a
consumer when an event is recorded, whatever its timestamp; Zonda's cursor goes by arrival.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

from controller.kube import DAGRUNS, DAGS
from controller.kube.fake import FakeKube
from controller.reconcilers.asset_index import AliasResolutions, AssetDagIndex, AssetEventIndex
from controller.reconcilers.reconcilers import Reconcilers
from tests.unit.fake_world import NS, FakeExecutor, dag_body, settle

URI = "s3://b/orders"
T0 = datetime(2026, 3, 1, tzinfo=UTC)


def consumed(kube: FakeKube) -> list[list[str]]:
    runs = [body for (kind, _, _), body in sorted(kube.objects.items()) if kind == DAGRUNS]
    return sorted(sorted(e["name"] for e in r["spec"]["triggeringAssetEvents"]) for r in runs)


def event(name: str, timestamp: datetime | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"uri": URI}
    if timestamp is not None:
        spec["timestamp"] = timestamp.isoformat()
    return {"kind": "AssetEvent", "metadata": {"name": name}, "spec": spec}


def reconcilers_of(kube: FakeKube, indexed: bool) -> tuple[Reconcilers, AssetEventIndex | None]:
    reconcilers = Reconcilers(kube, FakeExecutor())
    if not indexed:
        return reconcilers, None
    index = reconcilers.dags.asset_events = AssetEventIndex()
    reconcilers.dags.asset_dags, reconcilers.dags.aliases = AssetDagIndex(), AliasResolutions()
    return reconcilers, index


def scenario(indexed: bool) -> FakeKube:
    clock = [T0]
    kube = FakeKube(now=lambda: clock[0])

    async def create(body: dict[str, Any], index: AssetEventIndex | None) -> None:
        created = await kube.create_custom("assetevents", NS, body)
        if index is not None:
            index.observed(created)  # the watch delivers it

    async def run() -> None:
        await kube.create_custom(DAGS, NS, dag_body("consumer", assetSchedule={"uri": URI}))
        reconcilers, index = reconcilers_of(kube, indexed)
        clock[0] = T0 + timedelta(minutes=1)
        await create(event("first"), index)
        await reconcilers.reconcile("dag", NS, "consumer")
        assert consumed(kube) == [["first"]]
        clock[0] = T0 + timedelta(minutes=2)
        # an old timestamp: before the consumed event, before the DAG itself
        await create(event("late", T0 - timedelta(days=30)), index)
        await reconcilers.reconcile("dag", NS, "consumer")
        assert consumed(kube) == [["first"], ["late"]]
        await reconcilers.reconcile("dag", NS, "consumer")
        # a restarted controller: only what the apiserver holds
        restarted, _ = reconcilers_of(kube, indexed)
        await restarted.reconcile("dag", NS, "consumer")
        await settle()

    asyncio.run(run())
    return kube


def test_a_late_event_makes_one_more_run_listing_the_events_each_pass() -> None:
    kube = scenario(indexed=False)
    assert consumed(kube) == [["first"], ["late"]]
    assert kube.writes["create dagruns"] == 2


def test_a_late_event_makes_one_more_run_with_the_index_fed_by_the_watch() -> None:
    kube = scenario(indexed=True)
    assert consumed(kube) == [["first"], ["late"]]
    assert kube.writes["create dagruns"] == 2
