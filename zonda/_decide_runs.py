"""The implementation of `zonda.decisions.decide`: one scheduler pass over one DagRun.

A `RunPass` holds a working copy of the run's status and walks Airflow's scheduler loop in a fixed
order, each step seeing the previous steps' changes, so one pass settles everything that can be
settled at `now` (a chain of skips, a retry whose delay is already over, a fired trigger's resumed
try...):

1. start the run, create missing task instances, mark those whose task left the DAG ``removed``;
2. restart cleared task instances; apply what the executors saw of attempts (success, failure,
   skip, deferral, reschedule, zombies) and enforce pending and execution timeouts;
3. apply what the triggerer saw (fired, failed) and trigger timeouts;
4. time the run out (Airflow skips every unfinished task instance and fails the run);
5. wake retries and reschedules whose time came;
6. evaluate trigger rules in topological order (skip and upstream_failed cascades, branching,
   LatestOnly, EmptyOperator, depends_on_past);
7. launch ready task instances by priority within `max_active_tasks`;
8. settle the run's state (Airflow's `DagRun.update_state`) and compute when to wake.

Every state change goes through `zonda.states.check_transition`, so an illegal move is a bug that
raises, and leaves one `RunEvent` and a `reason` on the task instance.

Over 400 lines on purpose: the steps share one working copy and their order is what makes a pass
settle everything at `now`; spread over modules, that order would be hidden. Graph questions live
in `_decide_graphs`, trigger rules in `zonda.trigger_rules`, retry times in `zonda.retries`.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from zonda import mapping, operator_registry, pools, run_slots, xcoms
from zonda._decide_graphs import descendants, group_roots, leaves
from zonda._decide_mapping import MappedInstances
from zonda.dagrun_models import DagRunStatus, TaskInstanceStatus
from zonda.dags import ResolvedDag, ResolvedTask, effective_priority_weights
from zonda.decisions import (
    AttemptPhase,
    Observation,
    ObservedAttempt,
    ObservedTrigger,
    RunEvent,
    RunPlan,
    TaskLaunch,
    TriggerRequest,
)
from zonda.invocations import SKIP_EXIT_CODE, TaskOutcome, TaskResult
from zonda.models import FINISHED_TI_STATES, DagRunState, TaskInstanceState
from zonda.names import attempt_name, trigger_name
from zonda.retries import is_eligible_to_retry, next_retry_datetime
from zonda.run_types import RunType
from zonda.states import UNFINISHED_TI_STATES, check_transition
from zonda.trigger_rules import TriggerRuleOutcome, evaluate_trigger_rule

S = TaskInstanceState

#: Task instances whose attempt is (or is about to be) alive: they use a `max_active_tasks` slot.
ACTIVE_STATES = frozenset({S.QUEUED, S.RUNNING})
_FAILED_LEAF_STATES = frozenset({S.FAILED, S.UPSTREAM_FAILED})
_SUCCESS_LEAF_STATES = frozenset({S.SUCCESS, S.SKIPPED})
_PAST_OK_STATES = frozenset({S.SUCCESS, S.SKIPPED})

_EVENT_REASONS: dict[TaskInstanceState, tuple[str, bool]] = {
    S.NONE: ("TaskReset", False),
    S.SCHEDULED: ("TaskScheduled", False),
    S.QUEUED: ("TaskQueued", False),
    S.RUNNING: ("TaskRunning", False),
    S.SUCCESS: ("TaskSucceeded", False),
    S.FAILED: ("TaskFailed", True),
    S.SKIPPED: ("TaskSkipped", False),
    S.UPSTREAM_FAILED: ("TaskUpstreamFailed", True),
    S.UP_FOR_RETRY: ("TaskUpForRetry", True),
    S.UP_FOR_RESCHEDULE: ("TaskUpForReschedule", False),
    S.DEFERRED: ("TaskDeferred", False),
    S.REMOVED: ("TaskRemoved", False),
    S.RESTARTING: ("TaskRestarting", False),
}


def _seconds(delta: timedelta) -> str:
    """A duration as people write it: 90 -> 1m30s."""
    total = int(delta.total_seconds())
    hours, rest = divmod(total, 3600)
    minutes, seconds = divmod(rest, 60)
    text = (f"{hours}h" if hours else "") + (f"{minutes}m" if minutes else "")
    return text + (f"{seconds}s" if seconds or not text else "")


class RunPass:
    """One scheduler pass over one run; `plan()` returns the outcome. Use once."""

    def __init__(
        self,
        dag: ResolvedDag,
        *,
        run_name: str,
        run_type: RunType,
        status: DagRunStatus,
        observed: Observation,
        now: datetime,
        logical_date: datetime | None,
        data_interval_end: datetime | None,
        pending_timeout: timedelta | None = None,
        max_map_length: int = mapping.DEFAULT_MAX_MAP_LENGTH,
    ) -> None:
        self.dag = dag
        self.run_name = run_name
        self.run_type = run_type
        self.observed = observed
        self.now = now
        self.pending_timeout = pending_timeout
        self.status = status
        self.logical_date = logical_date or status.logical_date
        self.data_interval_end = data_interval_end or status.data_interval_end
        self.run_state = status.state or DagRunState.QUEUED
        self.run_updates: dict[str, Any] = {}
        self.tis: dict[str, TaskInstanceStatus] = dict(status.task_instances)
        self.launches: list[TaskLaunch] = []
        self.kills: list[str] = []
        self.triggers_to_create: list[TriggerRequest] = []
        self.triggers_to_delete: list[str] = []
        self.events: list[RunEvent | None] = []
        self._scheduled_event_at: dict[str, int] = {}
        self.mapped = MappedInstances(self, max_map_length)
        self.runs_to_wake: list[str] = []

    # ------------------------------------------------------------------------------------ the pass

    def plan(self) -> RunPlan:
        self.kills.extend(self.observed.stray_attempts)
        self.triggers_to_delete.extend(self.observed.stray_triggers)
        if self.run_state in (DagRunState.SUCCESS, DagRunState.FAILED):
            return self._result(wake_at=None)
        self._start_run()
        self._sync_task_instances()
        self._restart_cleared()
        self._apply_attempts()
        self._enforce_pending_timeouts()
        self._apply_triggers()
        self._enforce_execution_timeouts()
        if self._time_out_run():
            return self._result(wake_at=None)
        self._wake_waiting()
        self._evaluate_readiness()
        self._launch_ready()
        self._settle_run()
        return self._result(wake_at=self._next_wake())

    def _result(self, *, wake_at: datetime | None) -> RunPlan:
        status = self.status.model_copy(
            update={"state": self.run_state, "task_instances": self.tis, **self.run_updates}
        )
        return RunPlan(
            status=status,
            launches=self.launches,
            kills=list(dict.fromkeys(self.kills)),
            triggers_to_create=list({request.name: request for request in self.triggers_to_create}.values()),
            triggers_to_delete=list(dict.fromkeys(self.triggers_to_delete)),
            events=[event for event in self.events if event is not None],
            wake_at=wake_at,
            runs_to_wake=tuple(dict.fromkeys(self.runs_to_wake)),
        )

    # ---------------------------------------------------------------------------------- the run

    def _start_run(self) -> None:
        if self.run_state is DagRunState.RUNNING:
            return
        self.run_state = DagRunState.RUNNING
        self.run_updates["start_date"] = self.status.start_date or self.now
        if self.status.queued_at is None:
            self.run_updates["queued_at"] = self.now
        self.events.append(RunEvent("RunStarted", f"Run {self.run_name} started"))

    @property
    def run_start(self) -> datetime | None:
        start: datetime | None = self.run_updates.get("start_date", self.status.start_date)
        return start

    def _finish_run(self, state: DagRunState, reason: str, message: str, *, warning: bool) -> None:
        self.run_state = state
        self.run_updates["end_date"] = self.now
        self.run_updates["message"] = message
        self.events.append(RunEvent(reason, message, warning=warning))

    def _time_out_run(self) -> bool:
        """Airflow's dagrun_timeout: unfinished task instances are skipped, the run fails."""
        timeout, start = self.dag.dagrun_timeout, self.run_start
        if timeout is None or start is None or self.now < start + timeout:
            return False
        if all(ti.state in FINISHED_TI_STATES for ti in self.tis.values()):
            return False  # everything finished in time: the leaves decide, not the clock
        reason = (
            f"The run exceeded its dagrun_timeout of {_seconds(timeout)} (started at {start.isoformat()})"
        )
        for task_id, ti in list(self.tis.items()):
            if ti.state in UNFINISHED_TI_STATES:
                self._stop_attempt_of(ti)
                self._set(task_id, S.SKIPPED, reason, end_date=self.now)
        self._finish_run(
            DagRunState.FAILED, "RunTimedOut", f"Run {self.run_name} timed out: {reason}", warning=True
        )
        return True

    def _settle_run(self) -> None:
        """Airflow's `DagRun.update_state`: once nothing is unfinished, the leaves decide."""
        if any(ti.state not in FINISHED_TI_STATES for ti in self.tis.values()):
            return
        leaf_states = {
            key: self.tis[key].state
            for task_id in leaves(self.dag)
            for key in self.mapped.keys(task_id)
            if self.tis[key].state is not S.REMOVED
        }
        failed = sorted(task_id for task_id, state in leaf_states.items() if state in _FAILED_LEAF_STATES)
        if failed:
            self._finish_run(
                DagRunState.FAILED,
                "RunFailed",
                f"Run {self.run_name} failed: leaf task(s) {', '.join(failed)} did not succeed",
                warning=True,
            )
        elif all(state in _SUCCESS_LEAF_STATES for state in leaf_states.values()):
            self._finish_run(
                DagRunState.SUCCESS, "RunSucceeded", f"Run {self.run_name} succeeded", warning=False
            )

    def _next_wake(self) -> datetime | None:
        """The earliest time something in this run changes without anyone reporting it."""
        times: list[datetime] = []
        if self.run_state is not DagRunState.RUNNING:
            return None
        if self.dag.dagrun_timeout is not None and self.run_start is not None:
            times.append(self.run_start + self.dag.dagrun_timeout)
        for task_id, ti in self.tis.items():
            if ti.state in (S.UP_FOR_RETRY, S.UP_FOR_RESCHEDULE) and ti.next_try_at is not None:
                times.append(ti.next_try_at)
            elif ti.state is S.DEFERRED and ti.trigger_timeout_at is not None:
                times.append(ti.trigger_timeout_at)
            elif _in_execution(ti) and (deadline := self._execution_deadline(task_id)) is not None:
                times.append(deadline)
            if (pending_deadline := self._pending_deadline(task_id)) is not None:
                times.append(pending_deadline)
        future = [moment for moment in times if moment > self.now]
        return min(future, default=None)

    # ------------------------------------------------------------------------- task instances

    def _task(self, task_id: str) -> ResolvedTask:
        """The task of a task instance key (a task id, or ``task_id[map_index]``)."""
        return self.dag.tasks[mapping.split_key(task_id)[0]]

    def _in_dag(self, key: str) -> bool:
        return mapping.split_key(key)[0] in self.dag.tasks

    def _set(self, task_id: str, state: TaskInstanceState, reason: str, **fields: Any) -> None:
        """Move a task instance to `state` (legal moves only), record why, and tell the user."""
        ti = self.tis[task_id]
        check_transition(ti.state, state, task_id=task_id)
        self.tis[task_id] = ti.model_copy(update={"state": state, "reason": reason, **fields})
        event_reason, warning = _EVENT_REASONS[state]
        if state is S.SCHEDULED:
            self._scheduled_event_at[task_id] = len(self.events)
        self.events.append(
            RunEvent(
                event_reason, f"Task {task_id} ({ti.state.value} -> {state.value}): {reason}", warning=warning
            )
        )

    def _update(self, task_id: str, **fields: Any) -> None:
        self.tis[task_id] = self.tis[task_id].model_copy(update=fields)

    def _sync_task_instances(self) -> None:
        """Airflow's `verify_integrity`: one task instance per task; those without a task are removed."""
        for task_id, task in self.dag.tasks.items():
            if not self.mapped.keys(task_id, removed=True):
                self.tis[task_id] = TaskInstanceStatus(max_tries=task.retries)
            elif task_id in self.tis and self.tis[task_id].state is S.REMOVED:
                self._set(task_id, S.NONE, "The task is in the DAG again", max_tries=task.retries)
        for task_id, ti in list(self.tis.items()):
            if not self._in_dag(task_id) and ti.state is not S.REMOVED:
                self._stop_attempt_of(ti)
                self._set(task_id, S.REMOVED, "The task is no longer in the DAG", end_date=self.now)

    def _stop_attempt_of(self, ti: TaskInstanceStatus) -> None:
        """Kill a task instance's live attempt, or delete its trigger if it is deferred."""
        if ti.state in (S.QUEUED, S.RUNNING, S.RESTARTING) and ti.pod_name:
            self.kills.append(ti.pod_name)
        if ti.state is S.DEFERRED and ti.trigger_name:
            self.triggers_to_delete.append(ti.trigger_name)

    def _restart_cleared(self) -> None:
        """A task instance cleared while running (Airflow's `restarting`): stop it and run it again."""
        for task_id, ti in list(self.tis.items()):
            if ti.state is S.RESTARTING and self._in_dag(task_id):
                self._stop_attempt_of(ti)
                self._set(task_id, S.NONE, "Cleared while running: its attempt was stopped", **TRY_RESET)

    # --------------------------------------------------------------------------------- attempts

    def _is_current(self, ti: TaskInstanceStatus, attempt: ObservedAttempt) -> bool:
        if ti.pod_name is not None:
            return attempt.name == ti.pod_name
        return attempt.try_number == ti.try_number

    def _apply_attempts(self) -> None:
        """Reports of the current attempts move their task instances; strays were sorted out by
        `zonda.plans.observe` (the one place that decides them) and are only carried out here."""
        for task_id, attempt in self.observed.attempts.items():
            ti = self.tis.get(task_id)
            if ti is None or ti.state not in ACTIVE_STATES or not self._is_current(ti, attempt):
                continue
            if attempt.phase is AttemptPhase.RUNNING and ti.state is S.QUEUED:
                start = ti.start_date or _not_before(attempt.started_at, ti.queued_at) or self.now
                self._set(task_id, S.RUNNING, f"Attempt {attempt.name} is running", start_date=start)
            elif attempt.phase in (AttemptPhase.SUCCEEDED, AttemptPhase.FAILED, AttemptPhase.MISSING):
                self._finish_attempt(task_id, attempt)

    def _finish_attempt(self, task_id: str, attempt: ObservedAttempt) -> None:
        ti = self.tis[task_id]
        ended = attempt.finished_at or self.now
        # The attempt's own start (the runner's, sub-second) unless this try resumes an earlier attempt's.
        own_start = _not_before(attempt.started_at, ti.queued_at)
        started = ti.start_date if ti.next_method is not None else own_start or ti.start_date
        ran = (ended - attempt.started_at).total_seconds() if attempt.started_at else 0.0
        self._update(
            task_id,
            start_date=started,
            end_date=ended,
            duration_seconds=(ended - started).total_seconds() if started else None,
            running_seconds=ti.running_seconds + max(ran, 0.0),
            exit_code=attempt.exit_code,
            message=attempt.message or (attempt.result.message if attempt.result else None),
        )
        result = attempt.result
        if attempt.phase is AttemptPhase.MISSING:
            self._fail(
                task_id,
                f"Attempt {attempt.name} vanished while the task instance was "
                f"{ti.state.value} (its pod was deleted or evicted, or its node was lost); "
                "it is handled as a zombie" + _detail(attempt.message),
            )
        elif attempt.phase is AttemptPhase.SUCCEEDED and result is None:
            self._succeed(task_id, TaskResult(outcome=TaskOutcome.SUCCESS), attempt)
        elif attempt.phase is AttemptPhase.SUCCEEDED and result is not None:
            self._apply_result(task_id, result, attempt)
        elif attempt.exit_code == SKIP_EXIT_CODE:
            self._set(
                task_id,
                S.SKIPPED,
                f"Attempt {attempt.name} exited with code {SKIP_EXIT_CODE}: "
                "the task skipped itself" + _detail(attempt.message),
                **_TRY_END,
            )
        elif result is not None and result.outcome in (
            TaskOutcome.FAILED,
            TaskOutcome.FAILED_NO_RETRY,
            TaskOutcome.SKIPPED,
        ):
            self._apply_result(task_id, result, attempt)
        else:
            code = "" if attempt.exit_code is None else f" with exit code {attempt.exit_code}"
            self._fail(task_id, f"Attempt {attempt.name} failed{code}" + _detail(attempt.message))

    def _apply_result(self, task_id: str, result: TaskResult, attempt: ObservedAttempt) -> None:
        outcome = result.outcome
        if outcome is TaskOutcome.SUCCESS:
            self._succeed(task_id, result, attempt)
        elif outcome is TaskOutcome.SKIPPED:
            self._set(task_id, S.SKIPPED, result.message or "The task skipped itself", **_TRY_END)
        elif outcome is TaskOutcome.FAILED:
            self._fail(task_id, result.message or "The task failed")
        elif outcome is TaskOutcome.FAILED_NO_RETRY:
            self._fail(task_id, (result.message or "The task failed") + " (no retry)", retry=False)
        elif outcome is TaskOutcome.DEFERRED:
            if result.deferral is None:
                self._fail(task_id, "The task deferred without saying which trigger to wait for")
            else:
                self._defer(task_id, result, deferred_at=attempt.finished_at or self.now)
        elif outcome is TaskOutcome.RESCHEDULE:
            if result.reschedule_at is None:
                self._fail(task_id, "The sensor asked to be rescheduled without saying when")
            else:
                self._reschedule(task_id, result, result.reschedule_at, attempt)

    def _succeed(self, task_id: str, result: TaskResult, attempt: ObservedAttempt) -> None:
        follow = None if result.follow_task_ids is None else group_roots(self.dag, result.follow_task_ids)
        if follow is not None and (unknown := sorted(set(follow) - set(self.dag.tasks))):
            # Airflow's SkipMixin raises inside the branch task, which then fails (and may retry).
            self._fail(
                task_id,
                f"'branch_task_ids' must contain only valid task_ids. Invalid tasks found: {unknown}.",
            )
            return
        reason = result.message or f"Attempt {attempt.name} succeeded"
        self._set(
            task_id,
            S.SUCCESS,
            reason,
            xcom=result.xcom,
            **self._pushes(task_id, result),
            follow_task_ids=follow,
            **_TRY_END,
        )
        if follow is not None:
            self._skip_all_except(task_id, follow)
        if result.skip_all_downstream:
            self._skip_downstream(
                task_id,
                sorted(descendants(self.dag, task_id)),
                f"Task {task_id} short-circuited: every downstream task is skipped",
            )

    def _fail(self, task_id: str, reason: str, *, retry: bool = True) -> None:
        """Airflow's `handle_failure`: up_for_retry while tries remain, failed otherwise."""
        ti = self.tis[task_id]
        task = self._task(task_id) if self._in_dag(task_id) else None
        max_tries = ti.max_tries if ti.max_tries is not None else (task.retries if task else 0)
        ended = ti.end_date if ti.end_date and ti.state in ACTIVE_STATES else self.now
        attempts = f"try {ti.try_number} of {max_tries + 1}"
        if retry and task is not None and is_eligible_to_retry(try_number=ti.try_number, max_tries=max_tries):
            retry_at = next_retry_datetime(
                failed_at=ended,
                dag_id=self.dag.name,
                task_id=task_id,
                logical_date=self.logical_date or self.run_name,
                next_try_number=ti.try_number + 1,
                retry_delay=task.retry_delay,
                exponential_backoff=task.retry_exponential_backoff,
                max_retry_delay=task.max_retry_delay,
            )
            self._set(
                task_id,
                S.UP_FOR_RETRY,
                f"{reason}; {attempts}, retrying at {retry_at.isoformat()}",
                end_date=ended,
                **{**_TRY_END, "next_try_at": retry_at},
            )
        else:
            self._set(task_id, S.FAILED, f"{reason}; {attempts}", end_date=ended, **_TRY_END)

    def _pushes(self, task_id: str, result: TaskResult) -> dict[str, Any]:
        """The task instance's XComs with this attempt's pushes: joined to what the try pushed before a
        deferral (an attempt that does not resume one started with none, see `_launch`)."""
        ti = self.tis[task_id]
        values, lengths = xcoms.merge_pushes(ti.xcoms, ti.xcom_lengths, result.xcoms, result.xcom_lengths)
        return {"xcoms": values, "xcom_lengths": lengths}

    def _defer(self, task_id: str, result: TaskResult, *, deferred_at: datetime) -> None:
        """Airflow's `_defer_task`: the trigger's timeout is also bounded by the execution timeout. What
        the try pushed before deferring is kept: the resumed try and downstream tasks pull it."""
        ti = self.tis[task_id]
        assert result.deferral is not None
        deferral = result.deferral.to_status()
        count = ti.deferral_count + 1
        timeouts = []
        if deferral.timeout_seconds is not None:
            timeouts.append(deferred_at + timedelta(seconds=deferral.timeout_seconds))
        if (execution_deadline := self._execution_deadline(task_id)) is not None:
            timeouts.append(execution_deadline)
        timeout_at = min(timeouts, default=None)
        name = trigger_name(self.run_name, task_id, ti.try_number, count)
        self._set(
            task_id,
            S.DEFERRED,
            f"Waiting for trigger {deferral.trigger_classpath} ({name})",
            deferral=deferral,
            deferral_count=count,
            deferred_at=deferred_at,
            trigger_timeout_at=timeout_at,
            trigger_name=name,
            next_method=None,
            next_kwargs=None,
            **self._pushes(task_id, result),
        )
        self._request_trigger(task_id)

    def _request_trigger(self, task_id: str) -> None:
        ti = self.tis[task_id]
        assert ti.deferral is not None and ti.trigger_name is not None
        self.triggers_to_create.append(
            TriggerRequest(
                name=ti.trigger_name,
                task_id=task_id,
                try_number=ti.try_number,
                deferral_count=ti.deferral_count,
                deferral=ti.deferral,
                timeout_at=ti.trigger_timeout_at,
            )
        )

    def _reschedule(self, task_id: str, result: TaskResult, at: datetime, attempt: ObservedAttempt) -> None:
        """A sensor in reschedule mode: the same try pokes again at `at` (Airflow keeps the try number).
        The poke's pushes are kept until the next poke starts (Airflow clears them then)."""
        ti = self.tis[task_id]
        first = ti.first_try_start or ti.start_date or attempt.started_at or self.now
        self._set(
            task_id,
            S.UP_FOR_RESCHEDULE,
            f"The sensor pokes again at {at.isoformat()}",
            next_try_at=at,
            first_try_start=first,
            next_method=None,
            next_kwargs=None,
            **self._pushes(task_id, result),
        )

    def _execution_deadline(self, task_id: str) -> datetime | None:
        """Airflow counts `execution_timeout` from the try's start, deferrals included."""
        ti = self.tis[task_id]
        task = self._task(task_id) if self._in_dag(task_id) else None
        if task is None or task.execution_timeout is None or ti.start_date is None:
            return None
        return ti.start_date + task.execution_timeout

    def _pending_deadline(self, task_id: str) -> datetime | None:
        """Airflow's `worker_pods_pending_timeout`, counted from the current attempt's creation."""
        ti, attempt = self.tis.get(task_id), self.observed.attempts.get(task_id)
        if (
            self.pending_timeout is None
            or ti is None
            or attempt is None
            or ti.state not in ACTIVE_STATES
            or attempt.phase is not AttemptPhase.PENDING
            or attempt.pending_since is None
            or not self._is_current(ti, attempt)
        ):
            return None
        return attempt.pending_since + self.pending_timeout

    def _enforce_pending_timeouts(self) -> None:
        """A try whose pod never starts (image pull errors, unschedulable) fails and may retry."""
        for task_id, ti in list(self.tis.items()):
            deadline = self._pending_deadline(task_id)
            if deadline is None or self.now < deadline:
                continue
            attempt = self.observed.attempts[task_id]
            assert self.pending_timeout is not None
            self._stop_attempt_of(ti)
            self._update(task_id, end_date=self.now, message=attempt.message)
            self._fail(
                task_id,
                f"Attempt {attempt.name} was still Pending after the pending timeout of "
                f"{_seconds(self.pending_timeout)}" + _detail(attempt.message),
            )

    def _enforce_execution_timeouts(self) -> None:
        for task_id, ti in list(self.tis.items()):
            deadline = self._execution_deadline(task_id)
            if _in_execution(ti) and deadline is not None and self.now >= deadline:
                timeout = self._task(task_id).execution_timeout
                assert timeout is not None
                self._stop_attempt_of(ti)
                self._update(task_id, end_date=self.now)
                self._fail(
                    task_id,
                    f"Task exceeded its execution_timeout of {_seconds(timeout)} "
                    f"(try started at {ti.start_date.isoformat() if ti.start_date else '?'})",
                )

    # --------------------------------------------------------------------------------- triggers

    def _trigger_of(self, task_id: str, ti: TaskInstanceStatus) -> ObservedTrigger | None:
        trigger = self.observed.triggers.get(task_id)
        if trigger is None or ti.state is not S.DEFERRED:
            return None
        current = (
            trigger.name == ti.trigger_name
            if ti.trigger_name
            else (trigger.try_number, trigger.deferral_count) == (ti.try_number, ti.deferral_count)
        )
        return trigger if current else None

    def _apply_triggers(self) -> None:
        for task_id, observed in self.observed.triggers.items():
            ti_or_none = self.tis.get(task_id)
            if ti_or_none is None or self._trigger_of(task_id, ti_or_none) is None:
                self.triggers_to_delete.append(observed.name)  # its task instance moved on
        for task_id, ti in list(self.tis.items()):
            if ti.state is not S.DEFERRED:
                continue
            trigger = self._trigger_of(task_id, ti)
            if trigger is not None and trigger.fired:
                self._resume(task_id, trigger)
            elif trigger is not None and trigger.failed:
                self.triggers_to_delete.append(trigger.name)
                self._fail(task_id, "Trigger failure" + _detail(trigger.message))
            elif ti.trigger_timeout_at is not None and self.now >= ti.trigger_timeout_at:
                self._stop_attempt_of(ti)
                self._fail(task_id, "Trigger/execution timeout")
            elif trigger is None and self._in_dag(task_id):
                self._request_trigger(task_id)  # lost, or not created yet: creating it again is harmless

    def _resume(self, task_id: str, trigger: ObservedTrigger) -> None:
        """The trigger fired: schedule the task again, resuming at the deferral's method with the event."""
        ti = self.tis[task_id]
        assert ti.deferral is not None
        self.triggers_to_delete.append(trigger.name)
        method = ti.deferral.method_name
        self._set(
            task_id,
            S.SCHEDULED,
            f"Trigger {trigger.name} fired: resuming {method}",
            next_method=method,
            next_kwargs={**ti.deferral.kwargs, "event": trigger.event},
            deferral=None,
            trigger_timeout_at=None,
            trigger_name=None,
        )

    # ------------------------------------------------------------------------------- readiness

    def _wake_waiting(self) -> None:
        for task_id, ti in list(self.tis.items()):
            if ti.state in (S.UP_FOR_RETRY, S.UP_FOR_RESCHEDULE) and (
                ti.next_try_at is None or self.now >= ti.next_try_at
            ):
                what = "retry" if ti.state is S.UP_FOR_RETRY else "reschedule"
                self._set(task_id, S.SCHEDULED, f"Its {what} time came")

    def _evaluate_readiness(self) -> None:
        """Trigger rules over direct upstreams, in topological order so cascades settle in one pass."""
        for task_id, task in self.dag.tasks.items():
            waiting = [key for key in self.mapped.keys(task_id) if self.tis[key].state is S.NONE]
            if waiting and self.mapped.awaits_expansion(task):
                in_group = self.mapped.expand_in_group(task)
                if in_group is None:
                    self._evaluate_task_instance(task, task_id, expanding=True)
                    continue
                waiting = in_group
            for key in waiting:
                self._evaluate_task_instance(task, key)

    def _evaluate_task_instance(self, task: ResolvedTask, key: str, *, expanding: bool = False) -> None:
        """One task instance's trigger rule; a mapped task still to expand is decided as a whole (its
        instances waiting for the expansion get the same state)."""
        keys = [key]
        if expanding:
            keys = [k for k in self.mapped.keys(task.task_id) if self.tis[k].state is S.NONE]
        if (parent := self._skipping_parent(task)) is not None:
            # Airflow's NotPreviouslySkippedDep: a cleared task stays skipped while the decision stands.
            for each in keys:
                self._set(
                    each,
                    S.SKIPPED,
                    f"Skipping because of previous XCom result from parent task "
                    f"{parent}: it did not follow this task",
                    end_date=self.now,
                )
            return
        upstream_states = self.mapped.upstream_states(task, None if expanding else key)
        setups = [
            k
            for up in task.upstream
            if up in self.dag.tasks and self.dag.tasks[up].is_setup
            for k in self.mapped.keys(up)
        ]
        decision = evaluate_trigger_rule(task.trigger_rule, upstream_states, setups)
        past_problem = self._past_problem(task, key)
        if decision.outcome is TriggerRuleOutcome.UPSTREAM_FAILED:
            for each in keys:
                self._set(each, S.UPSTREAM_FAILED, decision.reason, end_date=self.now)
        elif decision.outcome is TriggerRuleOutcome.SKIP and (
            past_problem is None or not task.wait_for_past_depends_before_skipping
        ):  # Airflow skips at once unless told to wait for the past first
            for each in keys:
                self._set(each, S.SKIPPED, decision.reason, end_date=self.now)
        elif decision.outcome is TriggerRuleOutcome.WAIT or past_problem is not None:
            for each in keys:
                waiting = decision.reason if decision.outcome is TriggerRuleOutcome.WAIT else past_problem
                self._update(each, reason=waiting)
        elif expanding:
            self.mapped.expand(task, decision.reason)
        elif task.operator in operator_registry.EMPTY_OPERATORS:
            # Airflow's `schedule_tis` counts the try it did not need to launch: try_number + 1.
            self._set(
                key,
                S.SUCCESS,
                "EmptyOperator: succeeded without running",
                start_date=self.now,
                end_date=self.now,
                duration_seconds=0.0,
                try_number=self.tis[key].try_number + 1,
            )
        elif task.operator in operator_registry.LATEST_ONLY_OPERATORS:
            self._run_latest_only(task)
        else:
            self._set(key, S.SCHEDULED, decision.reason)

    def _skipping_parent(self, task: ResolvedTask) -> str | None:
        """A direct upstream branch (or LatestOnly) that succeeded without following this task."""
        for up in sorted(task.upstream):
            parent = self.tis.get(up)
            if parent is None or parent.state is not S.SUCCESS or parent.follow_task_ids is None:
                continue
            if task.task_id not in self._on_followed_paths(parent.follow_task_ids):
                return up
        return None

    def _past_problem(self, task: ResolvedTask, key: str) -> str | None:
        """Airflow's PrevDagrunDep: depends_on_past needs the previous run's task instance succeeded
        (a mapped instance: the one with its map index)."""
        previous = self.observed.previous_run_states
        if not task.depends_on_past or previous is None:
            return None
        state = previous.get(key)
        if state is None or state in _PAST_OK_STATES:
            return None
        return (
            f"depends_on_past is true for this task, but the previous task instance is in the state "
            f"'{state.value}' which is not a successful state."
        )

    def _run_latest_only(self, task: ResolvedTask) -> None:
        """Airflow's LatestOnlyOperator, without a launch: skip direct downstreams unless the latest run."""
        downstream = sorted(task.downstream)
        start, end, latest = self.data_interval_end, self.observed.latest_window_end, None
        if self.run_type is RunType.MANUAL:
            reason, latest = "Externally triggered DAG run, continuing", True
        elif end is None or start is None:
            reason, latest = "Last scheduled execution: allowing execution to proceed.", True
        elif start < self.now <= end:
            reason, latest = "Latest, allowing execution to proceed.", True
        else:
            reason = (
                f"Not latest execution, skipping downstream (now {self.now.isoformat()} is not in "
                f"the latest interval ({start.isoformat()}, {end.isoformat()}])."
            )
        follow = downstream if latest else []
        self._set(
            task.task_id,
            S.SUCCESS,
            f"LatestOnlyOperator: {reason}",
            follow_task_ids=follow,
            start_date=self.now,
            end_date=self.now,
            duration_seconds=0.0,
            try_number=self.tis[task.task_id].try_number + 1,
        )
        self._skip_all_except(task.task_id, follow)

    def _skip_all_except(self, branch_id: str, follow: Iterable[str]) -> None:
        """Airflow's `SkipMixin.skip_all_except`: skip direct downstreams not on a followed path.

        A direct downstream that is also downstream of a followed task (the join of an empty
        branch) is not skipped: its trigger rule decides.
        """
        followed = set(follow)
        to_skip = sorted(set(self._task(branch_id).downstream) - self._on_followed_paths(followed))
        reason = f"Branch {branch_id} followed {sorted(followed)}: this task is not on a followed path"
        self._skip_downstream(branch_id, to_skip, reason)

    def _on_followed_paths(self, follow: Iterable[str]) -> set[str]:
        """The followed tasks and everything downstream of them: what a branch does not skip."""
        followed = {task_id for task_id in follow if task_id in self.dag.tasks}
        return followed.union(*(descendants(self.dag, task_id) for task_id in followed))

    def _skip_downstream(self, task_id: str, to_skip: list[str], reason: str) -> None:
        for downstream_id in to_skip:
            for key in self.mapped.keys(downstream_id):
                if self.tis[key].state in (S.NONE, S.SCHEDULED):
                    self._set(key, S.SKIPPED, reason, start_date=self.now, end_date=self.now)

    # --------------------------------------------------------------------------------- launches

    def _launch_ready(self) -> None:
        """Queue the ready task instances `_admit` lets start, in priority order; say why others wait."""
        ready = [key for key, ti in self.tis.items() if ti.state is S.SCHEDULED and self._in_dag(key)]
        if not ready:
            return
        admission = self._admit(ready)
        for candidate in admission.admitted:
            if candidate.run == self.run_name:
                self._launch(candidate.task_id)
            else:
                self.runs_to_wake.append(candidate.run)
        for key in ready:
            reason = admission.reasons.get((self.run_name, key))
            if reason is None or reason == self.tis[key].reason:
                continue
            if reason.startswith(pools.MISSING_POOL):
                self.events.append(RunEvent("PoolNotFound", f"Task {key}: {reason}", warning=True))
            self._update(key, reason=reason)

    def _admit(self, ready: list[str]) -> pools.Admission:
        """The admission step: pools, max_active_tasks, max_active_tis_per_dag/dagrun, by priority weight.

        This run's ready task instances compete with every other run's waiting ones
        (`Observation.concurrency`), so a heavier task instance elsewhere takes a slot first.
        """
        weights = effective_priority_weights(self.dag)
        mine = [
            run_slots.candidate(self.dag, self.run_name, key, self.logical_date, weights) for key in ready
        ]
        own = run_slots.holders(self.dag, self.run_name, {key: ti.state for key, ti in self.tis.items()})
        concurrency = self.observed.concurrency
        if concurrency is None:  # no pool accounting: this DAG's other runs count for max_active_tasks only
            elsewhere = pools.SlotHolder(
                run="", dag=self.dag.name, task_id="", pool="", slots=0, state=S.RUNNING
            )
            unlimited = {candidate.pool: pools.PoolLimit(pools.UNLIMITED) for candidate in mine}
            return pools.admit(mine, [*own, *[elsewhere] * self.observed.running_in_dag], unlimited)
        return pools.admit([*mine, *concurrency.waiting], [*own, *concurrency.holders], concurrency.pools)

    def _launch(self, task_id: str) -> None:
        ti = self.tis[task_id]
        resuming_deferral = ti.next_method is not None
        resuming_reschedule = ti.first_try_start is not None
        if resuming_deferral or resuming_reschedule:
            # Airflow keeps the try number, but the attempt needs a name of its own: derived from the
            # previous attempt's, it is deterministic and differs from every earlier one.
            try_number = ti.try_number
            name = attempt_name(self.run_name, f"{task_id}~{ti.pod_name or ''}", try_number)
            # A resumed deferral keeps the try's start (execution_timeout) and its XComs; a new poke
            # starts anew, as Airflow's `clear_xcom_data` unless `next_method`.
            fields: dict[str, Any] = {} if resuming_deferral else {"start_date": None, **_NO_XCOMS}
        else:
            try_number = ti.try_number + 1
            name = attempt_name(self.run_name, task_id, try_number)
            fields = {"start_date": None, "running_seconds": 0.0, "follow_task_ids": None, **_NO_XCOMS}
        # The scheduled -> queued steps of one pass make one event, not two.
        if (index := self._scheduled_event_at.pop(task_id, None)) is not None:
            self.events[index] = None
        max_tries = ti.max_tries if ti.max_tries is not None else self._task(task_id).retries
        self._set(
            task_id,
            S.QUEUED,
            f"Queued try {try_number} of {max_tries + 1} as {name}",
            try_number=try_number,
            pod_name=name,
            queued_at=self.now,
            end_date=None,
            duration_seconds=None,
            exit_code=None,
            message=None,
            next_try_at=None,
            **fields,
        )
        real_id, map_index = mapping.split_key(task_id)
        self.launches.append(
            TaskLaunch(task_id=real_id, try_number=try_number, attempt_name=name, map_index=map_index)
        )


def _not_before(moment: datetime | None, floor: datetime | None) -> datetime | None:
    """`moment`, but never before `floor`: a pod's whole-second start must not precede its queueing."""
    if moment is None or floor is None:
        return moment
    return max(moment, floor)


#: What a try's end clears: resume data, wait times, and the sensor's first poke.
_TRY_END: dict[str, Any] = {
    "next_method": None,
    "next_kwargs": None,
    "deferral": None,
    "trigger_timeout_at": None,
    "trigger_name": None,
    "first_try_start": None,
    "next_try_at": None,
}
#: A task instance without XComs: before a try that does not resume a deferral, and once cleared.
_NO_XCOMS: dict[str, Any] = {"xcom": None, "xcoms": None, "xcom_lengths": None}
#: What a clear resets, on top of a try's end (also `zonda.actions.clear`'s).
TRY_RESET: dict[str, Any] = {**_TRY_END, "end_date": None, **_NO_XCOMS}


def _in_execution(ti: TaskInstanceStatus) -> bool:
    """Whether the task instance's execution_timeout runs: launched, or resumed and waiting for a slot."""
    return ti.state in ACTIVE_STATES or (ti.state is S.SCHEDULED and ti.next_method is not None)


def _detail(message: str | None) -> str:
    return f": {message}" if message else ""
