"""A deadline for a pure check that may run for hours in C: a user's regular expression.

`zonda.specs.params.bound_checks(main_thread_deadline)` makes every check of values against a
`paramsSchema` stop after `CHECK_SECONDS` in this process's main thread, where the controller's
passes and the UI's requests run. Python's `re` holds the interpreter lock for a whole match (a
thread with a time limit cannot help: nothing else runs meanwhile) but checks for signals every
4,096 steps, so a SIGALRM timer stops it: the handler raises `CheckTimeout` out of the match.

Only the main thread receives signals: elsewhere (a DAG with a custom timetable has its pass in a
thread of its own, `controller.reconcilers.user_code`) the controller hands the check to its main
thread (`MainThreadChecks`, `zonda.specs.params.run_checks_with`), which runs it between two passes
under the same deadline while the asking thread waits.

`any_thread_deadline` bounds a user's Python code in any thread (a custom priority weight strategy's
`get_weight`, `zonda.specs.priority_strategies.bound_calls`): in the main thread with the same
timer; in another, a timer thread raises `CheckTimeout` in it asynchronously
(`PyThreadState_SetAsyncExc`), which the interpreter delivers at the thread's next bytecode: it stops
Python code in a loop, not a call that stays in C (a `re` match: that one only the main thread's
signal stops).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import ctypes
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any

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


@contextlib.contextmanager
def any_thread_deadline(seconds: float) -> Iterator[None]:
    """Raise `CheckTimeout` in the block after `seconds`, in whichever thread runs it (the module says
    what each thread's way stops)."""
    if threading.current_thread() is threading.main_thread():
        with main_thread_deadline(seconds):
            yield
        return
    ident = ctypes.c_ulong(threading.get_ident())
    lock = threading.Lock()
    state = {"armed": True, "fired": False}

    def expire() -> None:
        with lock:
            if state["armed"]:
                state["fired"] = True
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ident, ctypes.py_object(CheckTimeout))

    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        with lock:
            state["armed"] = False
            if state["fired"]:  # not raised yet (the block ended first): then never, outside it
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ident, None)
        timer.cancel()


class MainThreadChecks:
    """Runs a check asked for in any thread in the main thread, whose event loop is `loop`: there the
    process's deadline stops a `re` match that would hold the interpreter lock for hours (in another
    thread nothing could). A check asked for in the main thread runs at once; with the loop stopped,
    in the asking thread (nothing else runs then)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop

    def __call__(self, check: Callable[[], list[Any]]) -> list[Any]:
        if threading.current_thread() is threading.main_thread() or self.loop.is_closed():
            return check()
        answer: concurrent.futures.Future[list[Any]] = concurrent.futures.Future()

        def run() -> None:
            try:
                answer.set_result(check())
            except BaseException as exc:  # CheckTimeout included: raised again in the asking thread
                answer.set_exception(exc)

        try:
            self.loop.call_soon_threadsafe(run)
        except RuntimeError:  # closed meanwhile
            return check()
        return answer.result()
