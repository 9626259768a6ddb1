"""Test triggers without waiting: an event loop whose clock jumps to the next timer.

    with FakeClock(start=datetime(2024, 1, 1, tzinfo=UTC)) as clock:
        event = clock.run(first_event(DateTimeTrigger(datetime(2024, 1, 1, 3, tzinfo=UTC))))
        assert clock.utcnow() == datetime(2024, 1, 1, 3, tzinfo=UTC)

Inside `FakeClock`, `zonda.triggers.timezone.utcnow()` and the loop's `time()` are the same virtual
clock: whenever nothing is ready to run, the loop, instead of blocking in `select`, moves its clock to
the next scheduled timer. Three hours of `asyncio.sleep` take milliseconds and always end at the same
virtual instant (the idea of kopf's `looptime`, in a few lines). I/O still happens for real.
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Coroutine
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any, TypeVar

from zonda.triggers import timezone

T = TypeVar("T")


class FakeClockLoop(asyncio.SelectorEventLoop):
    """A selector event loop on virtual time that starts at 0 and advances only when idle."""

    def __init__(self) -> None:
        super().__init__()
        self._virtual_time = 0.0
        selector: selectors.BaseSelector = self._selector  # type: ignore[attr-defined]
        real_select = selector.select

        def select(timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
            events = real_select(0)
            if events:
                return events
            if timeout is None:  # nothing scheduled: only I/O (a thread finishing) can wake us
                return real_select(None)
            self._virtual_time += timeout
            return []

        selector.select = select  # type: ignore[method-assign]

    def time(self) -> float:
        return self._virtual_time


class FakeClock:
    """A `FakeClockLoop` whose virtual time 0 is `start`, installed as the triggers' clock."""

    def __init__(self, start: datetime) -> None:
        self.start = timezone.convert_to_utc(start)
        self.loop = FakeClockLoop()
        self._installed = timezone.use_clock(self.utcnow)

    def utcnow(self) -> datetime:
        return self.start + timedelta(seconds=self.loop.time())

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run `coroutine` to completion on the virtual clock."""
        return self.loop.run_until_complete(coroutine)

    def __enter__(self) -> FakeClock:
        self._installed.__enter__()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self._installed.__exit__(kind, error, traceback)
        try:
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
        finally:
            self.loop.close()
