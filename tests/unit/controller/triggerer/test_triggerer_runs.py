"""How the triggerer runs one trigger, and how it notices a blocked loop (`controller.triggerer`).

Real: asyncio, the aiohttp health server on a loopback port. Not here: the Kubernetes API — the
`Triggerer` built for the health checks is never started, so its API connection is never used.
Trigger runs use `FakeClock` (virtual time); the blocked-loop tests block for real, under 0.1 s.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any, cast

import aiohttp
import pytest

from controller.kube import Kube
from controller.processes.health import LagSample, LoopWatchdog, SlowSteps, describe_culprits, serve_http
from controller.triggerer.running import TriggerResult, drive_trigger
from controller.triggerer.runtime import Triggerer
from controller.triggerer.settings import TriggererSettings
from zonda.triggers import BaseTrigger, TriggerEvent
from zonda.triggers.testing import FakeClock

START = datetime(2024, 3, 1, tzinfo=UTC)


class ScriptedTrigger(BaseTrigger):
    """Waits `wait` seconds, then yields, returns or raises; counts cleanups and generator closes."""

    def __init__(self, ending: str, wait: float = 10.0, failing_cleanup: bool = False) -> None:
        super().__init__()
        self.ending, self.wait, self.failing_cleanup = ending, wait, failing_cleanup
        self.cleanups = 0
        self.closed = False

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return ("tests.ScriptedTrigger", {"ending": self.ending, "wait": self.wait})

    async def run(self) -> AsyncIterator[TriggerEvent]:
        try:
            await asyncio.sleep(self.wait)
            if self.ending == "raise":
                raise RuntimeError("the remote service said no")
            if self.ending == "yield":
                yield TriggerEvent({"done": True})
                yield TriggerEvent({"done": "again"})
        finally:
            self.closed = True

    async def cleanup(self) -> None:
        self.cleanups += 1
        if self.failing_cleanup:
            raise OSError("cleanup could not close its connection")


class ReturningTrigger(BaseTrigger):
    """Airflow's classic mistake: `return` the event instead of yielding it."""

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return ("tests.ReturningTrigger", {})

    async def run(self) -> TriggerEvent:  # type: ignore[override]
        return TriggerEvent(1)


def drive(clock: FakeClock, trigger: BaseTrigger) -> list[TriggerResult]:
    results: list[TriggerResult] = []
    clock.run(drive_trigger(trigger, deliver=results.append))
    return results


@pytest.mark.parametrize(
    ("trigger", "expected"),
    [
        pytest.param(
            ScriptedTrigger("yield"),
            TriggerResult(event=TriggerEvent({"done": True})),
            id="the first event is delivered and the rest are never asked for",
        ),
        pytest.param(
            ScriptedTrigger("raise"),
            TriggerResult(failure="Trigger failure: RuntimeError: the remote service said no"),
            id="an exception fails the trigger with its message",
        ),
        pytest.param(
            ScriptedTrigger("return"),
            TriggerResult(failure="Trigger exited without sending an event. Dependent tasks will be failed."),
            id="returning without an event fails the trigger, as in Airflow",
        ),
        pytest.param(
            ScriptedTrigger("yield", failing_cleanup=True),
            TriggerResult(event=TriggerEvent({"done": True})),
            id="a failing cleanup does not lose the event",
        ),
    ],
)
def test_a_run_delivers_one_result_then_cleans_up(trigger: ScriptedTrigger, expected: TriggerResult) -> None:
    with FakeClock(START) as clock:
        assert drive(clock, trigger) == [expected]
    assert trigger.cleanups == 1
    assert trigger.closed


def test_a_trigger_returning_its_event_fails_with_a_hint() -> None:
    with FakeClock(START) as clock:
        [result] = drive(clock, ReturningTrigger())
    assert result.failure is not None
    assert "async generator" in result.failure
    assert "return the event instead of yielding it" in result.failure


def test_a_cancelled_trigger_delivers_nothing_and_is_cleaned_up() -> None:
    trigger = ScriptedTrigger("yield", wait=3600)
    results: list[TriggerResult] = []
    with FakeClock(START) as clock:
        task = clock.loop.create_task(drive_trigger(trigger, deliver=results.append))
        clock.run(asyncio.sleep(60))
        task.cancel()
        clock.run(asyncio.wait([task]))
        assert task.cancelled()
    assert results == []
    assert trigger.cleanups == 1
    assert trigger.closed


#: How long the badly-written trigger blocks, and the lag the watchdogs below call blocked. Far above
#: what a loaded machine stalls a process for (a 40 ms threshold saw a scheduler's or a GC's pause).
BLOCK_SECONDS = 0.4
THRESHOLD_SECONDS = 0.2


class BlockingTrigger(BaseTrigger):
    """A badly-written trigger: a synchronous sleep inside `run()`."""

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return ("tests.BlockingTrigger", {})

    async def run(self) -> AsyncIterator[TriggerEvent]:
        await asyncio.sleep(0.01)
        time.sleep(BLOCK_SECONDS)  # noqa: ASYNC251 - the point of the test
        yield TriggerEvent("late")


async def test_the_watchdog_names_the_trigger_that_blocked_the_loop(caplog: pytest.LogCaptureFixture) -> None:
    slow_steps = SlowSteps(minimum_seconds=THRESHOLD_SECONDS / 2)
    watchdog = LoopWatchdog(
        interval=0.01,
        threshold=THRESHOLD_SECONDS,
        describe=lambda: describe_culprits(slow_steps, ["blocker", "polite"]),
    )
    watching = asyncio.create_task(watchdog.run())
    caplog.set_level(logging.WARNING, logger="controller.processes.health")
    await asyncio.sleep(0.02)
    report = slow_steps.reporter("blocker")
    await drive_trigger(BlockingTrigger(), deliver=lambda result: None, report_step=report)
    await asyncio.sleep(0.03)
    watching.cancel()
    # The one warning naming the culprit (a loaded machine may stall the loop elsewhere too), with the
    # step's time as measured: at least the sleep, a little more when the process waited for a CPU.
    culprit = "slowest trigger steps: blocker"
    [warning] = [record.getMessage() for record in caplog.records if culprit in record.getMessage()]
    assert "Triggerer's async thread was blocked for " in warning and "PYTHONASYNCIODEBUG=1" in warning
    blocked = re.search(r"slowest trigger steps: blocker (\d+\.\d\d)s", warning)
    assert blocked is not None and float(blocked[1]) >= BLOCK_SECONDS, warning
    assert watchdog.worst_lag(since=0, now=asyncio.get_running_loop().time()) > THRESHOLD_SECONDS


async def test_polite_triggers_raise_no_warning(caplog: pytest.LogCaptureFixture) -> None:
    """A trigger that awaits longer than the threshold never lags the loop (a watchdog counting awaits
    as blocking would warn here)."""
    watchdog = LoopWatchdog(interval=0.01, threshold=THRESHOLD_SECONDS)
    watching = asyncio.create_task(watchdog.run())
    caplog.set_level(logging.WARNING, logger="controller.processes.health")
    await drive_trigger(ScriptedTrigger("yield", wait=BLOCK_SECONDS), deliver=lambda result: None)
    watching.cancel()
    assert caplog.records == []


@pytest.mark.parametrize(
    ("slow", "running", "description"),
    [
        pytest.param(
            [("a", 0.3), ("b", 0.1), ("a", 0.2)],
            [],
            "slowest trigger steps: a 0.50s, b 0.10s",
            id="slow steps are summed per trigger, slowest first",
        ),
        pytest.param(
            [],
            ["t3", "t1", "t2"],
            "no single trigger step was slow; running: t1, t2, t3",
            id="without slow steps the running triggers are named",
        ),
        pytest.param([], [], "no trigger was running", id="nothing running says so"),
    ],
)
def test_describe_culprits(slow: list[tuple[str, float]], running: list[str], description: str) -> None:
    steps = SlowSteps(minimum_seconds=0.0)
    for name, seconds in slow:
        steps.reporter(name)(seconds)
    assert describe_culprits(steps, running) == description


def idle_triggerer() -> Triggerer:
    """A replica that is never started: only its health reasoning is exercised."""
    settings = TriggererSettings(
        namespace="ns", identity="me", shards=4, capacity=4, lease_duration=3, renew_every=1
    )
    return Triggerer(cast(Kube, None), settings)


@pytest.mark.parametrize(
    ("lag", "lease_cycle_age", "problem"),
    [
        pytest.param(0.01, 0.5, None, id="a replica renewing its leases on a responsive loop is healthy"),
        pytest.param(6.0, 0.5, "event loop lagged 6.00s", id="a replica whose loop lagged is unhealthy"),
        pytest.param(
            0.01,
            10.0,
            "lease loop has not completed a cycle",
            id="a replica whose lease loop stalled is unhealthy",
        ),
    ],
)
async def test_health_reflects_loop_lag_and_lease_renewals(
    lag: float, lease_cycle_age: float, problem: str | None
) -> None:
    triggerer = idle_triggerer()
    now = time.monotonic()
    triggerer.watchdog.samples.append(LagSample(at=now, lag=lag))
    triggerer.watchdog.last_tick = now
    triggerer.last_lease_cycle = now - lease_cycle_age
    runner, port = await serve_http({"/healthz": triggerer.healthz}, host="127.0.0.1", port=0)
    try:
        url = f"http://127.0.0.1:{port}/healthz"
        async with aiohttp.ClientSession() as session, session.get(url) as reply:
            status, text = reply.status, await reply.text()
    finally:
        await runner.cleanup()
    if problem is None:
        assert (status, text) == (200, "ok: 0 shards, 0 triggers running\n")
    else:
        assert status == 500
        assert problem in text


async def test_an_event_waits_for_a_late_lease_renewal_instead_of_being_dropped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Found by the fault suite (etcd restarted under the mixed workload): a trigger fired while its
    shard's renewal was late by the replica's own clock; the event was dropped as if the shard were
    lost ("its next holder runs it again"), the renewal then came through, the replica kept the shard
    and nobody ran the trigger again: its task instance stayed deferred. The event now waits for the
    lease cycle: renewed, it is written (fenced as before); lost, the next holder runs the trigger."""
    from controller.coordination.shard_leases import Holding
    from controller.kube import TRIGGERS
    from controller.kube.fake import FakeKube
    from controller.triggerer import runtime
    from controller.triggerer.writes import Outcome
    from tests.unit.controller.triggerer.held_events import watched_holds

    kube = FakeKube()
    await kube.create_custom(
        TRIGGERS, "ns", {"apiVersion": "zonda.dev/v1alpha1", "kind": "Trigger", "metadata": {"name": "t"}}
    )
    settings = TriggererSettings(
        namespace="ns", identity="me", shards=4, capacity=4, lease_duration=3, renew_every=1
    )
    triggerer = Triggerer(cast(Kube, kube), settings)
    late = Holding(0, "zonda-triggerer-shard-0", 1, START, "1", 3.0, renewed_at=time.monotonic() - 10)
    triggerer.holdings[0] = late
    checked: list[int] = []

    async def verify(holding: Holding) -> bool:  # the Lease read: the fencing check is tested with leases
        checked.append(holding.shard)
        return True

    monkeypatch.setattr(triggerer.keeper, "verify", verify)
    monkeypatch.setattr(runtime, "LATE_RENEWAL_RETRY_SECONDS", 0.01)
    with watched_holds() as holds:
        writer = asyncio.create_task(triggerer._write_outcomes())
        fired = {"state": "fired", "event": {"payload": 1}}
        triggerer.awaiting_write.add("ns/t")
        triggerer.outcomes.put_nowait(Outcome("ns/t", 0, fired, None, time.monotonic()))
        await holds.twice()  # retried while the renewal is late: nothing written, nothing dropped
    stored = await kube.get_custom(TRIGGERS, "ns", "t")
    assert stored is not None and "status" not in stored and "ns/t" in triggerer.awaiting_write
    assert checked == [], "no write is tried on a Lease our own clock says may be gone"
    triggerer.holdings[0] = Holding(0, "zonda-triggerer-shard-0", 1, START, "2", 3.0, time.monotonic())
    await asyncio.wait_for(triggerer.outcomes.join(), 5)  # the lease cycle renewed it: written
    writer.cancel()
    stored = await kube.get_custom(TRIGGERS, "ns", "t")
    assert stored is not None and stored["status"]["state"] == "fired" and checked == [0]
