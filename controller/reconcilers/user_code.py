"""A user's code that runs inside the controller (a custom timetable), called with a time limit.

The passes are coroutines on one event loop: a timetable that hangs, called inline, would stop every
pass of every DAG. `BoundedCalls.call` runs the call in a thread of its own and stops waiting after
`limit_seconds`, so the pass goes on (and reports the DAG) while the other DAGs keep being scheduled.

A Python thread cannot be killed, but Python code in it can be interrupted: `STOP_AFTER_SECONDS`
past the limit, `controller.processes.deadlines.any_thread_deadline` raises `CheckTimeout` in the
call's thread at its next bytecode, so a timetable that spins in Python (a loop that never ends)
gives back its thread and the interpreter lock. One that waits in C (a lock, a socket, `time.sleep`)
is not interrupted: it keeps its (daemon) thread until it returns, or until the process exits. While
a call runs, the same key does not start another (`StillRunning`), so a DAG whose timetable hangs
holds at most one thread, however many passes it gets.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from controller.processes.deadlines import any_thread_deadline
from zonda.schedules.dag_plans import TimetableFailure

T = TypeVar("T")

#: Seconds one call of a custom timetable by the controller may take (`zonda controller --timetable-timeout`;
#: `zonda dags next-runs --timetable-timeout` for the CLI's).
DEFAULT_LIMIT_SECONDS = 5.0
#: How long after its limit a call still running in Python is interrupted in its thread (after the
#: pass waiting for it has given up and said so: the pass's report is the limit's, not this).
STOP_AFTER_SECONDS = 1.0


def key_of(kind: str, obj: Mapping[str, Any]) -> Hashable:
    """The key of an object's bounded calls: its kind, namespace, name and uid (an object deleted and
    created again under its name while its call still hangs gets a call of its own, not the old one's
    report)."""
    meta = obj["metadata"]
    return (kind, meta.get("namespace"), meta["name"], meta.get("uid"))


class TimeLimitExceeded(Exception):
    """The call did not return within the limit; its thread may still be running."""

    def __init__(self, limit_seconds: float, running_for: float, *, earlier: bool = False) -> None:
        self.limit_seconds = limit_seconds
        self.running_for = running_for
        #: True: not called now, because an earlier call for the same key is still running.
        self.earlier = earlier
        super().__init__(f"did not return within {limit_seconds:g} s (running for {running_for:.0f} s)")


@dataclass
class BoundedCalls:
    limit_seconds: float = DEFAULT_LIMIT_SECONDS
    #: key -> (what a call that overran its limit settles when it returns, when it started: monotonic)
    _overrun: dict[Hashable, tuple[asyncio.Future[object], float]] = field(default_factory=dict)

    def overrunning(self) -> int:
        """How many calls past their limit are still running (threads held)."""
        self._forget_finished()
        return len(self._overrun)

    async def call(self, key: Hashable, fn: Callable[[], T]) -> T:
        """`fn()` in its own thread; its result or exception, or `TimeLimitExceeded` after the limit."""
        self._forget_finished()
        if (held := self._overrun.get(key)) is not None:
            raise TimeLimitExceeded(self.limit_seconds, time.monotonic() - held[1], earlier=True)
        loop = asyncio.get_running_loop()
        done: asyncio.Future[T] = loop.create_future()

        def settle(result: T | None, error: BaseException | None) -> None:
            if done.done():
                return
            if error is not None:
                done.set_exception(error)
            else:
                done.set_result(result)  # type: ignore[arg-type]

        def run() -> None:
            try:
                with any_thread_deadline(self.limit_seconds + STOP_AFTER_SECONDS):
                    result = fn()
            except BaseException as exc:  # handed to the awaiting pass, whatever it is
                error: BaseException | None = exc
                result = None
            else:
                error = None
            if not loop.is_closed():
                loop.call_soon_threadsafe(settle, result, error)

        started = time.monotonic()
        thread = threading.Thread(target=run, name=f"user-code {key}", daemon=True)
        thread.start()
        try:
            return await asyncio.wait_for(asyncio.shield(done), self.limit_seconds)
        except TimeoutError:
            self._overrun[key] = (done, started)  # type: ignore[assignment]
            done.add_done_callback(lambda late: late.cancelled() or late.exception())  # dropped, unlogged
            raise TimeLimitExceeded(self.limit_seconds, time.monotonic() - started) from None

    async def ask_timetable(
        self, key: Hashable, class_path: str, fn: Callable[[], T]
    ) -> T | TimetableFailure:
        """`call` for a custom timetable: its answer, or the failure the object it was asked for says
        (past the limit, or it raised) while the pass goes on — one way for the DAG, run and Backfill
        passes."""
        try:
            return await self.call(key, fn)
        except TimeLimitExceeded as exc:
            return TimetableFailure(class_path, exc.limit_seconds, exc.earlier)
        except Exception as exc:  # a user's timetable raised: said on its object, the others go on
            return TimetableFailure.raised(class_path, exc)

    async def returned(self, key: Hashable) -> None:
        """Wait until `key`'s call past its limit has returned (at once if none is running)."""
        if (held := self._overrun.get(key)) is not None:
            await asyncio.wait([held[0]])

    def _forget_finished(self) -> None:
        for key in [k for k, (late, _) in self._overrun.items() if late.done()]:
            del self._overrun[key]
