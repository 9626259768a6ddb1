"""A deadline for a pure check that may run for hours in C: a user's regular expression.

`zonda.specs.params.bound_checks(main_thread_deadline)` makes every check of values against a
`paramsSchema` stop after `CHECK_SECONDS` in this process's main thread, where the controller's
passes and the UI's requests run. Python's `re` holds the interpreter lock for a whole match (a
thread with a time limit cannot help: nothing else runs meanwhile) but checks for signals every
4,096 steps, so a SIGALRM timer stops it: the handler raises `CheckTimeout` out of the match.

Only the main thread receives signals: elsewhere (a DAG with a custom timetable has its pass in a
thread of its own, `controller.reconcilers.user_code`) the check runs without the deadline.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

from zonda.specs.params import CheckTimeout


@contextlib.contextmanager
def main_thread_deadline(seconds: float) -> Iterator[None]:
    """Raise `CheckTimeout` in the block after `seconds` (in the main thread; elsewhere, no limit)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    armed = True

    def expire(signum: int, frame: object) -> None:
        if armed:  # not once the block has ended: a timer that fired during the disarming
            raise CheckTimeout(f"past {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        armed = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
