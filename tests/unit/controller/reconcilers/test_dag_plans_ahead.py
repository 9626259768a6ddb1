"""A DAG's pass at its wake-up carries out the plan the pass before it made ahead, without planning;
a DAG or runs changed since make it plan again.

Real: the DAG reconciler, the status writer, the run refs, the pure core (`dag_plans.plan_ahead`).
Fake: the API (`FakeKube`, whose resourceVersion moves on every write; a test that changes a spec
bumps generation and resourceVersion as the apiserver does). `plan_dag` is wrapped to count its calls.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from controller.kube import DAGRUNS, DAGS
from controller.kube.fake import FakeKube
from controller.reconcilers.dags import DagRunRefs
from controller.reconcilers.reconcilers import Reconcilers
from tests.unit.fake_world import NS, FakeExecutor, dag_body, settle
from zonda.schedules import dag_plans


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def run_names(kube: FakeKube) -> list[str]:
    return sorted(name for kind, _, name in kube.objects if kind == DAGRUNS)


class World:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.kube = FakeKube()
        self.reconcilers = Reconcilers(self.kube, FakeExecutor())
        self.reconcilers.dags.keep_runs(DagRunRefs())
        self.later: list[str] = []
        self.reconcilers.dags.later = lambda namespace, name: self.later.append(name)
        self.plans = 0
        original = dag_plans.plan_dag

        def counted(*args: Any, **kwargs: Any) -> dag_plans.DagPlan:
            self.plans += 1
            return original(*args, **kwargs)

        monkeypatch.setattr(dag_plans, "plan_dag", counted)

    async def dag_pass(self, now: str) -> datetime | None:
        body = await self.kube.get_custom(DAGS, NS, "minutely")
        assert body is not None
        return await self.reconcilers.dags.reconcile_object(body, at(now))

    async def a_minute_up_to_its_boundary(self) -> None:
        spec = {"schedule": "* * * * *", "catchup": False, "startDate": "2026-01-01T00:00:00Z"}
        await self.kube.create_custom(DAGS, NS, dag_body("minutely", **spec))
        assert await self.dag_pass("2026-12-05T08:00:00.5") == at("2026-12-05T08:01:00")  # creates 07:59
        assert self.later == ["minutely"], "the creating pass left its status to a later pass"
        assert await self.dag_pass("2026-12-05T08:00:01") == at("2026-12-05T08:01:00")  # writes the status
        assert run_names(self.kube) == ["minutely-scheduled-20261205t075900z"]


def after_a_minute(monkeypatch: pytest.MonkeyPatch, then: Callable[[World], Awaitable[None]]) -> None:
    """A DAG on `* * * * *` created at 08:00, its creating and status passes, then `then` at 08:01."""
    world = World(monkeypatch)

    async def scenario() -> None:
        await world.a_minute_up_to_its_boundary()
        await then(world)
        await settle()

    asyncio.run(scenario())


def test_the_pass_at_the_boundary_creates_the_run_planned_ahead_without_planning(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def then(world: World) -> None:
        planned = world.plans
        assert await world.dag_pass("2026-12-05T08:01:02") == at("2026-12-05T08:02:00")
        assert world.plans == planned, "the boundary's pass did not plan"
        assert run_names(world.kube) == [
            "minutely-scheduled-20261205t075900z",
            "minutely-scheduled-20261205t080000z",
        ]
        assert world.reconcilers.dags.ahead.used == 1
        assert world.later == ["minutely", "minutely"], "its status is left to a later pass, as before"
        assert await world.dag_pass("2026-12-05T08:01:03") == at("2026-12-05T08:02:00")
        status = world.kube.objects[(DAGS, NS, "minutely")]["status"]
        assert status["lastAutomatedDataIntervalEnd"] == "2026-12-05T08:01:00Z", status
        assert world.kube.writes.get("create dagruns") == 2, "each run created once"

    after_a_minute(monkeypatch, then)


def test_a_dag_paused_after_its_plan_was_made_plans_again_and_creates_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def then(world: World) -> None:
        stored = world.kube.objects[(DAGS, NS, "minutely")]
        stored["spec"]["paused"] = True  # the user's change: the apiserver bumps both
        stored["metadata"]["generation"] = 2
        stored["metadata"]["resourceVersion"] = str(int(stored["metadata"]["resourceVersion"]) + 100)
        planned = world.plans
        await world.dag_pass("2026-12-05T08:01:02")
        assert world.plans == planned + 1, "planned again"
        assert world.reconcilers.dags.ahead.stale == 1
        assert run_names(world.kube) == ["minutely-scheduled-20261205t075900z"], "nothing created"

    after_a_minute(monkeypatch, then)


def test_a_run_changed_since_plans_again(monkeypatch: pytest.MonkeyPatch) -> None:
    async def then(world: World) -> None:
        run = dict(world.kube.objects[(DAGRUNS, NS, "minutely-scheduled-20261205t075900z")])
        run["status"] = {"state": "success"}
        await world.kube.replace_custom_status(DAGRUNS, NS, run)
        refs = world.reconcilers.dags.runs
        assert refs is not None
        refs.observed(world.kube.objects[(DAGRUNS, NS, "minutely-scheduled-20261205t075900z")])
        planned = world.plans
        await world.dag_pass("2026-12-05T08:01:02")
        assert world.plans == planned + 1 and world.reconcilers.dags.ahead.stale == 1
        assert len(run_names(world.kube)) == 2, "created, by the pass's own plan"

    after_a_minute(monkeypatch, then)


def test_a_pass_before_the_wake_up_that_changes_nothing_keeps_the_plan_and_plans_none_ahead_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def then(world: World) -> None:
        planned = world.plans
        await world.dag_pass("2026-12-05T08:00:30")  # woken by something that changed nothing
        assert world.plans == planned + 1, "its own plan only: the one made ahead is still good"
        await world.dag_pass("2026-12-05T08:01:00.2")
        assert world.plans == planned + 1, "the boundary's pass did not plan"
        ahead = world.reconcilers.dags.ahead
        assert (ahead.used, ahead.stale) == (1, 0)
        assert len(run_names(world.kube)) == 2

    after_a_minute(monkeypatch, then)
