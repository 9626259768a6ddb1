"""Which task-instance state changes are legal, so a bug in the scheduler is an error, not a mystery.

Airflow never wrote its task-instance life cycle down as a table; this module does, from what
Airflow 2.x's scheduler, executors and task runner actually do:

- the scheduler's moves: ``none -> scheduled -> queued -> running -> success | failed | skipped |
  up_for_retry | up_for_reschedule | deferred``; ``deferred -> scheduled`` when the trigger fires (or
  ``-> failed | up_for_retry`` when it fails or times out); ``up_for_retry | up_for_reschedule ->
  scheduled`` when their time comes (a resumed try whose execution_timeout ran out while it waited
  for a slot goes ``scheduled -> failed | up_for_retry``); ``none | scheduled -> skipped |
  upstream_failed`` by trigger rules and branching; a dagrun timeout skips every unfinished task
  instance; tasks missing from the DAG become ``removed`` (and come back as ``none`` if the task
  returns);
- a user's moves (`manual=True`): mark success/failed/skipped from any state, clear a finished task
  instance (-> ``none``) or a running one (-> ``restarting``).

An attempt may finish between two scheduler passes without ever being seen running, so a ``queued``
task instance may move straight to any outcome of ``running``.
"""

from __future__ import annotations

from collections.abc import Mapping

from zonda.resources.models import FINISHED_TI_STATES, DagRunState, TaskInstanceState

S = TaskInstanceState

#: What an attempt can end in (Airflow's `_run_raw_task` outcomes, plus failure handling).
_ATTEMPT_OUTCOMES = frozenset(
    {S.SUCCESS, S.FAILED, S.SKIPPED, S.UP_FOR_RETRY, S.UP_FOR_RESCHEDULE, S.DEFERRED}
)
#: States a dagrun timeout skips (Airflow's `State.unfinished`).
UNFINISHED_TI_STATES = frozenset(set(S) - FINISHED_TI_STATES)
#: A run in one of these states is over: nothing in it is decided again.
FINISHED_RUN_STATES = frozenset({DagRunState.SUCCESS, DagRunState.FAILED})

#: The moves the scheduler (`zonda.passes.run_pass.decide`) may make.
ALLOWED_TRANSITIONS: Mapping[TaskInstanceState, frozenset[TaskInstanceState]] = {
    # EmptyOperator and LatestOnlyOperator succeed without being launched (Airflow 2.3+); a mapped
    # task that cannot expand (nothing to map over, over max_map_length) fails without a try.
    S.NONE: frozenset({S.SCHEDULED, S.SKIPPED, S.UPSTREAM_FAILED, S.REMOVED, S.SUCCESS, S.FAILED}),
    # A resumed try whose execution_timeout ran out before it got a slot fails (or is retried).
    S.SCHEDULED: frozenset(
        {S.QUEUED, S.NONE, S.SKIPPED, S.UPSTREAM_FAILED, S.REMOVED, S.SUCCESS, S.FAILED, S.UP_FOR_RETRY}
    ),
    S.QUEUED: frozenset({S.RUNNING, S.REMOVED} | _ATTEMPT_OUTCOMES),
    S.RUNNING: frozenset({S.REMOVED} | _ATTEMPT_OUTCOMES),
    # A fired trigger resumes the task; a failed or timed-out one fails it (retries apply).
    S.DEFERRED: frozenset({S.SCHEDULED, S.FAILED, S.UP_FOR_RETRY, S.SKIPPED, S.REMOVED}),
    S.UP_FOR_RETRY: frozenset({S.SCHEDULED, S.SKIPPED, S.REMOVED}),
    S.UP_FOR_RESCHEDULE: frozenset({S.SCHEDULED, S.SKIPPED, S.REMOVED}),
    # A task instance cleared while running: its attempt is stopped, then it runs again.
    S.RESTARTING: frozenset({S.NONE, S.UP_FOR_RETRY, S.FAILED, S.SKIPPED, S.REMOVED}),
    # Finished task instances only move when cleared; `removed` ones come back if the task does.
    S.SUCCESS: frozenset({S.NONE, S.REMOVED}),
    S.FAILED: frozenset({S.NONE, S.REMOVED}),
    S.SKIPPED: frozenset({S.NONE, S.REMOVED}),
    S.UPSTREAM_FAILED: frozenset({S.NONE, S.REMOVED}),
    S.REMOVED: frozenset({S.NONE}),
}

#: The moves only a user makes: mark success/failed/skipped, clear.
MANUAL_TRANSITIONS: Mapping[TaskInstanceState, frozenset[TaskInstanceState]] = {
    state: frozenset(
        {S.SUCCESS, S.FAILED, S.SKIPPED}
        | ({S.NONE} if state in FINISHED_TI_STATES or state is S.NONE else {S.RESTARTING})
    )
    - {state}
    for state in S
}


class IllegalTransition(ValueError):
    """A task instance was asked to move to a state it cannot reach from its current one."""

    def __init__(
        self,
        old: TaskInstanceState,
        new: TaskInstanceState,
        *,
        task_id: str | None = None,
        manual: bool = False,
    ) -> None:
        who = f"task instance {task_id!r}" if task_id else "a task instance"
        allowed = sorted(s.value for s in allowed_targets(old, manual=manual))
        super().__init__(
            f"Illegal state change for {who}: {old.value} -> {new.value}; "
            f"from {old.value} it may only move to {', '.join(allowed) or 'nothing'}"
            + (" (including a user's marks and clears)" if manual else "")
        )
        self.old = old
        self.new = new
        self.task_id = task_id


def allowed_targets(old: TaskInstanceState, *, manual: bool = False) -> frozenset[TaskInstanceState]:
    """Every state `old` may move to, by the scheduler (and, with `manual`, by a user)."""
    targets = ALLOWED_TRANSITIONS[old]
    return targets | MANUAL_TRANSITIONS[old] if manual else targets


def is_transition_allowed(old: TaskInstanceState, new: TaskInstanceState, *, manual: bool = False) -> bool:
    """Staying in the same state is always allowed: it is no transition."""
    return old is new or new in allowed_targets(old, manual=manual)


def check_transition(
    old: TaskInstanceState, new: TaskInstanceState, *, task_id: str | None = None, manual: bool = False
) -> None:
    """Raise `IllegalTransition` unless `old -> new` is a legal move."""
    if not is_transition_allowed(old, new, manual=manual):
        raise IllegalTransition(old, new, task_id=task_id, manual=manual)


__all__ = [
    "ALLOWED_TRANSITIONS",
    "FINISHED_RUN_STATES",
    "MANUAL_TRANSITIONS",
    "UNFINISHED_TI_STATES",
    "IllegalTransition",
    "allowed_targets",
    "check_transition",
    "is_transition_allowed",
]
