"""How one scheduler pass (`zonda.passes.run_pass.RunPass`) applies what the executor and the triggerer saw.

Steps 2 and 3 of the pass: each current attempt's report moves its task instance (running, success,
failure and Airflow's `handle_failure` retries, skip, deferral, reschedule, zombie); pending and
execution timeouts fail tries; a fired trigger resumes its task, a failed or timed-out one fails it;
a lost trigger is requested again. `RunPass.plan` calls these in order; they act on
the pass's working state (`zonda.passes.pass_state.PassState`, ``self.state``).

Its own module because a try's outcomes (retries, deferrals, timeouts) are one subject, apart from
readiness and launches.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from zonda.passes.decisions import AttemptPhase, ObservedAttempt, ObservedTrigger, TriggerRequest
from zonda.passes.graphs import descendants, group_roots
from zonda.passes.pass_state import PassState
from zonda.passes.retries import is_eligible_to_retry, next_retry_datetime
from zonda.resources import hitl
from zonda.resources.dagrun_models import TaskInstanceStatus
from zonda.resources.invocations import SKIP_EXIT_CODE, TaskOutcome, TaskResult
from zonda.resources.models import TaskInstanceState
from zonda.resources.names import trigger_name
from zonda.tries import xcoms

S = TaskInstanceState

#: Task instances whose attempt is (or is about to be) alive: they use a `max_active_tasks` slot.
ACTIVE_STATES = frozenset({S.QUEUED, S.RUNNING})

#: What a try's end clears: resume data, wait times, and the sensor's first poke.
TRY_END: dict[str, Any] = {
    "next_method": None,
    "next_kwargs": None,
    "deferral": None,
    "trigger_timeout_at": None,
    "trigger_name": None,
    "first_try_start": None,
    "next_try_at": None,
}


def duration_text(delta: timedelta) -> str:
    """A duration as people write it: 90 -> 1m30s."""
    total = int(delta.total_seconds())
    hours, rest = divmod(total, 3600)
    minutes, seconds = divmod(rest, 60)
    text = (f"{hours}h" if hours else "") + (f"{minutes}m" if minutes else "")
    return text + (f"{seconds}s" if seconds or not text else "")


def not_before(moment: datetime | None, floor: datetime | None) -> datetime | None:
    """`moment`, but never before `floor`: a pod's whole-second start must not precede its queueing,
    nor its whole-second finish the start."""
    if moment is None or floor is None:
        return moment
    return max(moment, floor)


def in_execution(ti: TaskInstanceStatus) -> bool:
    """Whether the task instance's execution_timeout runs: launched, or resumed and waiting for a slot."""
    return ti.state in ACTIVE_STATES or (ti.state is S.SCHEDULED and ti.next_method is not None)


def detail(message: str | None) -> str:
    """A message appended to a reason, if there is one."""
    return f": {message}" if message else ""


class Attempts:
    """The pass's handling of tries: executor and triggerer reports, retries, timeouts."""

    def __init__(self, state: PassState) -> None:
        self.state = state

    def _is_current(self, ti: TaskInstanceStatus, attempt: ObservedAttempt) -> bool:
        if ti.pod_name is not None:
            return attempt.name == ti.pod_name
        return attempt.try_number == ti.try_number

    def apply_attempts(self) -> None:
        """Reports of the current attempts move their task instances; strays were sorted out by
        `zonda.passes.plans.observe` (the one place that decides them) and are only carried out here."""
        for task_id, attempt in self.state.observed.attempts.items():
            self.apply_attempt(task_id, attempt)

    def apply_attempt(self, task_id: str, attempt: ObservedAttempt) -> bool:
        """One current attempt's report moves its task instance; whether the try ended. Also what a
        try adopted by the launch step reports (`zonda.passes.run_pass.RunPass._launch`)."""
        ti = self.state.tis.get(task_id)
        if ti is None or ti.state not in ACTIVE_STATES or not self._is_current(ti, attempt):
            return False
        if attempt.phase is AttemptPhase.RUNNING and ti.state is S.QUEUED:
            start = ti.start_date or not_before(attempt.started_at, ti.queued_at) or self.state.now
            self.state.set(task_id, S.RUNNING, f"Attempt {attempt.name} is running", start_date=start)
        elif attempt.phase in (AttemptPhase.SUCCEEDED, AttemptPhase.FAILED, AttemptPhase.MISSING):
            self._finish_attempt(task_id, attempt)
            return True
        return False

    def _finish_attempt(self, task_id: str, attempt: ObservedAttempt) -> None:
        ti = self.state.tis[task_id]
        ended = attempt.finished_at or self.state.now
        # The attempt's own start (the runner's, sub-second) unless this try resumes an earlier attempt's.
        own_start = not_before(attempt.started_at, ti.queued_at)
        started = ti.start_date if ti.next_method is not None else own_start or ti.start_date
        # A pod's whole-second finish may fall before a start floored to the queued time: never before it
        ended = not_before(ended, started) or ended
        ran = (ended - attempt.started_at).total_seconds() if attempt.started_at else 0.0
        self.state.update(
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
                "it is handled as a zombie" + detail(attempt.message),
            )
        elif attempt.phase is AttemptPhase.SUCCEEDED and result is None:
            self._succeed(task_id, TaskResult(outcome=TaskOutcome.SUCCESS), attempt)
        elif attempt.phase is AttemptPhase.SUCCEEDED and result is not None:
            self._apply_result(task_id, result, attempt)
        elif attempt.exit_code == SKIP_EXIT_CODE:
            self.state.set(
                task_id,
                S.SKIPPED,
                f"Attempt {attempt.name} exited with code {SKIP_EXIT_CODE}: "
                "the task skipped itself" + detail(attempt.message),
                **TRY_END,
            )
        elif result is not None and result.outcome in (
            TaskOutcome.FAILED,
            TaskOutcome.FAILED_NO_RETRY,
            TaskOutcome.SKIPPED,
        ):
            self._apply_result(task_id, result, attempt)
        else:
            code = "" if attempt.exit_code is None else f" with exit code {attempt.exit_code}"
            self._fail(task_id, f"Attempt {attempt.name} failed{code}" + detail(attempt.message))

    def _apply_result(self, task_id: str, result: TaskResult, attempt: ObservedAttempt) -> None:
        outcome = result.outcome
        if outcome is TaskOutcome.SUCCESS:
            self._succeed(task_id, result, attempt)
        elif outcome is TaskOutcome.SKIPPED:
            self.state.set(task_id, S.SKIPPED, result.message or "The task skipped itself", **TRY_END)
        elif outcome is TaskOutcome.FAILED:
            self._fail(task_id, result.message or "The task failed", retry_delay=result.retry_delay_seconds)
        elif outcome is TaskOutcome.FAILED_NO_RETRY:
            self._fail(task_id, (result.message or "The task failed") + " (no retry)", retry=False)
        elif outcome is TaskOutcome.DEFERRED:
            if result.deferral is None:
                self._fail(task_id, "The task deferred without saying which trigger to wait for")
            else:
                self._defer(task_id, result, deferred_at=attempt.finished_at or self.state.now)
        elif outcome is TaskOutcome.RESCHEDULE:
            if result.reschedule_at is None:
                self._fail(task_id, "The sensor asked to be rescheduled without saying when")
            else:
                self._reschedule(task_id, result, result.reschedule_at, attempt)

    def _succeed(self, task_id: str, result: TaskResult, attempt: ObservedAttempt) -> None:
        follow = (
            None if result.follow_task_ids is None else group_roots(self.state.dag, result.follow_task_ids)
        )
        if follow is not None and (unknown := sorted(set(follow) - set(self.state.dag.tasks))):
            # Airflow's SkipMixin raises inside the branch task, which then fails (and may retry).
            self._fail(
                task_id,
                f"'branch_task_ids' must contain only valid task_ids. Invalid tasks found: {unknown}.",
            )
            return
        reason = result.message or f"Attempt {attempt.name} succeeded"
        self.state.set(
            task_id,
            S.SUCCESS,
            reason,
            xcom=result.xcom,
            **self._pushes(task_id, result),
            # a short-circuit follows none of its direct downstreams: recorded for the re-skip on clear
            follow_task_ids=[] if follow is None and result.skip_all_downstream else follow,
            **TRY_END,
        )
        if follow is not None:
            self.state.readiness.skip_all_except(task_id, follow)
        if result.skip_all_downstream:
            self.state.readiness.skip_downstream(
                task_id,
                sorted(descendants(self.state.dag, self.state.task(task_id).task_id)),
                f"Task {task_id} short-circuited: every downstream task is skipped",
            )

    def _fail(
        self, task_id: str, reason: str, *, retry: bool = True, retry_delay: float | None = None
    ) -> None:
        """Airflow's `handle_failure`: up_for_retry while tries remain, failed otherwise; a retry policy's
        `retry_delay` counts from the try's end, without backoff (Airflow's `retry_delay_override`)."""
        ti = self.state.tis[task_id]
        task = self.state.task(task_id) if self.state.in_dag(task_id) else None
        max_tries = ti.max_tries if ti.max_tries is not None else (task.retries if task else 0)
        ended = ti.end_date if ti.end_date and ti.state in ACTIVE_STATES else self.state.now
        attempts = f"try {ti.try_number} of {max_tries + 1}"
        if retry and task is not None and is_eligible_to_retry(try_number=ti.try_number, max_tries=max_tries):
            retry_at = ended + timedelta(seconds=retry_delay) if retry_delay is not None else None
            retry_at = retry_at or next_retry_datetime(
                failed_at=ended,
                dag_id=self.state.dag.name,
                task_id=task_id,
                logical_date=self.state.logical_date or self.state.run_name,
                next_try_number=ti.try_number + 1,
                retry_delay=task.retry_delay,
                exponential_backoff=task.retry_exponential_backoff,
                max_retry_delay=task.max_retry_delay,
            )
            self.state.set(
                task_id,
                S.UP_FOR_RETRY,
                f"{reason}; {attempts}, retrying at {retry_at.isoformat()}",
                end_date=ended,
                **{**TRY_END, "next_try_at": retry_at},
            )
        else:
            self.state.set(task_id, S.FAILED, f"{reason}; {attempts}", end_date=ended, **TRY_END)

    def _pushes(self, task_id: str, result: TaskResult) -> dict[str, Any]:
        """The task instance's XComs with this attempt's pushes: joined to what the try pushed before a
        deferral (an attempt that does not resume one started with none, see `_launch`)."""
        ti = self.state.tis[task_id]
        values, lengths = xcoms.merge_pushes(ti.xcoms, ti.xcom_lengths, result.xcoms, result.xcom_lengths)
        return {"xcoms": values, "xcom_lengths": lengths}

    def _defer(self, task_id: str, result: TaskResult, *, deferred_at: datetime) -> None:
        """Airflow's `_defer_task`: the trigger's timeout is also bounded by the execution timeout. What
        the try pushed before deferring is kept: the resumed try and downstream tasks pull it."""
        ti = self.state.tis[task_id]
        assert result.deferral is not None
        deferral = result.deferral.to_status()
        count = ti.deferral_count + 1
        timeouts = []
        if deferral.timeout_seconds is not None:
            timeouts.append(deferred_at + timedelta(seconds=deferral.timeout_seconds))
        if (execution_deadline := self.execution_deadline(task_id)) is not None:
            timeouts.append(execution_deadline)
        timeout_at = min(timeouts, default=None)
        name = trigger_name(self.state.run_name, task_id, ti.try_number, count)
        request = hitl.request_of(deferral.trigger_classpath, deferral.trigger_kwargs)
        self.state.set(
            task_id,
            S.DEFERRED,
            f"Waiting for trigger {deferral.trigger_classpath} ({name})"
            if request is None
            else hitl.waiting_reason(request, run_name=self.state.run_name, task_id=task_id),
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
        ti = self.state.tis[task_id]
        assert ti.deferral is not None and ti.trigger_name is not None
        self.state.triggers_to_create.append(
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
        ti = self.state.tis[task_id]
        first = ti.first_try_start or ti.start_date or attempt.started_at or self.state.now
        self.state.set(
            task_id,
            S.UP_FOR_RESCHEDULE,
            f"The sensor pokes again at {at.isoformat()}",
            next_try_at=at,
            first_try_start=first,
            next_method=None,
            next_kwargs=None,
            **self._pushes(task_id, result),
        )

    def execution_deadline(self, task_id: str) -> datetime | None:
        """Airflow counts `execution_timeout` from the try's start, deferrals included."""
        ti = self.state.tis[task_id]
        task = self.state.task(task_id) if self.state.in_dag(task_id) else None
        if task is None or task.execution_timeout is None or ti.start_date is None:
            return None
        return ti.start_date + task.execution_timeout

    def pending_deadline(self, task_id: str) -> datetime | None:
        """Airflow's `worker_pods_pending_timeout`, counted from the current attempt's creation."""
        ti, attempt = self.state.tis.get(task_id), self.state.observed.attempts.get(task_id)
        if (
            self.state.limits.pending_timeout is None
            or ti is None
            or attempt is None
            or ti.state not in ACTIVE_STATES
            or attempt.phase is not AttemptPhase.PENDING
            or attempt.pending_since is None
            or not self._is_current(ti, attempt)
        ):
            return None
        return attempt.pending_since + self.state.limits.pending_timeout

    def enforce_pending_timeouts(self) -> None:
        """A try whose pod never starts (image pull errors, unschedulable) fails and may retry."""
        for task_id, ti in list(self.state.tis.items()):
            deadline = self.pending_deadline(task_id)
            if deadline is None or self.state.now < deadline:
                continue
            attempt = self.state.observed.attempts[task_id]
            assert self.state.limits.pending_timeout is not None
            self.state.stop_attempt_of(ti)
            self.state.update(task_id, end_date=self.state.now, message=attempt.message)
            self._fail(
                task_id,
                f"Attempt {attempt.name} was still Pending after the pending timeout of "
                f"{duration_text(self.state.limits.pending_timeout)}" + detail(attempt.message),
            )

    def enforce_execution_timeouts(self) -> None:
        for task_id, ti in list(self.state.tis.items()):
            deadline = self.execution_deadline(task_id)
            if in_execution(ti) and deadline is not None and self.state.now >= deadline:
                timeout = self.state.task(task_id).execution_timeout
                assert timeout is not None
                self.state.stop_attempt_of(ti)
                self.state.update(task_id, end_date=self.state.now)
                self._fail(
                    task_id,
                    f"Task exceeded its execution_timeout of {duration_text(timeout)} "
                    f"(try started at {ti.start_date.isoformat() if ti.start_date else '?'})",
                )

    # --------------------------------------------------------------------------------- triggers

    def _trigger_of(self, task_id: str, ti: TaskInstanceStatus) -> ObservedTrigger | None:
        trigger = self.state.observed.triggers.get(task_id)
        if trigger is None or ti.state is not S.DEFERRED:
            return None
        current = (
            trigger.name == ti.trigger_name
            if ti.trigger_name
            else (trigger.try_number, trigger.deferral_count) == (ti.try_number, ti.deferral_count)
        )
        return trigger if current else None

    def apply_triggers(self) -> None:
        for task_id, observed in self.state.observed.triggers.items():
            ti_or_none = self.state.tis.get(task_id)
            if ti_or_none is None or self._trigger_of(task_id, ti_or_none) is None:
                self.state.triggers_to_delete.append(observed.name)  # its task instance moved on
        for task_id, ti in list(self.state.tis.items()):
            if ti.state is not S.DEFERRED:
                continue
            trigger = self._trigger_of(task_id, ti)
            if trigger is not None and trigger.fired:
                self._resume(task_id, trigger)
            elif trigger is not None and trigger.failed:
                self.state.triggers_to_delete.append(trigger.name)
                self._fail(task_id, "Trigger failure" + detail(trigger.message))
            elif ti.trigger_timeout_at is not None and self.state.now >= ti.trigger_timeout_at:
                self.state.stop_attempt_of(ti)
                self._fail(task_id, "Trigger/execution timeout")
            elif trigger is None and self.state.in_dag(task_id):
                self._request_trigger(task_id)  # lost, or not created yet: creating it again is harmless

    def _resume(self, task_id: str, trigger: ObservedTrigger) -> None:
        """The trigger fired: schedule the task again, resuming at the deferral's method with the event."""
        ti = self.state.tis[task_id]
        assert ti.deferral is not None
        self.state.triggers_to_delete.append(trigger.name)
        method = ti.deferral.method_name
        self.state.set(
            task_id,
            S.SCHEDULED,
            f"Trigger {trigger.name} fired: resuming {method}",
            next_method=method,
            next_kwargs={**ti.deferral.kwargs, "event": trigger.event},
            deferral=None,
            trigger_timeout_at=None,
            trigger_name=None,
        )
