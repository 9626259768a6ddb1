"""A run's conf checked against a DAG's `pattern` stops after `CHECK_SECONDS` in the controller's and
the UI's main thread, instead of backtracking for hours with the interpreter lock held.

Real: Python's `re` (which checks for signals as it backtracks), the SIGALRM timer, jsonschema.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from controller.processes.deadlines import MainThreadChecks, main_thread_deadline
from zonda.specs import params

#: A nested repetition: exponential backtracking on a run of `a`s that does not end the match.
SPEC = {
    "params": {"code": "aaa"},
    "paramsSchema": {"type": "object", "properties": {"code": {"type": "string", "pattern": "^(a+)+$"}}},
    "tasks": [],
}
EVIL = {"code": "a" * 40 + "!"}  # hours of backtracking unbounded (24 a's: 1.7 s; each more doubles it)


@pytest.fixture
def bounded() -> Iterator[None]:
    params.bound_checks(main_thread_deadline)
    try:
        yield
    finally:
        params.bound_checks(params.no_deadline)


def test_a_backtracking_pattern_is_stopped_and_said_on_the_run(bounded: None) -> None:
    started = time.monotonic()
    errors = params.run_conf_errors(SPEC, EVIL)
    took = time.monotonic() - started
    assert took < params.CHECK_SECONDS + 5, took
    assert len(errors) == 1 and "took more than 2 s and was stopped" in errors[0], errors
    assert "'^(a+)+$' nests a repetition" in errors[0]


def test_the_same_check_is_unchanged_for_values_that_match_or_fail_quickly(bounded: None) -> None:
    """The positive control: the deadline changes nothing where the pattern answers at once."""
    assert params.run_conf_errors(SPEC, {"code": "aaaa"}) == []
    assert params.run_conf_errors(SPEC, {"code": "b"}) == ["param 'code': 'b' does not match '^(a+)+$'"]


def test_a_check_that_ended_leaves_no_timer_behind(bounded: None) -> None:
    assert params.run_conf_errors(SPEC, {"code": "aaaa"}) == []
    import signal

    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)  # no timer left armed to fire later


def test_outside_the_main_thread_the_check_runs_without_the_deadline(bounded: None) -> None:
    """Signals reach only the main thread: elsewhere the deadline is a no-op (the controller hands such
    checks to its main thread: the next test)."""
    ran: list[object] = []
    thread = threading.Thread(target=lambda: ran.append(params.run_conf_errors(SPEC, {"code": "b"})))
    thread.start()
    thread.join(10)
    assert ran == [["param 'code': 'b' does not match '^(a+)+$'"]]


def test_a_check_met_in_another_thread_runs_in_the_main_thread_under_its_deadline(bounded: None) -> None:
    """A custom timetable's thread starts a run: its conf check is handed to the main thread's loop,
    where the deadline stops the backtracking."""
    loop = asyncio.new_event_loop()
    checks = MainThreadChecks(loop)
    where: list[bool] = []  # whether each check ran in the main thread

    def runner(check: Callable[[], list[Any]]) -> list[Any]:
        def noted() -> list[Any]:
            where.append(threading.current_thread() is threading.main_thread())
            return check()

        return checks(noted)

    params.run_checks_with(runner)
    ran: list[object] = []

    def in_a_thread() -> None:
        ran.append(params.run_conf_errors(SPEC, EVIL))
        ran.append(threading.current_thread() is not threading.main_thread())
        loop.call_soon_threadsafe(loop.stop)

    try:
        started = time.monotonic()
        threading.Thread(target=in_a_thread, daemon=True).start()
        loop.call_later(params.CHECK_SECONDS + 20, loop.stop)  # a bound for the test itself
        loop.run_forever()
        took = time.monotonic() - started
    finally:
        params.run_checks_with(None)
        loop.close()
    assert len(ran) == 2 and ran[1] is True, ran
    errors = ran[0]
    assert isinstance(errors, list) and len(errors) == 1 and "took more than 2 s and was stopped" in errors[0]
    assert took < params.CHECK_SECONDS + 10, took
    assert where == [True], "the check ran in the main thread, asked from another"
