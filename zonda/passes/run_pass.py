"""The implementation of `zonda.passes.run_pass.decide`: one scheduler pass over one DagRun.

A `RunPass` holds a working copy of the run's status and walks Airflow's scheduler loop in a fixed
order, each step seeing the previous steps' changes, so one pass settles everything that can be
settled at `now` (a chain of skips, a retry whose delay is already over, a fired trigger's resumed
try...):

1. start the run, create missing task instances, mark those whose task left the DAG ``removed``;
2. restart cleared task instances; apply what the executors saw of attempts (success, failure,
   skip, deferral, reschedule, zombies) and enforce pending and execution timeouts;
3. apply what the triggerer saw (fired, failed) and trigger timeouts;
4. time the run out (Airflow skips every unfinished task instance and fails the run);
5. wake retries and reschedules whose time came, or whose next try an earlier pass launched already;
6. evaluate trigger rules in topological order (skip and upstream_failed cascades, branching,
   LatestOnly, EmptyOperator, depends_on_past);
7. launch ready task instances by priority within `max_active_tasks`;
8. settle the run's state (Airflow's `DagRun.update_state`) and compute when to wake.

Every state change goes through `zonda.resources.states.check_transition`, so an illegal move is a bug that
raises, and leaves one `RunEvent` and a `reason` on the task instance.

`RunPass` keeps the step order (`plan`), the run's own state and the launches; the working copy of
the task instances and the actions gathered so far are a `zonda.passes.pass_state.PassState`, which
the steps with a subject of their own act on: `attempts` (steps 2-3: executor and triggerer reports,
retries, timeouts), `readiness` (steps 5-6: trigger rules, branches, depends_on_past, LatestOnly) and
`mapped_instances` (mapped task instances). None of them imports this module. Graph questions live
in `graphs`, trigger rules in `zonda.passes.trigger_rules`, retry times in `zonda.passes.retries`;
`zonda.passes.compose` wraps `decide` with the rest of a pass (callbacks, invocations, Events).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from zonda.passes import container_mapping, pools, run_slots
from zonda.passes.attempts import TRY_END, Attempts, duration_text, in_execution
from zonda.passes.decisions import Observation, RunPlan, TaskLaunch
from zonda.passes.graphs import leaves
from zonda.passes.limits import DEFAULT_LIMITS, PassLimits
from zonda.passes.mapped_instances import MappedInstances
from zonda.passes.pass_state import PassState
from zonda.passes.readiness import Readiness
from zonda.resources import pool_models
from zonda.resources.dagrun_models import DagRunStatus, TaskInstanceStatus
from zonda.resources.models import FINISHED_TI_STATES, DagRunState, TaskInstanceState
from zonda.resources.names import attempt_name
from zonda.resources.run_events import RunEvent
from zonda.resources.run_types import RunType
from zonda.resources.states import UNFINISHED_TI_STATES
from zonda.specs import mapping
from zonda.specs.dags import ResolvedDag, effective_priority_weights

S = TaskInstanceState

_FAILED_LEAF_STATES = frozenset({S.FAILED, S.UPSTREAM_FAILED})


def detail_of(reason: str | None) -> str:
    return f" ({reason})" if reason else ""


_SUCCESS_LEAF_STATES = frozenset({S.SUCCESS, S.SKIPPED})


class RunPass:
    """One scheduler pass over one run; `plan()` returns the outcome. Use once."""

    def __init__(self, state: PassState) -> None:
        self.state = state
        self.run_state = state.status.state or DagRunState.QUEUED
        self.run_updates: dict[str, Any] = {}
        self.mapped = state.mapped = MappedInstances(state)
        self.attempts = Attempts(state)
        self.readiness = state.readiness = Readiness(state)

    # ------------------------------------------------------------------------------------ the pass

    def plan(self) -> RunPlan:
        self.state.kills.extend(self.state.observed.stray_attempts)
        self.state.triggers_to_delete.extend(self.state.observed.stray_triggers)
        if self.run_state in (DagRunState.SUCCESS, DagRunState.FAILED):
            return self._result(wake_at=None)
        self._start_run()
        self._sync_task_instances()
        self._restart_cleared()
        self.attempts.apply_attempts()
        self.attempts.enforce_pending_timeouts()
        self.attempts.apply_triggers()
        self.attempts.enforce_execution_timeouts()
        if self._time_out_run():
            return self._result(wake_at=None)
        self.readiness.wake_waiting()
        self.readiness.evaluate_readiness()
        # A try ended at its launch (a mapped pod's arguments could not be picked, or an adopted try
        # had finished): its downstream decides now. Each round ends a task instance for good or
        # adopts an attempt (a finite set), so this stops.
        while self._launch_ready():
            self.readiness.evaluate_readiness()
        self._settle_run()
        return self._result(wake_at=self._next_wake())

    def _result(self, *, wake_at: datetime | None) -> RunPlan:
        status = self.state.status.model_copy(
            update={"state": self.run_state, "task_instances": self.state.tis, **self.run_updates}
        )
        # An attempt this pass launches or adopts, or a trigger it creates, is never a stray: alive under
        # the name of a try the status read does not hold yet, it is an earlier pass's whose status
        # write never happened. Every other stray is stopped, with an Event saying why.
        launched = {launch.attempt_name for launch in (*self.state.launches, *self.state.adoptions)}
        triggers = {request.name: request for request in self.state.triggers_to_create}
        for name in self.state.observed.stray_attempts:
            if name not in launched:
                self.state.events.append(self._stray_event(name))
        return RunPlan(
            status=status,
            launches=self.state.launches,
            adoptions=self.state.adoptions,
            kills=[name for name in dict.fromkeys(self.state.kills) if name not in launched],
            triggers_to_create=list(triggers.values()),
            triggers_to_delete=[
                name for name in dict.fromkeys(self.state.triggers_to_delete) if name not in triggers
            ],
            events=[event for event in self.state.events if event is not None],
            wake_at=wake_at,
            runs_to_wake=tuple(dict.fromkeys(self.state.runs_to_wake)),
        )

    def _stray_event(self, name: str) -> RunEvent:
        """Why a live attempt this pass does not want is stopped: its task instance moved on, or no
        status ever recorded it (orphaned by a pass that stopped between its launch and its write)."""
        attempt = self.state.observed.other_attempts.get(name)
        task_id, try_number = (attempt.task_id, attempt.try_number) if attempt else ("?", 0)
        what = f"Stopping attempt {name} (task {task_id}, try {try_number})"
        before = self.state.status.task_instances
        recorded = next((key for key, ti in before.items() if ti.pod_name == name), None)
        if recorded is not None:
            ti = self.state.tis[recorded]
            return RunEvent(
                "StrayAttemptStopped",
                f"{what}: task instance {recorded} is {ti.state.value}{detail_of(ti.reason)}, "
                "and no longer runs this attempt",
                warning=True,
            )
        key = self._key_of(name, task_id, try_number)
        ti_or_none = self.state.tis.get(key) if key is not None else None
        now = (
            f"task instance {key} is {ti_or_none.state.value}{detail_of(ti_or_none.reason)}"
            if key is not None and ti_or_none is not None
            else f"the run has no task instance {task_id}"
        )
        return RunEvent(
            "OrphanedAttemptStopped",
            f"{what}: the run's status never recorded it (a pass created it and stopped before writing "
            f"the status), and this pass does not launch that try: {now}",
            warning=True,
        )

    def _key_of(self, name: str, task_id: str, try_number: int) -> str | None:
        """The task instance key an attempt name was made for (`_launch`'s names), if any."""
        for key, ti in self.state.tis.items():
            if mapping.split_key(key)[0] != task_id:
                continue
            made = {
                attempt_name(self.state.run_name, key, try_number),
                attempt_name(self.state.run_name, f"{key}~{ti.pod_name or ''}", try_number),
            }
            if name in made:
                return key
        return task_id if task_id in self.state.tis else None

    # ---------------------------------------------------------------------------------- the run

    def _start_run(self) -> None:
        if self.run_state is DagRunState.RUNNING:
            return
        self.run_state = DagRunState.RUNNING
        self.run_updates["start_date"] = self.state.status.start_date or self.state.now
        if self.state.status.queued_at is None:
            self.run_updates["queued_at"] = self.state.now
        self.state.events.append(RunEvent("RunStarted", f"Run {self.state.run_name} started"))

    @property
    def run_start(self) -> datetime | None:
        start: datetime | None = self.run_updates.get("start_date", self.state.status.start_date)
        return start

    def _finish_run(self, state: DagRunState, reason: str, message: str, *, warning: bool) -> None:
        self.run_state = state
        self.run_updates["end_date"] = self.state.now
        self.run_updates["message"] = message
        self.state.events.append(RunEvent(reason, message, warning=warning))

    def _time_out_run(self) -> bool:
        """Airflow's dagrun_timeout: unfinished task instances are skipped, the run fails."""
        timeout, start = self.state.dag.dagrun_timeout, self.run_start
        if timeout is None or start is None or self.state.now < start + timeout:
            return False
        if all(ti.state in FINISHED_TI_STATES for ti in self.state.tis.values()):
            return False  # everything finished in time: the leaves decide, not the clock
        reason = (
            f"The run exceeded its dagrun_timeout of {duration_text(timeout)} "
            f"(started at {start.isoformat()})"
        )
        for task_id, ti in list(self.state.tis.items()):
            if ti.state in UNFINISHED_TI_STATES:
                self.state.stop_attempt_of(ti)
                self.state.set(task_id, S.SKIPPED, reason, end_date=self.state.now)
        self._finish_run(
            DagRunState.FAILED, "RunTimedOut", f"Run {self.state.run_name} timed out: {reason}", warning=True
        )
        return True

    def _settle_run(self) -> None:
        """Airflow's `DagRun.update_state`: once nothing is unfinished, the leaves decide."""
        if any(ti.state not in FINISHED_TI_STATES for ti in self.state.tis.values()):
            return
        leaf_states = {
            key: self.state.tis[key].state
            for task_id in leaves(self.state.dag)
            for key in self.mapped.keys(task_id)
            if self.state.tis[key].state is not S.REMOVED
        }
        failed = sorted(task_id for task_id, state in leaf_states.items() if state in _FAILED_LEAF_STATES)
        if failed:
            self._finish_run(
                DagRunState.FAILED,
                "RunFailed",
                f"Run {self.state.run_name} failed: leaf task(s) {', '.join(failed)} did not succeed",
                warning=True,
            )
        elif all(state in _SUCCESS_LEAF_STATES for state in leaf_states.values()):
            self._finish_run(
                DagRunState.SUCCESS, "RunSucceeded", f"Run {self.state.run_name} succeeded", warning=False
            )

    def _next_wake(self) -> datetime | None:
        """The earliest time something in this run changes without anyone reporting it."""
        times: list[datetime] = []
        if self.run_state is not DagRunState.RUNNING:
            return None
        if self.state.dag.dagrun_timeout is not None and self.run_start is not None:
            times.append(self.run_start + self.state.dag.dagrun_timeout)
        for task_id, ti in self.state.tis.items():
            if ti.state in (S.UP_FOR_RETRY, S.UP_FOR_RESCHEDULE) and ti.next_try_at is not None:
                times.append(ti.next_try_at)
            elif ti.state is S.DEFERRED and ti.trigger_timeout_at is not None:
                times.append(ti.trigger_timeout_at)
            elif in_execution(ti) and (deadline := self.attempts.execution_deadline(task_id)) is not None:
                times.append(deadline)
            if (pending_deadline := self.attempts.pending_deadline(task_id)) is not None:
                times.append(pending_deadline)
        future = [moment for moment in times if moment > self.state.now]
        return min(future, default=None)

    # ------------------------------------------------------------------------- task instances

    def _sync_task_instances(self) -> None:
        """Airflow's `verify_integrity`: one task instance per task; those without a task are removed."""
        for task_id, task in self.state.dag.tasks.items():
            if not self.mapped.keys(task_id, removed=True):
                self.state.tis[task_id] = TaskInstanceStatus(max_tries=task.retries)
            elif task_id in self.state.tis and self.state.tis[task_id].state is S.REMOVED:
                self.state.set(task_id, S.NONE, "The task is in the DAG again", max_tries=task.retries)
        for task_id, ti in list(self.state.tis.items()):
            if not self.state.in_dag(task_id) and ti.state is not S.REMOVED:
                self.state.stop_attempt_of(ti)
                self.state.set(
                    task_id, S.REMOVED, "The task is no longer in the DAG", end_date=self.state.now
                )

    def _restart_cleared(self) -> None:
        """A task instance cleared while running (Airflow's `restarting`): stop it and run it again."""
        for task_id, ti in list(self.state.tis.items()):
            if ti.state is S.RESTARTING and self.state.in_dag(task_id):
                self.state.stop_attempt_of(ti)
                self.state.set(task_id, S.NONE, "Cleared while running: its attempt was stopped", **TRY_RESET)

    # --------------------------------------------------------------------------------- launches

    def _launch_ready(self) -> bool:
        """Queue the ready task instances `_admit` lets start, in priority order; say why others wait.
        Whether one ended instead: its mapped pod's arguments impossible to pick, or its try adopted
        had finished."""
        ready = [
            key for key, ti in self.state.tis.items() if ti.state is S.SCHEDULED and self.state.in_dag(key)
        ]
        if not ready:
            return False
        ended = False
        # An attempt that exists already (launched by a pass whose status write was lost) holds its
        # slot whatever admission says: it is adopted, not stopped and created again once admitted
        # (one try, two pods); the limits apply to the task instances without an attempt.
        for key in [key for key in ready if self.state.existing_attempt(key) is not None]:
            ready.remove(key)
            if self._launch(key):
                ended = True
        if not ready:
            return ended
        admission = self._admit(ready)
        for candidate in admission.admitted:
            if candidate.run != self.state.run_name:
                self.state.runs_to_wake.append(candidate.run)
            elif (problem := self._arguments_problem(candidate.task_id)) is not None:
                self.state.set(candidate.task_id, S.FAILED, problem, end_date=self.state.now)
                ended = True
            elif self._launch(candidate.task_id):
                ended = True
        for key in ready:
            reason = admission.reasons.get((self.state.run_name, key))
            if reason is None or reason == self.state.tis[key].reason:
                continue
            if reason.startswith(pools.MISSING_POOL):
                self.state.events.append(RunEvent("PoolNotFound", f"Task {key}: {reason}", warning=True))
            self.state.update(key, reason=reason)
        return ended

    def _arguments_problem(self, key: str) -> str | None:
        """Why a mapped KubernetesPodOperator instance cannot get its arguments (`container_mapping`)."""
        task_id, index = mapping.split_key(key)
        if index < 0 or not container_mapping.is_mapped_container_task(self.state.dag.tasks[task_id]):
            return None
        return container_mapping.arguments_problem(
            self.state.dag.tasks[task_id],
            index,
            self.state.status.model_copy(update={"task_instances": self.state.tis}),
            self.state.observed.stored_xcoms,
            self.state.observed.unreadable_xcoms,
        )

    def _admit(self, ready: list[str]) -> pools.Admission:
        """The admission step: pools, max_active_tasks, max_active_tis_per_dag/dagrun, by priority weight.

        This run's ready task instances compete with every other run's waiting ones
        (`Observation.concurrency`), so a heavier task instance elsewhere takes a slot first.
        """
        weights = effective_priority_weights(self.state.dag)
        mine = [
            run_slots.candidate(
                self.state.dag,
                self.state.run_name,
                key,
                self.state.logical_date,
                weights,
                self.state.tis[key].max_tries if key in self.state.tis else None,
            )
            for key in ready
        ]
        own = run_slots.holders(
            self.state.dag, self.state.run_name, {key: ti.state for key, ti in self.state.tis.items()}
        )
        concurrency = self.state.observed.concurrency
        if concurrency is None:  # no pool accounting: this DAG's other runs count for max_active_tasks only
            elsewhere = pools.SlotHolder(
                run="", dag=self.state.dag.name, task_id="", pool="", slots=0, state=S.RUNNING
            )
            unlimited = {candidate.pool: pools.PoolLimit(pool_models.UNLIMITED) for candidate in mine}
            return pools.admit(mine, [*own, *[elsewhere] * self.state.observed.running_in_dag], unlimited)
        return pools.admit(
            [*mine, *concurrency.waiting],
            [*own, *concurrency.holders],
            concurrency.pools,
            concurrency.elsewhere,
        )

    def _launch(self, task_id: str) -> bool:
        """Queue the task instance's next try under its deterministic name, to create; or adopt the
        attempt of that name if the executor reports one already (an earlier pass created it and
        stopped before its status write), applying its report now. Whether that try had ended."""
        ti = self.state.tis[task_id]
        try_number, name = self.state.next_attempt(task_id)
        if ti.next_method is not None:  # a resumed deferral keeps the try's start and its XComs
            fields: dict[str, Any] = {}
        elif ti.first_try_start is not None:  # a new poke starts anew (Airflow's `clear_xcom_data`)
            fields = {"start_date": None, **_NO_XCOMS}
        else:
            fields = {"start_date": None, "running_seconds": 0.0, "follow_task_ids": None, **_NO_XCOMS}
        # The scheduled -> queued steps of one pass make one event, not two.
        if (index := self.state.scheduled_event_at.pop(task_id, None)) is not None:
            self.state.events[index] = None
        max_tries = ti.max_tries if ti.max_tries is not None else self.state.task(task_id).retries
        adopted = self.state.existing_attempt(task_id)
        queued_at, reason = self.state.now, f"Queued try {try_number} of {max_tries + 1} as {name}"
        if adopted is not None:  # queued when it was created, at the latest: its times stay in order
            queued_at = min(self.state.now, adopted.pending_since or adopted.started_at or self.state.now)
            reason = f"Adopted try {try_number} of {max_tries + 1}: attempt {name} exists already"
        self.state.set(
            task_id,
            S.QUEUED,
            reason,
            try_number=try_number,
            pod_name=name,
            queued_at=queued_at,
            end_date=None,
            duration_seconds=None,
            exit_code=None,
            message=None,
            next_try_at=None,
            **fields,
        )
        real_id, map_index = mapping.split_key(task_id)
        launch = TaskLaunch(task_id=real_id, try_number=try_number, attempt_name=name, map_index=map_index)
        if adopted is None:
            self.state.launches.append(launch)
            return False
        self.state.adoptions.append(launch)
        self.state.events.append(
            RunEvent(
                "AttemptAdopted",
                f"Task {task_id}: attempt {name} (try {try_number}) was {adopted.phase.value} though the "
                "run's status did not record it (a pass created it and stopped before writing the "
                "status); adopted as this try, not created again",
            )
        )
        return self.attempts.apply_attempt(task_id, adopted)


#: A task instance without XComs: before a try that does not resume a deferral, and once cleared.
_NO_XCOMS: dict[str, Any] = {"xcom": None, "xcoms": None, "xcom_lengths": None}
#: What a clear resets, on top of a try's end (also `zonda.actions.clear_and_mark.clear`'s).
TRY_RESET: dict[str, Any] = {**TRY_END, "end_date": None, **_NO_XCOMS}


def decide(
    dag: ResolvedDag,
    *,
    run_name: str,
    run_type: RunType,
    status: DagRunStatus,
    observed: Observation,
    now: datetime,
    limits: PassLimits = DEFAULT_LIMITS,
) -> RunPlan:
    """One scheduler pass over one DagRun: Airflow's scheduler loop for a run, as a pure function.

    `status` is the run's current status and `observed` what the executors and the triggerer
    report; the run's logical date seeds the retry jitter and its data interval end is
    LatestOnlyOperator's window. Returns the new status and the actions to carry out. Calling it
    again with the returned status and the same observation changes nothing and launches nothing;
    only idempotent actions repeat (kills, trigger deletions, and creating the trigger of a deferred
    task instance the triggerer does not report yet, which is a harmless 409 if it exists).
    An attempt is matched to its task instance by name (`TaskInstanceStatus.pod_name`), so a report
    of an older attempt never moves the current one. `limits` (`zonda.passes.limits.PassLimits`):
    the pending timeout and how far a mapped task may expand. See `zonda.passes.run_pass` for the
    steps; `zonda.passes.compose.compose_pass` wraps this with everything else a pass does.
    """
    state = PassState(
        dag, run_name=run_name, run_type=run_type, status=status, observed=observed, now=now, limits=limits
    )
    return RunPass(state).plan()
