"""Task functions of tests/cluster/test_inlet_events.py (the runner imports them by path)."""

from __future__ import annotations

from typing import Any


def read_inlets(inlet_events: Any, **_: Any) -> dict[str, Any]:
    """Airflow 3's `inlet_events[asset]`: the asset's events, most recent last (example_inlet_event_extra)."""
    events = inlet_events["s3://inlets/orders"]
    return {
        "extras": [dict(e.extra) for e in events],
        "last": events[-1].id,
        "by_uri": [e.id for e in inlet_events.for_asset(uri="s3://inlets/orders")],
        # Airflow 3's query methods: the newest two from the second on
        "newest_two": [
            e.id
            for e in inlet_events["s3://inlets/orders"]
            .after("2026-03-01T00:00:02Z")
            .ascending(False)
            .limit(2)
        ],
    }
