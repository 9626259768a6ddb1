"""The work queue's per-key backoff, and a failing reconcile reported on the object.

`Backoff` is pure (counts, no clock), so its delays are a table. The queue test runs a real event
loop with millisecond delays and waits on outcomes, never on time. The report is checked against
`FakeKube`, where the condition and the Event land.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from controller.kube import DAGS
from controller.kube.fake import FakeKube
from controller.manager.workqueue import Backoff, WorkQueue
from controller.processes import clock
from controller.reconcilers.reconcilers import Reconcilers
from tests.unit.fake_world import FakeExecutor, dag_body


def test_delays_double_per_failure_up_to_the_cap_and_reset_on_success() -> None:
    backoff = Backoff(base=0.5, cap=5.0)
    assert [backoff.failed("a") for _ in range(6)] == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0]
    assert backoff.failed("b") == 0.5  # per key
    assert backoff.succeeded("a") == 6
    assert backoff.failed("a") == 0.5


def test_a_failing_streak_is_reported_exactly_once() -> None:
    backoff = Backoff(report_after=3)
    reported = []
    for _ in range(6):
        backoff.failed("k")
        reported.append(backoff.should_report("k"))
    assert reported == [False, False, True, False, False, False]


def test_the_queue_retries_with_backoff_reports_once_and_recovers() -> None:
    calls: list[Hashable] = []
    failing: list[tuple[Hashable, int, str]] = []
    recovered: list[Hashable] = []

    async def scenario() -> None:
        done = asyncio.Event()

        async def reconcile(key: Hashable) -> datetime | None:
            calls.append(key)
            if len(calls) <= 4:
                raise RuntimeError(f"boom {len(calls)}")
            done.set()
            return None

        async def on_failing(key: Hashable, failures: int, error: BaseException) -> None:
            failing.append((key, failures, str(error)))

        async def on_recovered(key: Hashable) -> None:
            recovered.append(key)

        queue = WorkQueue(
            reconcile,
            workers=1,
            backoff=Backoff(base=0.001, cap=0.004, report_after=3),
            on_failing=on_failing,
            on_recovered=on_recovered,
        )
        queue.start()
        queue.add("key")
        await asyncio.wait_for(done.wait(), timeout=30)
        await asyncio.sleep(0)
        await queue.stop()

    asyncio.run(scenario())
    assert calls == ["key"] * 5
    assert failing == [("key", 3, "boom 3")]
    assert recovered == ["key"]


@pytest.mark.parametrize("recovers", [False, True])
def test_a_failing_reconcile_says_so_on_the_object(recovers: bool) -> None:
    kube = FakeKube()
    reconcilers = Reconcilers(kube, FakeExecutor())

    async def scenario() -> None:
        await kube.create_custom(DAGS, "ns", dag_body("etl"))
        for _ in range(2):  # reported once, however often the queue calls it
            await reconcilers.report_failing(DAGS, "ns", "etl", 3, RuntimeError("apiserver said no"))
        if recovers:
            await reconcilers.report_recovered(DAGS, "ns", "etl")

    asyncio.run(scenario())
    condition = kube.objects[(DAGS, "ns", "etl")]["status"]["conditions"][0]
    reasons = [event.reason for event in kube.events]
    if recovers:
        assert (condition["status"], condition["reason"]) == ("True", "Reconciled")
        assert reasons == ["ReconcileFailing", "Reconciled"]
    else:
        assert (condition["type"], condition["status"], condition["reason"]) == (
            "Reconciled",
            "False",
            "ReconcileFailing",
        )
        assert "RuntimeError: apiserver said no" in condition["message"]
        assert reasons == ["ReconcileFailing"]
        assert kube.events[0].warning


def test_recovering_without_having_failed_writes_nothing() -> None:
    kube = FakeKube()
    reconcilers = Reconcilers(kube, FakeExecutor())

    async def scenario() -> None:
        await kube.create_custom(DAGS, "ns", dag_body("etl"))
        await reconcilers.report_recovered(DAGS, "ns", "etl")

    asyncio.run(scenario())
    assert "status" not in kube.objects[(DAGS, "ns", "etl")] and kube.events == []


def test_a_key_added_while_it_is_reconciled_is_reconciled_again_after_never_alongside() -> None:
    """A DAG's pass decides how many runs to create from what it read: two at once of one DAG could
    both create up to maxActiveRuns. Four workers, the key added again while its pass runs."""
    running: set[Hashable] = set()
    overlaps: list[Hashable] = []
    passes: list[Hashable] = []

    async def scenario() -> None:
        release, entered, second = asyncio.Event(), asyncio.Event(), asyncio.Event()

        async def reconcile(key: Hashable) -> datetime | None:
            if key in running:
                overlaps.append(key)
            running.add(key)
            passes.append(key)
            try:
                if len(passes) == 1:
                    entered.set()
                    await release.wait()
                else:
                    second.set()
            finally:
                running.discard(key)
            return None

        queue = WorkQueue(reconcile, workers=4)
        queue.start()
        queue.add("dag")
        await asyncio.wait_for(entered.wait(), timeout=30)
        queue.add("dag")
        queue.add("dag")  # twice while active: once more afterwards
        assert not second.is_set() and queue.pending == 1
        release.set()
        await asyncio.wait_for(second.wait(), timeout=30)
        await queue.stop()

    asyncio.run(scenario())
    assert passes == ["dag", "dag"]
    assert overlaps == []


def test_wake_ups_follow_the_wall_clock_when_it_is_stepped(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A wake-up asked for an hour ahead, then the clock steps an hour forward: it fires now, not in an
    hour (the queue's own check realigns it; `realign` is what that check calls)."""
    offset = tmp_path / "offset"
    monkeypatch.setenv(clock.OFFSET_FILE_ENV, str(offset))

    async def scenario() -> int:
        done = asyncio.Event()

        async def reconcile(key: Hashable) -> datetime | None:
            done.set()
            return None

        queue = WorkQueue(reconcile, workers=1)
        queue.resume()
        queue.start()
        loop = asyncio.get_running_loop()
        queue.add_at("dag", clock.now_utc() + timedelta(hours=1))
        assert queue._timers["dag"][0] > loop.time() + 3000  # positive control: an hour away
        offset.write_text("3600")
        moved = queue.realign()
        await asyncio.wait_for(done.wait(), 10)
        await queue.stop()
        return moved

    assert asyncio.run(scenario()) == 1


def test_dag_keys_are_picked_before_run_keys_added_earlier_and_in_order_within_a_kind() -> None:
    order: list[Hashable] = []

    async def scenario() -> None:
        done = asyncio.Event()

        async def reconcile(key: Hashable) -> datetime | None:
            order.append(key)
            if len(order) == 4:
                done.set()
            return None

        queue = WorkQueue(reconcile, workers=1, priority=lambda key: 0 if key[0] == "dag" else 1)
        for key in [("run", "a"), ("dag", "x"), ("run", "b"), ("dag", "y")]:
            queue.add(key)
        queue.start()
        await asyncio.wait_for(done.wait(), timeout=30)
        await queue.stop()

    asyncio.run(scenario())
    assert order == [("dag", "x"), ("dag", "y"), ("run", "a"), ("run", "b")]


class Passes:
    """The keys reconciled, in order; `until(n)` waits for the n-th (a condition, not a sleep). A pass
    of `blocked` holds the one worker until `gate` is set."""

    def __init__(self, blocked: Hashable | None = None) -> None:
        self.keys: list[Hashable] = []
        self.seen = asyncio.Condition()
        self.gate = asyncio.Event()
        self.blocked = blocked

    async def reconcile(self, key: Hashable) -> datetime | None:
        if key == self.blocked:
            await self.gate.wait()
        async with self.seen:
            self.keys.append(key)
            self.seen.notify_all()
        return None

    async def until(self, count: int) -> None:
        async with self.seen:
            await asyncio.wait_for(self.seen.wait_for(lambda: len(self.keys) >= count), timeout=30)


def test_add_soon_reconciles_after_its_delay_or_with_a_pass_that_starts_sooner() -> None:
    passes = Passes()

    async def scenario() -> None:
        queue = WorkQueue(passes.reconcile, workers=1)
        queue.start()
        queue.add_soon("late", 0.01)  # nothing else: one pass after the delay
        await passes.until(1)
        queue.add_soon("early", 3600.0)  # an hour away, but a pass starts now and sees its news
        queue.add("early")
        await passes.until(2)
        assert not queue._soon, "the pass that started dropped the delayed one"
        queue.add_soon("marker", 0.01)  # positive control: the queue still runs delayed passes
        await passes.until(3)
        await queue.stop()

    asyncio.run(scenario())
    assert passes.keys == ["late", "early", "marker"]


def test_a_soon_pass_at_a_lower_priority_waits_behind_queued_work_and_shares_the_news_after_it() -> None:
    """A task's start (`add_soon(..., priority=3)`): when its delay is up while other passes are
    queued, it waits behind them, and the task's end (`add`) moves it up: one pass records both. With
    nothing queued it runs at its delay; `latest` bounds its wait behind others."""
    passes = Passes(blocked="busy")

    async def scenario() -> None:
        added = asyncio.Condition()

        class Queue(WorkQueue):
            def add(self, key: Hashable, priority: int | None = None) -> None:
                super().add(key, priority)
                asyncio.get_running_loop().create_task(notify())

        async def notify() -> None:
            async with added:
                added.notify_all()

        async def waiting(key: str, priority: int) -> None:
            async with added:
                await asyncio.wait_for(
                    added.wait_for(lambda: queue._waiting.get(key) == priority), timeout=30
                )

        queue = Queue(passes.reconcile, workers=1, priority=lambda key: 1)
        queue.start()
        queue.add("busy")
        queue.add("other")  # queued behind it, at the key's own priority
        queue.add_soon("started", 0.01, priority=3, latest=3600.0)
        await waiting("started", 3)  # its delay is up: queued, at priority 3
        queue.add("started")  # the task's end: moves it up, behind "other" (same priority, added first)
        queue.add("last")
        passes.gate.set()
        await passes.until(4)
        assert not queue._soon, "the pass that started dropped the promotion timer"
        queue.add_soon("idle", 0.01, priority=3, latest=3600.0)  # positive control: nothing queued
        await passes.until(5)
        passes.gate.clear()
        queue.add("busy")
        queue.add_soon("bounded", 0.01, priority=3, latest=0.05)  # waits behind "waiting" at most 0.05 s
        queue.add("waiting", priority=2)
        await waiting("bounded", 1)  # promoted to its own priority
        passes.gate.set()
        await passes.until(8)
        await queue.stop()

    asyncio.run(scenario())
    assert passes.keys == ["busy", "other", "started", "last", "idle", "busy", "bounded", "waiting"]


def dags_first(key: Hashable) -> int:
    return 0 if isinstance(key, tuple) and key[0] == "dag" else 1


def test_a_key_added_at_a_lower_priority_waits_for_the_others_and_moves_up_when_added_again() -> None:
    """`add(key, priority)`: a DAG's status-writing pass after the run passes queued; its run's start
    adds it again at the DAG priority, and it moves up, reconciled once."""

    def picked(upgrade: bool) -> list[Hashable]:
        order: list[Hashable] = []

        async def scenario() -> None:
            done = asyncio.Event()

            async def reconcile(key: Hashable) -> datetime | None:
                order.append(key)
                if key == ("end",):
                    done.set()
                return None

            queue = WorkQueue(reconcile, workers=1, priority=dags_first)
            queue.add(("dag", "x"), 2)
            queue.add(("run", "a"))
            queue.add(("dag", "y"))
            if upgrade:
                queue.add(("dag", "x"))
            queue.add(("end",), 3)  # after any entry of x left behind
            queue.start()
            await asyncio.wait_for(done.wait(), timeout=30)
            await queue.stop()

        asyncio.run(scenario())
        return order

    assert picked(upgrade=False) == [("dag", "y"), ("run", "a"), ("dag", "x"), ("end",)]
    assert picked(upgrade=True) == [("dag", "y"), ("dag", "x"), ("run", "a"), ("end",)]


def test_a_key_added_at_a_lower_priority_during_its_pass_is_queued_at_it_afterwards() -> None:
    order: list[Hashable] = []

    async def scenario() -> None:
        done = asyncio.Event()
        queue: WorkQueue

        async def reconcile(key: Hashable) -> datetime | None:
            order.append(key)
            if key == ("dag", "x") and order.count(key) == 1:
                queue.add(key, 2)  # during its own pass: queued again afterwards, at 2
                queue.add(("run", "a"))
            if len(order) == 3:
                done.set()
            return None

        queue = WorkQueue(reconcile, workers=1, priority=dags_first)
        queue.add(("dag", "x"))
        queue.start()
        await asyncio.wait_for(done.wait(), timeout=30)
        await queue.stop()

    asyncio.run(scenario())
    assert order == [("dag", "x"), ("run", "a"), ("dag", "x")]
