"""An asset-triggered run's dates, per dialect: Airflow 3 gives it no logical date and no data interval
and runs it after the newest event it consumed; Airflow 2.10 gives it both.

Airflow 3.3's `SchedulerJobRunner._create_dag_runs_asset_triggered` (airflow-core
`jobs/scheduler_job_runner.py`): `create_dagrun(run_id=DagRun.generate_run_id(run_type=ASSET_TRIGGERED,
logical_date=None, run_after=triggered_date), logical_date=None, data_interval=None,
run_after=triggered_date)`, `triggered_date` the newest queued event's time; the run id is
``asset_triggered__<run_after.isoformat()>``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from controller.reconcilers.dags import asset_triggered_run
from zonda.passes import plans
from zonda.resources.asset_models import TriggeringEvent
from zonda.resources.dagrun_models import DagRunSpec, DagRunStatus
from zonda.schedules import assets

FIRST = datetime(2026, 5, 1, 10, 0, tzinfo=UTC)
NEWEST = datetime(2026, 5, 1, 10, 7, 30, tzinfo=UTC)
CREATED = datetime(2026, 5, 1, 10, 7, 31, tzinfo=UTC)


def events() -> list[TriggeringEvent]:
    return [
        TriggeringEvent(name="e1", uri="s3://b/orders", timestamp=FIRST),
        TriggeringEvent(name="e2", uri="s3://b/orders", timestamp=NEWEST),
    ]


def consumer(version: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedule": None,
        "assetSchedule": {"uri": "s3://b/orders"},
        "tasks": [{"id": "t", "operator": "BashOperator", "args": {"bash_command": "echo {{ run_id }}"}}],
    }
    if version is not None:
        spec["airflowVersion"] = version
    return {"metadata": {"name": "consumer", "namespace": "ns", "uid": "u"}, "spec": spec}


def started(dag: dict[str, Any]) -> DagRunStatus:
    condition = assets.parse_condition(dag["spec"]["assetSchedule"])
    due = assets.decide_asset_run("consumer", condition, events())
    assert due is not None
    spec = DagRunSpec.model_validate(asset_triggered_run(dag, due)["spec"])
    result = plans.start_run(
        spec,
        DagRunStatus(),
        plans.DagRef(dag["spec"], 1),
        namespace="ns",
        created_at=CREATED,
        generation=1,
        now=CREATED,
    )
    assert result.started
    return result.status


def test_an_airflow3_asset_triggered_run_has_no_logical_date_and_runs_after_the_newest_event() -> None:
    status = started(consumer("3"))
    assert status.logical_date is None
    assert (status.data_interval_start, status.data_interval_end) == (None, None)
    assert status.run_after == NEWEST
    assert status.run_id == "asset_triggered__2026-05-01T10:07:30+00:00"


@pytest.mark.parametrize("version", ["2", None])
def test_an_airflow2_asset_triggered_run_is_at_the_newest_event_over_the_events_span(
    version: str | None,
) -> None:
    status = started(consumer(version))
    assert status.logical_date == NEWEST
    assert (status.data_interval_start, status.data_interval_end) == (FIRST, NEWEST)
