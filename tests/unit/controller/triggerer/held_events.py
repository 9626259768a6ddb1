"""Waiting for the triggerer to hold an event for a late Lease renewal (`_held_for_late_renewal`)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator

from controller.triggerer import runtime


class Holds(logging.Handler):
    """Counts the triggerer's "held for a late renewal" log lines (it logs from the test's own event
    loop thread): `twice()` is the signal that an event was put back and met the late renewal again,
    neither dropped nor written, which the negative checks after it need rather than a sleep."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.count = 0
        self.again = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if "Lease renewal is late" in record.getMessage():
            self.count += 1
            if self.count >= 2:
                self.again.set()

    async def twice(self) -> None:
        async with asyncio.timeout(5):
            await self.again.wait()


@contextlib.contextmanager
def watched_holds() -> Iterator[Holds]:
    """`Holds` on the triggerer's logger, at INFO, for the block."""
    holds, level = Holds(), runtime.log.level
    runtime.log.addHandler(holds)
    runtime.log.setLevel(logging.INFO)
    try:
        yield holds
    finally:
        runtime.log.removeHandler(holds)
        runtime.log.setLevel(level)
