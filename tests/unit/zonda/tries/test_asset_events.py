"""What a try sees of assets: outlet_events as Airflow 2.10's accessors, the run's consumed events."""

from __future__ import annotations

from typing import Any

import pytest

from zonda.authoring.assets import Dataset, DatasetAlias
from zonda.resources.asset_refs import AssetRef
from zonda.schedules.assets import outlet_events
from zonda.tries import asset_events


def test_outlet_events_by_asset_by_alias_and_by_string_as_airflow_210() -> None:
    accessors = asset_events.OutletEventAccessors()
    accessors[Dataset("s3://b/out")].extra = {"rows": 1}
    accessors["example-alias"].add(Dataset("s3://bucket/my-task"))  # a string key adds through an alias
    accessors[DatasetAlias("other")].add("s3://b/x", extra={"k": 1})
    wire = accessors.to_wire()
    assert wire["extras"] == {"s3://b/out": {"rows": 1}}
    outlets = [AssetRef(uri="s3://b/out"), AssetRef(alias="example-alias"), AssetRef(alias="other")]
    found = {(e.uri, e.aliases): dict(e.extra) for e in outlet_events(outlets, wire)}
    assert found == {
        ("s3://b/out", ()): {"rows": 1},
        ("s3://bucket/my-task", ("example-alias",)): {},
        ("s3://b/x", ("other",)): {"k": 1},
    }


def test_a_generator_task_yields_metadata_into_its_outlet_events() -> None:
    from zonda.authoring.assets import Metadata

    def task():  # type: ignore[no-untyped-def]
        yield Metadata(Dataset("s3://b/out"), {"rows": 3})
        return "done"

    accessors = asset_events.OutletEventAccessors()
    assert asset_events.drain_metadata(task(), accessors) == "done"
    assert accessors.to_wire()["extras"] == {"s3://b/out": {"rows": 3}}


def test_triggering_and_inlet_events_are_keyed_by_uri_asset_or_alias() -> None:
    wire = [
        {"name": "e2", "uri": "s3://b/a", "timestamp": "2026-03-01T00:00:02Z", "aliases": ["al"]},
        {"name": "e1", "uri": "s3://b/a", "timestamp": "2026-03-01T00:00:01Z", "extra": {"x": 1}},
    ]
    events = asset_events.triggering_events(wire)
    assert [e.id for e in events["s3://b/a"]] == ["e2", "e1"]
    assert events[Dataset("s3://b/a")][1].extra == {"x": 1} and Dataset("s3://b/a") in events
    inlets = asset_events.InletEventsAccessor(events)
    assert [e.id for e in inlets[Dataset("s3://b/a")]] == ["e1", "e2"]
    assert [e.id for e in inlets[DatasetAlias("al")]] == ["e2"]
    assert events["s3://b/a"][0].dataset.uri == "s3://b/a"


def body(name: str, uri: str, timestamp: str | None, created: str, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "creationTimestamp": created},
        "spec": {"uri": uri, **({"timestamp": timestamp} if timestamp else {}), **spec},
    }


def test_inlet_events_are_every_event_of_the_asset_oldest_first_not_only_the_runs() -> None:
    """Airflow 3's `inlet_events[asset]` asks the API server for the asset's events, ascending by
    timestamp: `[-1]` is the most recent, whether or not it triggered the run."""
    own = asset_events.triggering_events(
        [{"name": "mine", "uri": "s3://b/a", "timestamp": "2026-03-01T00:00:05Z", "extra": {"n": 5}}]
    )
    listed: list[int] = []

    def lister() -> list[dict[str, Any]]:
        listed.append(1)
        return [
            body("late", "s3://b/a", None, "2026-03-01T00:00:09Z", extra={"n": 9}),
            body("early", "s3://b/a", "2026-03-01T00:00:01Z", "2026-03-01T00:00:08Z", extra={"n": 1}),
            body("other", "s3://b/other", None, "2026-03-01T00:00:02Z"),
            body("aliased", "s3://b/c", None, "2026-03-01T00:00:03Z", aliases=["al"]),
            {"metadata": {"name": "no-uri"}, "spec": {}},
        ]

    inlets = asset_events.InletEventsAccessor(own, lister)
    assert listed == [], "nothing is read before a task asks"
    events = inlets[Dataset("s3://b/a")]
    assert [e.id for e in events] == ["early", "mine", "late"], "the run's own copy is kept (deleted since)"
    assert events[-1].extra == {"n": 9} and events[-1].timestamp.tzinfo is not None
    assert [e.id for e in inlets.for_asset(uri="s3://b/a")] == ["early", "mine", "late"]
    assert [e.id for e in inlets.for_asset_alias(name="al")] == ["aliased"]
    assert [e.id for e in inlets["s3://b/other"]] == ["other"]
    assert listed == [1], "listed once per try"
    # without a cluster (`zonda dags test`): only the run's own events
    assert [e.id for e in asset_events.InletEventsAccessor(own)[Dataset("s3://b/a")]] == ["mine"]


def test_inlet_events_query_methods_narrow_and_order_as_airflow_3s_api_server() -> None:
    """Airflow 3.3's `InletEventsAccessor.after/before/ascending/limit`, as its execution API's
    `/asset-events/by-asset` applies them: bounds inclusive on the timestamp, descending when not
    ascending, the limit taken in that order; each call narrows the same object and returns it."""
    own = asset_events.triggering_events([])

    def lister() -> list[dict[str, Any]]:
        return [
            body(f"e{n}", "s3://b/a", f"2026-03-01T00:00:0{n}Z", "2026-03-01T00:01:00Z") for n in range(1, 6)
        ]

    inlets = asset_events.InletEventsAccessor(own, lister)
    ids = lambda events: [e.id for e in events]  # noqa: E731
    assert ids(inlets[Dataset("s3://b/a")]) == ["e1", "e2", "e3", "e4", "e5"], "a positive control"
    query = inlets[Dataset("s3://b/a")]
    assert query.after("2026-03-01T00:00:02Z") is query, "chains on the same object"
    assert ids(query) == ["e2", "e3", "e4", "e5"], "after is inclusive"
    assert ids(query.before("2026-03-01T02:00:04+02:00")) == ["e2", "e3", "e4"], "before too, any offset"
    assert ids(query.ascending(False)) == ["e4", "e3", "e2"]
    assert ids(query.limit(2)) == ["e4", "e3"], "the newest two"
    assert ids(query.limit(0)) == ["e4", "e3", "e2"], "0 is no limit, as Airflow's `if limit:`"
    assert len(query) == 3 and query[0].id == "e4"
    newest = inlets.for_asset(uri="s3://b/a").ascending(False).limit(1)
    assert ids(newest) == ["e5"]
    with pytest.raises(ValueError, match="timezone"):
        inlets[Dataset("s3://b/a")].after("2026-03-01T00:00:00")
    with pytest.raises(ValueError, match="limit"):
        inlets[Dataset("s3://b/a")].limit(-1)
