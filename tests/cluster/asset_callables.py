"""Task functions of tests/cluster/test_assets.py (the runner imports them by path)."""

from __future__ import annotations

from typing import Any


def produce(outlet_events: Any, run_id: str, **_: Any) -> str:
    """Airflow's `outlet_events[dataset].extra = {...}` (example_outlet_event_extra)."""
    outlet_events["s3://assets-test/orders"].extra = {"rows": 42, "run": run_id}
    return "produced"


def report(triggering_dataset_events: Any, **_: Any) -> list[dict[str, Any]]:
    """What the consumer's run was triggered by, as Airflow 2's tasks read it."""
    return [
        {
            "uri": uri,
            "extra": dict(e.extra),
            "source_dag_id": e.source_dag_id,
            "source_task_id": e.source_task_id,
        }
        for uri, events in sorted(triggering_dataset_events.items())
        for e in events
    ]


def partition_of(dag_run: Any, **_: Any) -> str | None:
    """The run's partition (Airflow 3.2+'s `dag_run.partition_key`), as its task sees it."""
    return dag_run.partition_key  # type: ignore[no-any-return]
