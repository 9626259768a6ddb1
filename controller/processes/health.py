"""Liveness of a triggerer replica: event-loop lag, blame for slow trigger steps, and `/healthz`.

Airflow's triggerer watchdog sleeps 0.1 s in a loop and logs when the sleep overran by more than
0.2 s, without knowing which trigger blocked. Here every trigger's coroutine is driven through
`TimedSteps`, which times each step it takes on the loop, so the warning names the culprits.

`/healthz` answers 500 not only when the process is dead (Airflow #32091): also when the loop has
lagged badly in the last window, or when the lease renewal loop has stopped completing — a replica in
either state still looks "running" but is losing its shards or delaying every trigger.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Generator, Iterable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

log = logging.getLogger(__name__)


class TimedSteps:
    """Awaitable that drives `coroutine` and reports how long each of its steps held the loop.

    A step is the code between two awaits that really suspend; a blocking call inside a trigger makes
    one long step. `await TimedSteps(coro, report)` behaves exactly like `await coro`.
    """

    def __init__(self, coroutine: Coroutine[Any, Any, Any], report: Callable[[float], None]) -> None:
        self._coroutine = coroutine
        self._report = report

    def __await__(self) -> Generator[Any, Any, Any]:
        return self  # the iterator protocol is implemented below

    def __iter__(self) -> TimedSteps:
        return self

    def __next__(self) -> Any:
        return self.send(None)

    def send(self, value: Any) -> Any:
        started = time.perf_counter()
        try:
            return self._coroutine.send(value)
        finally:
            self._report(time.perf_counter() - started)

    def throw(self, error: Any, value: Any = None, traceback: Any = None) -> Any:
        started = time.perf_counter()
        try:
            if value is None and traceback is None:
                return self._coroutine.throw(error)
            return self._coroutine.throw(error, value, traceback)  # pragma: no cover - legacy form
        finally:
            self._report(time.perf_counter() - started)

    def close(self) -> None:
        self._coroutine.close()


class SlowSteps:
    """Recent trigger steps that took long enough to matter, by trigger name."""

    def __init__(self, *, minimum_seconds: float = 0.05, keep: int = 256) -> None:
        self.minimum_seconds = minimum_seconds
        self._steps: collections.deque[tuple[str, float]] = collections.deque(maxlen=keep)

    def reporter(self, name: str) -> Callable[[float], None]:
        def report(seconds: float) -> None:
            if seconds >= self.minimum_seconds:
                self._steps.append((name, seconds))

        return report

    def take(self) -> list[tuple[str, float]]:
        """The slow steps since the last call, summed by trigger, slowest first."""
        totals: dict[str, float] = collections.defaultdict(float)
        for name, seconds in self._steps:
            totals[name] += seconds
        self._steps.clear()
        return sorted(totals.items(), key=lambda item: -item[1])


@dataclass(frozen=True)
class LagSample:
    at: float
    lag: float


class LoopWatchdog:
    """Schedules itself every `interval` seconds and measures how late it wakes (the loop's lag).

    :param threshold: lag above which it logs Airflow's "async thread was blocked" warning.
    :param describe: names the likely culprits (slow steps, or the triggers that were running).
    :param on_sample: receives every lag (for the metrics gauge).
    """

    def __init__(
        self,
        *,
        interval: float = 0.5,
        threshold: float = 0.2,
        describe: Callable[[], str] = lambda: "",
        on_sample: Callable[[float], None] = lambda lag: None,
        on_block: Callable[[float], None] = lambda lag: None,
        keep: int = 100_000,
    ) -> None:
        self.interval = interval
        self.threshold = threshold
        self.describe = describe
        self.on_sample = on_sample
        self.on_block = on_block
        self.samples: collections.deque[LagSample] = collections.deque(maxlen=keep)
        self.last_tick: float | None = None

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            expected = loop.time() + self.interval
            await asyncio.sleep(self.interval)
            now = loop.time()
            lag = max(0.0, now - expected)
            self.last_tick = now
            self.samples.append(LagSample(at=now, lag=lag))
            self.on_sample(lag)
            if lag > self.threshold:
                self.on_block(lag)
                culprits = self.describe()
                log.warning(
                    "Triggerer's async thread was blocked for %.2f seconds, likely by a badly-written "
                    "trigger%s. Set PYTHONASYNCIODEBUG=1 to get more information on overrunning coroutines.",
                    lag,
                    f" ({culprits})" if culprits else "",
                )

    def worst_lag(self, *, since: float, now: float) -> float:
        """The largest lag measured after `since`, counting the silence since the last tick as lag."""
        recent = [sample.lag for sample in self.samples if sample.at >= since]
        silent = 0.0 if self.last_tick is None else max(0.0, now - self.last_tick - self.interval)
        return max([silent, *recent])


def describe_culprits(slow_steps: SlowSteps, running: Iterable[str], *, limit: int = 5) -> str:
    """Who probably blocked the loop: the slowest recent trigger steps, else the triggers running."""
    slowest = slow_steps.take()[:limit]
    if slowest:
        return "slowest trigger steps: " + ", ".join(f"{name} {seconds:.2f}s" for name, seconds in slowest)
    names = sorted(running)
    if not names:
        return "no trigger was running"
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    return f"no single trigger step was slow; running: {', '.join(names[:limit])}{more}"


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


async def serve_http(routes: dict[str, Handler], *, host: str, port: int) -> tuple[web.AppRunner, int]:
    """Start a small aiohttp server on the running loop; returns it and the port it bound."""
    app = web.Application()
    for path, handler in routes.items():
        app.router.add_get(path, handler)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound = int(runner.addresses[0][1]) if runner.addresses else port
    return runner, bound
