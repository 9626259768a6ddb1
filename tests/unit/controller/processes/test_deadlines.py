"""A run's conf checked against a DAG's `pattern` stops after `CHECK_SECONDS` in the controller's and
the UI's main thread, instead of backtracking for hours with the interpreter lock held.

Real: Python's `re` (which checks for signals as it backtracks), the SIGALRM timer, jsonschema.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from controller.processes.deadlines import main_thread_deadline
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
        params.bound_checks(params._no_deadline)


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
    """Signals reach only the main thread: elsewhere the deadline is a no-op, said in the docs."""
    ran: list[object] = []
    thread = threading.Thread(target=lambda: ran.append(params.run_conf_errors(SPEC, {"code": "b"})))
    thread.start()
    thread.join(10)
    assert ran == [["param 'code': 'b' does not match '^(a+)+$'"]]
