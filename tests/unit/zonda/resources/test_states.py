"""The task-instance life cycle: which moves are legal, and for whom."""

from __future__ import annotations

import pytest

from zonda.resources.models import FINISHED_TI_STATES, TaskInstanceState
from zonda.resources.states import (
    ALLOWED_TRANSITIONS,
    UNFINISHED_TI_STATES,
    IllegalTransition,
    allowed_targets,
    check_transition,
    is_transition_allowed,
)

S = TaskInstanceState

LEGAL = [
    pytest.param(S.NONE, S.SCHEDULED, id="the scheduler schedules a task instance whose rule is met"),
    pytest.param(S.SCHEDULED, S.QUEUED, id="a scheduled task instance is queued to an executor"),
    pytest.param(S.QUEUED, S.RUNNING, id="a queued task instance starts running"),
    pytest.param(S.RUNNING, S.SUCCESS, id="a running task instance succeeds"),
    pytest.param(S.RUNNING, S.UP_FOR_RETRY, id="a running task instance fails with tries left"),
    pytest.param(S.RUNNING, S.UP_FOR_RESCHEDULE, id="a sensor in reschedule mode asks to poke later"),
    pytest.param(S.RUNNING, S.DEFERRED, id="a running task instance defers to a trigger"),
    pytest.param(S.QUEUED, S.SUCCESS, id="an attempt may finish before it was ever seen running"),
    pytest.param(S.DEFERRED, S.SCHEDULED, id="a fired trigger resumes the task instance"),
    pytest.param(S.DEFERRED, S.FAILED, id="a failed or timed-out trigger fails the task instance"),
    pytest.param(S.UP_FOR_RETRY, S.SCHEDULED, id="a retry is scheduled when its time comes"),
    pytest.param(S.UP_FOR_RESCHEDULE, S.SCHEDULED, id="a sensor is scheduled again for its next poke"),
    pytest.param(S.NONE, S.SKIPPED, id="a trigger rule skips a task instance"),
    pytest.param(S.NONE, S.UPSTREAM_FAILED, id="a trigger rule propagates a failure"),
    pytest.param(S.SCHEDULED, S.SKIPPED, id="a branch skips a task instance already scheduled"),
    pytest.param(S.NONE, S.REMOVED, id="a task instance whose task left the DAG is removed"),
    pytest.param(S.NONE, S.SUCCESS, id="an EmptyOperator succeeds without running"),
    pytest.param(S.RUNNING, S.SKIPPED, id="a dagrun timeout skips a running task instance"),
    pytest.param(S.DEFERRED, S.SKIPPED, id="a dagrun timeout skips a deferred task instance"),
    pytest.param(S.FAILED, S.NONE, id="a finished task instance is cleared"),
    pytest.param(S.REMOVED, S.NONE, id="a removed task instance comes back with its task"),
    pytest.param(S.RESTARTING, S.NONE, id="a task instance cleared while running runs again"),
    pytest.param(S.RUNNING, S.RUNNING, id="staying in a state is no move"),
]

ILLEGAL = [
    pytest.param(S.NONE, S.RUNNING, id="nothing runs without being queued"),
    pytest.param(S.NONE, S.QUEUED, id="nothing is queued without being scheduled"),
    pytest.param(S.SUCCESS, S.FAILED, id="the scheduler never fails a task instance that succeeded"),
    pytest.param(S.SKIPPED, S.SCHEDULED, id="a skipped task instance is not scheduled unless cleared"),
    pytest.param(S.UP_FOR_RETRY, S.QUEUED, id="a retry is scheduled before it is queued"),
    pytest.param(S.DEFERRED, S.RUNNING, id="a deferred task instance resumes through the scheduler"),
    pytest.param(S.UPSTREAM_FAILED, S.SUCCESS, id="an upstream_failed task instance stays so unless cleared"),
    pytest.param(S.SCHEDULED, S.RUNNING, id="a scheduled task instance is queued before running"),
]


@pytest.mark.parametrize(("old", "new"), LEGAL)
def test_legal_moves_pass(old: TaskInstanceState, new: TaskInstanceState) -> None:
    check_transition(old, new)


@pytest.mark.parametrize(("old", "new"), ILLEGAL)
def test_illegal_moves_raise(old: TaskInstanceState, new: TaskInstanceState) -> None:
    with pytest.raises(IllegalTransition):
        check_transition(old, new)


MANUAL = [
    pytest.param(S.SUCCESS, S.FAILED, True, id="a user marks a succeeded task instance failed"),
    pytest.param(S.RUNNING, S.SUCCESS, True, id="a user marks a running task instance successful"),
    pytest.param(S.RUNNING, S.RESTARTING, True, id="a user clears a running task instance"),
    pytest.param(S.UPSTREAM_FAILED, S.NONE, True, id="a user clears an upstream_failed task instance"),
    pytest.param(S.RUNNING, S.NONE, False, id="even a user cannot reset a running task instance to none"),
    pytest.param(S.NONE, S.RESTARTING, False, id="a task instance that never ran cannot be restarted"),
]


@pytest.mark.parametrize(("old", "new", "allowed"), MANUAL)
def test_user_moves(old: TaskInstanceState, new: TaskInstanceState, allowed: bool) -> None:
    assert is_transition_allowed(old, new, manual=True) is allowed


def test_marking_is_not_a_scheduler_move() -> None:
    assert not is_transition_allowed(S.SUCCESS, S.FAILED)
    assert is_transition_allowed(S.SUCCESS, S.FAILED, manual=True)


def test_the_error_names_the_task_and_the_legal_targets() -> None:
    with pytest.raises(IllegalTransition) as raised:
        check_transition(S.UP_FOR_RETRY, S.RUNNING, task_id="extract")
    assert str(raised.value) == (
        "Illegal state change for task instance 'extract': up_for_retry -> running; "
        "from up_for_retry it may only move to removed, scheduled, skipped"
    )
    error = raised.value
    assert (error.old, error.new, error.task_id) == (S.UP_FOR_RETRY, S.RUNNING, "extract")


def test_every_state_has_a_row() -> None:
    assert set(ALLOWED_TRANSITIONS) == set(TaskInstanceState)


def _reachable(start: TaskInstanceState) -> set[TaskInstanceState]:
    seen, pending = {start}, [start]
    while pending:
        for target in allowed_targets(pending.pop()):
            if target not in seen:
                seen.add(target)
                pending.append(target)
    return seen


def test_every_state_but_restarting_is_reachable_by_the_scheduler_alone() -> None:
    """Only a user's clear puts a task instance in `restarting`."""
    assert _reachable(S.NONE) == set(TaskInstanceState) - {S.RESTARTING}


@pytest.mark.parametrize("state", sorted(UNFINISHED_TI_STATES), ids=lambda state: f"{state.value} can finish")
def test_no_unfinished_state_is_a_trap(state: TaskInstanceState) -> None:
    assert _reachable(state) & FINISHED_TI_STATES
