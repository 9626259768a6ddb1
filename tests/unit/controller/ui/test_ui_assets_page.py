"""The Assets page's rows: from the Assets' status, each consumer marked waiting when its status awaits it."""

from __future__ import annotations

from controller.ui.assets_page import Consumer, asset_rows


def test_rows_read_the_asset_status_and_the_consumers_awaited_assets() -> None:
    assets = [
        {
            "metadata": {"name": "b-1"},
            "spec": {"uri": "s3://b/z"},
            "status": {
                "consumingDags": ["c1", "c2"],
                "producingDags": ["p"],
                "events": 3,
                "lastEvent": "e3",
                "lastEventTime": "2026-01-01T00:00:00Z",
                "aliases": ["al"],
            },
        },
        {"metadata": {"name": "a-1"}, "spec": {"uri": "s3://b/a"}},
    ]
    dags = {"c1": {"status": {"awaitedAssets": ["s3://b/z"]}}, "c2": {"status": {"awaitedAssets": []}}}
    first, second = asset_rows(assets, dags)
    assert (first.uri, first.producers, first.events) == ("s3://b/a", [], 0)
    assert second.consumers == [Consumer("c1", waiting=True), Consumer("c2", waiting=False)]
    assert (second.last_event, second.events, second.aliases) == ("e3", 3, ["al"])
