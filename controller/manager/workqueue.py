"""A keyed work queue with precise delayed wake-ups, on which the controller's reconcilers run.

Why not kopf timers/daemons: they put a finalizer on every object (left behind when the controller
is down, so deleting a DAG would hang) and poll at fixed intervals. kopf's event handlers only
enqueue keys here; workers reconcile one key at a time (never the same key twice at once), and a
reconciler asks to be woken at an exact time (`wake_at`) with `loop.call_at`, so a run due at 12:00:00
is created at 12:00:00, not at the next poll.

Keys are picked by `priority(key)` (lower first), then in the order they were added: the controller
puts DAG passes first, so a minute's due runs are created before the passes of runs already going
(1,000 DAGs due at 12:00:00 would otherwise queue behind every run pass their previous runs caused).
`add(key, priority=...)` overrides it for that addition (a DAG's status write after the minute's
creations, `DagReconciler.later`); a key added again with a higher priority (a lower number) while it
waits moves up, never down.

A reconcile that raises is retried after a capped exponential backoff per key (controller-runtime's
`ItemExponentialFailureRateLimiter`): 0.5 s, 1 s, 2 s ... 5 min, reset by the first success. After
`Backoff.report_after` failures in a row, `on_failing(key, failures, error)` is called once so the
controller can say so on the object (a condition and one Event); `on_recovered(key)` when it succeeds
again.

Wake-up times are wall-clock times, timers run on the loop's monotonic clock: when the wall clock is
stepped (NTP correcting a node, `controller.processes.clock`'s fault injection), every timer is set
again from its wall-clock time (`realign`, checked every CLOCK_CHECK_SECONDS), so a run due at 12:00
is not created an hour late because the clock was an hour behind when its wake-up was asked for.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from datetime import datetime

from controller.processes import clock

logger = logging.getLogger(__name__)

#: How often the wall clock is compared with the monotonic one, and the step that re-arms the timers.
CLOCK_CHECK_SECONDS = 2.0
CLOCK_STEP_SECONDS = 1.0

Reconcile = Callable[[Hashable], Awaitable[datetime | None]]
OnFailing = Callable[[Hashable, int, BaseException], Awaitable[None]]
OnRecovered = Callable[[Hashable], Awaitable[None]]
Priority = Callable[[Hashable], int]


@dataclass
class Backoff:
    """Failures in a row per key, and the capped exponential delay before the next try. Pure."""

    base: float = 0.5
    cap: float = 300.0
    report_after: int = 3
    failures: dict[Hashable, int] = field(default_factory=dict)

    def failed(self, key: Hashable) -> float:
        """Count a failure of `key`; the delay before retrying it."""
        count = self.failures[key] = self.failures.get(key, 0) + 1
        return min(self.cap, self.base * 2.0 ** (count - 1))

    def succeeded(self, key: Hashable) -> int:
        """Forget `key`'s failures; how many there were."""
        return self.failures.pop(key, 0)

    def should_report(self, key: Hashable) -> bool:
        """True exactly once per failing streak: when it reaches `report_after`."""
        return self.failures.get(key, 0) == self.report_after


def _loop_deadline(loop: asyncio.AbstractEventLoop, when: datetime) -> float:
    """The loop's time at which the wall clock the passes were given (`clock.now_utc`) reaches `when`
    (now, if it has passed). In POSIX seconds: a pass's `when` is often a pendulum DateTime, whose
    subtraction builds an Interval (a tenth of a millisecond each; 1,000 DAGs at a boundary each end
    with this call)."""
    return loop.time() + max(0.0, when.timestamp() - clock.now_utc().timestamp())


class WorkQueue:
    """Deduplicating queue: a key waiting once is processed once, however many times it was added."""

    def __init__(
        self,
        reconcile: Reconcile,
        *,
        workers: int = 4,
        backoff: Backoff | None = None,
        on_failing: OnFailing | None = None,
        on_recovered: OnRecovered | None = None,
        priority: Priority | None = None,
    ) -> None:
        self._reconcile = reconcile
        self._workers = workers
        self.backoff = backoff or Backoff()
        self._on_failing = on_failing
        self._on_recovered = on_recovered
        self._priority = priority or (lambda key: 0)
        self._order = itertools.count()  # FIFO within one priority
        self._queue: asyncio.PriorityQueue[tuple[int, int, Hashable]] = asyncio.PriorityQueue()
        self._waiting: dict[Hashable, int] = {}  # in the queue, not yet picked: at which priority
        self._active: set[Hashable] = set()  # being reconciled now
        self._dirty: dict[Hashable, int] = {}  # added again while active: run once more afterwards
        self._timers: dict[Hashable, tuple[float, asyncio.TimerHandle]] = {}
        self._wake_at: dict[Hashable, datetime] = {}  # each timer's wall-clock time
        self._soon: dict[Hashable, asyncio.TimerHandle] = {}  # `add_soon`: dropped when a pass starts
        self._tasks: list[asyncio.Task[None]] = []
        self._gate: asyncio.Event = asyncio.Event()  # set while this replica may act (leader)
        self._gate.set()

    def add(self, key: Hashable, priority: int | None = None) -> None:
        """Reconcile `key` (once, however many times it is added before its pass starts), at
        `priority` (None: `priority(key)`); added again at a higher priority while waiting, it moves up."""
        if priority is None:
            priority = self._priority(key)
        if key in self._active:
            self._dirty[key] = min(priority, self._dirty.get(key, priority))
            return
        if key not in self._waiting or priority < self._waiting[key]:  # the older entry is skipped
            self._waiting[key] = priority
            self._queue.put_nowait((priority, next(self._order), key))

    def add_at(self, key: Hashable, when: datetime) -> None:
        """Reconcile `key` at `when` (earliest wins if several wake-ups are asked for)."""
        loop = asyncio.get_running_loop()
        deadline = _loop_deadline(loop, when)
        existing = self._timers.get(key)
        if existing is not None:
            if existing[0] <= deadline:
                return
            existing[1].cancel()
        handle = loop.call_at(deadline, self._fire, key)
        self._timers[key] = (deadline, handle)
        self._wake_at[key] = when

    def add_soon(
        self, key: Hashable, delay: float, *, priority: int | None = None, latest: float | None = None
    ) -> None:
        """Reconcile `key` within `delay` seconds, or with its next pass if one starts sooner: for news
        that may wait a little so the news after it shares one pass (and one status write).

        With `priority` (a higher number than the key's own), the key waits after `delay` behind
        every pass queued before it at a higher priority, and news added meanwhile (`add`) moves it
        up: one pass for both. `latest` bounds that wait: after it the key has its own priority."""
        if key in self._soon or key in self._waiting:  # a pass that starts later sees it
            return
        loop = asyncio.get_running_loop()
        self._soon[key] = loop.call_later(delay, self._fire_soon, key, priority, latest)

    def _fire_soon(self, key: Hashable, priority: int | None = None, latest: float | None = None) -> None:
        self._soon.pop(key, None)
        self.add(key, priority)
        if priority is not None and latest is not None and key in self._waiting:
            self._soon[key] = asyncio.get_running_loop().call_later(latest, self._fire_soon, key)

    def _fire(self, key: Hashable) -> None:
        self._timers.pop(key, None)
        self._wake_at.pop(key, None)
        self.add(key)

    def realign(self) -> int:
        """Set every timer again from its wall-clock time (after the wall clock was stepped); how
        many moved."""
        loop = asyncio.get_running_loop()
        moved = 0
        for key, when in list(self._wake_at.items()):
            deadline = _loop_deadline(loop, when)
            old = self._timers.get(key)
            if old is None or abs(old[0] - deadline) < CLOCK_STEP_SECONDS:
                continue
            old[1].cancel()
            self._timers[key] = (deadline, loop.call_at(deadline, self._fire, key))
            moved += 1
        return moved

    async def _watch_clock(self) -> None:
        """Realign the timers whenever the wall clock moves against the monotonic one."""
        loop = asyncio.get_running_loop()
        skew = clock.now_utc().timestamp() - loop.time()
        while True:
            await asyncio.sleep(CLOCK_CHECK_SECONDS)
            now = clock.now_utc().timestamp() - loop.time()
            if abs(now - skew) >= CLOCK_STEP_SECONDS:
                logger.warning(
                    "the wall clock stepped %+.1f s: %d wake-ups set again", now - skew, self.realign()
                )
            skew = now

    def pause(self) -> None:
        self._gate.clear()

    def resume(self) -> None:
        self._gate.set()

    def start(self) -> None:
        for index in range(self._workers):
            self._tasks.append(asyncio.create_task(self._work(), name=f"reconcile-worker-{index}"))
        self._tasks.append(asyncio.create_task(self._watch_clock(), name="wall-clock-steps"))

    async def stop(self) -> None:
        for _, handle in self._timers.values():
            handle.cancel()
        self._timers.clear()
        self._wake_at.clear()
        for handle in self._soon.values():
            handle.cancel()
        self._soon.clear()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()

    async def _work(self) -> None:
        while True:
            priority, _, key = await self._queue.get()
            if self._waiting.get(key) != priority:
                continue  # moved up (picked already, or waiting at its higher priority)
            await self._gate.wait()
            if self._waiting.get(key) != priority:
                continue  # moved up while the gate was shut
            del self._waiting[key]
            self._active.add(key)
            if (soon := self._soon.pop(key, None)) is not None:
                soon.cancel()  # this pass sees what it was for
            try:
                wake_at = await self._reconcile(key)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                delay = self.backoff.failed(key)
                failures = self.backoff.failures[key]
                logger.exception(
                    "reconciling %s failed (%d in a row); retrying in %.1fs", key, failures, delay
                )
                self._schedule_retry(key, delay)
                if self.backoff.should_report(key) and self._on_failing is not None:
                    await self._report(self._on_failing(key, failures, exc))
            else:
                if (
                    self.backoff.succeeded(key) >= self.backoff.report_after
                    and self._on_recovered is not None
                ):
                    await self._report(self._on_recovered(key))
                if wake_at is not None:
                    self.add_at(key, wake_at)
            finally:
                self._active.discard(key)
                if key in self._dirty:
                    self.add(key, self._dirty.pop(key))

    @staticmethod
    async def _report(call: Awaitable[None]) -> None:
        """Telling the user is best effort: it must not stop the worker."""
        try:
            await call
        except Exception:
            logger.warning("could not report a failing reconcile", exc_info=True)

    def _schedule_retry(self, key: Hashable, delay: float) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + delay
        existing = self._timers.get(key)
        if existing is not None and existing[0] <= deadline:
            return
        if existing is not None:
            existing[1].cancel()
        self._timers[key] = (deadline, loop.call_at(deadline, self._fire, key))

    @property
    def tasks(self) -> list[asyncio.Task[None]]:
        return list(self._tasks)

    @property
    def pending(self) -> int:
        return len(self._waiting) + len(self._active)
