"""`zonda dags next-runs`: the next runs a schedule creates, as the scheduler decides them."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from zonda.resources.models import DagSpec, DagStatus
from zonda.schedules.upcoming import next_runs

NOW = datetime(2024, 3, 10, 15, 30, tzinfo=UTC)


def dag(**spec: Any) -> DagSpec:
    return DagSpec.model_validate({"tasks": [{"id": "t", "operator": "EmptyOperator"}], **spec})


def test_without_catchup_the_latest_interval_then_the_future_ones() -> None:
    spec = dag(schedule="@daily", startDate="2024-01-01T00:00:00Z", catchup=False)
    runs = next_runs(spec, DagStatus(), now=NOW, count=3)
    assert [r.logical_date.isoformat() for r in runs] == [
        "2024-03-09T00:00:00+00:00", "2024-03-10T00:00:00+00:00", "2024-03-11T00:00:00+00:00",
    ]  # fmt: skip
    assert runs[1].run_after == datetime(2024, 3, 11, tzinfo=UTC)


def test_after_the_last_automated_interval_in_status() -> None:
    spec = dag(schedule="0 6 * * *", startDate="2024-01-01T00:00:00Z")
    status = DagStatus(
        last_automated_data_interval_start=datetime(2024, 3, 1, 6, tzinfo=UTC),
        last_automated_data_interval_end=datetime(2024, 3, 2, 6, tzinfo=UTC),
    )
    assert [r.logical_date.day for r in next_runs(spec, status, now=NOW, count=2)] == [2, 3]


def test_the_end_date_and_a_manual_dag_bound_the_list() -> None:
    ending = dag(schedule="@daily", startDate="2024-03-01T00:00:00Z", endDate="2024-03-02T00:00:00Z")
    assert len(next_runs(ending, DagStatus(), now=NOW, count=10)) == 2
    assert next_runs(dag(schedule=None), DagStatus(), now=NOW, count=3) == []
