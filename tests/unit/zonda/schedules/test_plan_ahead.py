"""A DAG's plan for its next wake-up, made before it (`dag_plans.plan_ahead`), and when it holds.

Pure: the plan made ahead must be exactly `plan_dag`'s answer for any moment the pass at the wake-up
may run at (it fires late on a busy controller), and nothing is made ahead where a timetable's answer
moves between its wake-ups.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from zonda.resources.models import DagStatus
from zonda.schedules import dag_plans
from zonda.timetables import CronTriggerTimetable

CREATED = datetime(2026, 1, 1, tzinfo=UTC)
AT = datetime(2026, 12, 5, 8, 1, tzinfo=UTC)  # a minute boundary
TASKS = [{"id": "e", "operator": "EmptyOperator"}]


def spec(**fields: Any) -> dict[str, Any]:
    return {"startDate": "2026-01-01T00:00:00Z", "catchup": False, "tasks": TASKS} | fields


def ahead_of(raw: dict[str, Any], *, at: datetime = AT) -> dag_plans.PlanAhead | None:
    prepared = dag_plans.prepare_dag("d", raw)
    return dag_plans.plan_ahead(
        "d", prepared, status=DagStatus(), generation=1, created_at=CREATED, runs=(), version="7", at=at
    )


def planned_now(raw: dict[str, Any], now: datetime) -> dag_plans.DagPlan:
    return dag_plans.plan_dag(
        "d", raw, status=DagStatus(), generation=1, created_at=CREATED, runs=(), now=now
    )


STEADY = {
    "cron, every minute": (spec(schedule="* * * * *"), AT, timedelta(minutes=1)),
    "cron, daily, catchup on": (spec(schedule="@daily", catchup=True, startDate="2026-12-04T00:00:00Z"),
                                datetime(2026, 12, 5, tzinfo=UTC), timedelta(days=1)),
    "an epoch-aligned delta": (spec(schedule="30m"), datetime(2026, 12, 5, 8, 30, tzinfo=UTC),
                               timedelta(minutes=30)),
}  # fmt: skip


@pytest.mark.parametrize("raw, at, period", STEADY.values(), ids=STEADY.keys())
def test_the_plan_made_ahead_is_plan_dags_answer_at_every_moment_until_the_next_wake_up(
    raw: dict[str, Any], at: datetime, period: timedelta
) -> None:
    ahead = ahead_of(raw, at=at)
    assert ahead is not None and ahead.plan.runs_to_create, ahead
    assert ahead.plan.wake_at == at + period
    for late in (timedelta(0), timedelta(seconds=1), period / 2, period - timedelta(microseconds=1)):
        now = at + late
        assert ahead.holds(version="7", runs=(), now=now), late
        assert planned_now(raw, now).runs_to_create == ahead.plan.runs_to_create, late


def test_a_cron_trigger_timetable_is_planned_ahead_too() -> None:
    prepared = dag_plans.prepare_dag("d", spec(schedule="* * * * *"))
    trigger = dag_plans.PreparedDag(
        spec=prepared.spec, timetable=CronTriggerTimetable("* * * * *", timezone="UTC")
    )
    ahead = dag_plans.plan_ahead(
        "d", trigger, status=DagStatus(), generation=1, created_at=CREATED, runs=(), version="7", at=AT
    )
    assert ahead is not None and [r.run_after for r in ahead.plan.runs_to_create] == [AT]


def test_it_no_longer_holds_before_its_time_after_the_next_wake_up_or_once_the_dag_or_its_runs_changed() -> (
    None
):
    ahead = ahead_of(spec(schedule="* * * * *"))
    assert ahead is not None
    assert ahead.holds(version="7", runs=(), now=AT), "positive control"
    assert not ahead.holds(version="7", runs=(), now=AT - timedelta(microseconds=1)), "too early"
    assert not ahead.holds(version="7", runs=(), now=AT + timedelta(minutes=1)), "a whole period late"
    assert not ahead.holds(version="8", runs=(), now=AT), "the DAG changed (spec, status, metadata)"
    assert not ahead.holds(version=None, runs=(), now=AT), "no version to compare"
    run = dag_plans.RunRef(name="r", created_at=AT, run_type=None, state=None, data_interval=None)
    assert not ahead.holds(version="7", runs=(run,), now=AT), "its runs changed"


NOT_AHEAD = {
    "@continuous: its interval ends at the moment asked": spec(schedule="@continuous"),
    "a paused DAG": spec(schedule="* * * * *", paused=True),
    "no schedule": spec(schedule=None),
    "@once, already past": spec(schedule="@once"),
    "an asset schedule": spec(schedule="* * * * *", assetSchedule={"uri": "s3://b/k"}),
}


@pytest.mark.parametrize("raw", NOT_AHEAD.values(), ids=NOT_AHEAD.keys())
def test_nothing_is_planned_ahead_where_it_could_not_stand(raw: dict[str, Any]) -> None:
    assert ahead_of(raw) is None


def test_nothing_is_planned_ahead_when_max_active_runs_holds_the_run_back() -> None:
    prepared = dag_plans.prepare_dag("d", spec(schedule="* * * * *", maxActiveRuns=1))
    active = dag_plans.RunRef(name="r", created_at=CREATED, run_type=None, state=None, data_interval=None)
    ahead = dag_plans.plan_ahead(
        "d",
        prepared,
        status=DagStatus(),
        generation=1,
        created_at=CREATED,
        runs=(active,),
        version="7",
        at=AT,
    )
    assert ahead is None
