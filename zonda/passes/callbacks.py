"""Which callbacks the controller must launch after a pass, and which SLAs were missed: pure, `now` passed in.

Airflow runs a task's callbacks in the task's own process (`TaskInstance._run_finished_callback`),
and so does Zonda's runner. What that process cannot report — a zombie, an execution or pending
timeout that kills it, a pod OOMKilled or deleted, a trigger that fails or times out while no
process runs — Airflow's scheduler sends to the DAG processor as a `TaskCallbackRequest`, which calls
`handle_failure` there. Zonda launches a *callback try* instead: the same executor (a pod or a local
process) runs `python -m controller.runner` with a `CallbackRequest`, so user code runs where it
always does. DAG callbacks (`DagRun.handle_dag_callback`: `on_success_callback`, `on_failure_callback`
with `context["reason"]`) and `sla_miss_callback` (the DAG processor's `manage_slas`) are callback
tries too.

Exactly once: every callback try has a deterministic name (`zonda.resources.names.callback_name`), is launched
before the status write that records it (`DagRunStatus.callbacks`), and is never launched when a
record with its name exists. A crash between the launch and the write makes the next pass decide
the same thing again, and the launch of a name that exists is a no-op. SLA misses are recorded in
`DagRunStatus.slaMisses` the same way, each task once per run.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from zonda.passes.decisions import AttemptPhase, Observation, ObservedAttempt
from zonda.resources.dagrun_models import CallbackRecord, DagRunStatus, SlaMissRecord, TaskInstanceStatus
from zonda.resources.invocations import CallbackRequest, MissedSla, TaskOutcome
from zonda.resources.models import DagRunState, TaskInstanceState
from zonda.resources.names import callback_name
from zonda.resources.run_events import RunEvent
from zonda.resources.run_types import RunType
from zonda.resources.states import FINISHED_RUN_STATES
from zonda.specs import mapping
from zonda.specs.dags import ResolvedDag, ResolvedTask
from zonda.specs.operator_registry import CONTAINER_OPERATORS

S = TaskInstanceState

#: The kinds of callback try, as `CallbackRecord.kind` and `CallbackRequest.kind` say them.
ON_FAILURE = "on_failure_callback"
ON_RETRY = "on_retry_callback"
DAG_SUCCESS = "dag_success"
DAG_FAILURE = "dag_failure"
SLA_MISS = "sla_miss"

_FAILED_STATES = frozenset({S.FAILED, S.UP_FOR_RETRY})
_REPORTED_FAILURES = frozenset({TaskOutcome.FAILED, TaskOutcome.FAILED_NO_RETRY})
#: Task instances that met their SLA if they got there by the deadline (Airflow's manage_slas).
_SLA_DONE_STATES = frozenset({S.SUCCESS, S.SKIPPED})


@dataclass(frozen=True)
class CallbackLaunch:
    """One callback try to launch: run `request` with the context of `task_id`'s try `try_number`
    (`map_index`: of that mapped instance)."""

    name: str
    task_id: str
    try_number: int
    request: CallbackRequest
    map_index: int = -1


@dataclass(frozen=True)
class CallbackPlan:
    status: DagRunStatus  # the pass's status with the new records
    launches: list[CallbackLaunch] = field(default_factory=list)
    events: list[RunEvent] = field(default_factory=list)
    new_sla_misses: list[SlaMissRecord] = field(default_factory=list)
    wake_at: datetime | None = None  # the next SLA deadline not reached yet


def plan_callbacks(
    dag: ResolvedDag,
    *,
    run_name: str,
    run_type: RunType,
    before: DagRunStatus,
    after: DagRunStatus,
    observed: Observation,
    callback_attempts: Mapping[str, ObservedAttempt],
    now: datetime,
) -> CallbackPlan:
    """The callback tries due after a pass that took the run from `before` to `after` (decide's status).

    `observed` is what decide saw (to tell a failure the task's process reported, whose callback
    that process ran, from one it could not report); `callback_attempts` are the callback tries the
    executor reports, by name, whose end is written to their records. Replaying a pass with the
    returned status launches nothing again.
    """
    planner = _Planner(dag, run_name, before, after, now)
    planner.observe_callback_tries(callback_attempts)
    planner.task_failures(observed)
    planner.dag_callbacks()
    wake_at = planner.sla_misses(run_type)
    status = after.model_copy(update={"callbacks": planner.records, "sla_misses": planner.misses})
    return CallbackPlan(status, planner.launches, planner.events, planner.new_misses, wake_at)


def sla_deadline(data_interval_end: datetime | None, sla: timedelta | None) -> datetime | None:
    """When a task with `sla` should be done: its run's data interval end plus the sla (the seed's rule)."""
    if data_interval_end is None or sla is None:
        return None
    return data_interval_end + sla


class _Planner:
    def __init__(
        self, dag: ResolvedDag, run_name: str, before: DagRunStatus, after: DagRunStatus, now: datetime
    ) -> None:
        self.dag, self.run_name, self.before, self.after, self.now = dag, run_name, before, after, now
        self.records: list[CallbackRecord] = list(after.callbacks)
        self.misses: list[SlaMissRecord] = list(after.sla_misses)
        self.launches: list[CallbackLaunch] = []
        self.events: list[RunEvent] = []
        self.new_misses: list[SlaMissRecord] = []

    def observe_callback_tries(self, attempts: Mapping[str, ObservedAttempt]) -> None:
        """A callback try's end is written to its record (a failed callback is logged, not retried)."""
        for index, record in enumerate(self.records):
            attempt = attempts.get(record.name)
            if record.state != "launched" or attempt is None:
                continue
            if attempt.phase is AttemptPhase.SUCCEEDED:
                self.records[index] = record.model_copy(update={"state": "succeeded"})
            elif attempt.phase is AttemptPhase.FAILED:
                self.records[index] = record.model_copy(update={"state": "failed"})
                self.events.append(
                    RunEvent(
                        "CallbackFailed",
                        f"Callback try {record.name} ({record.kind}) failed: "
                        f"{attempt.message or 'see its log'}",
                        warning=True,
                    )
                )

    def _launch(
        self, kind: str, key: str, ti_key: str, try_number: int, request: CallbackRequest, *, why: str
    ) -> None:
        """Launch (and record) callback try `key` of `kind`, with the context of task instance `ti_key`."""
        name = callback_name(self.run_name, kind, key)
        if any(record.name == name for record in self.records):
            return  # launched before: a replayed pass
        self.records.append(
            CallbackRecord(
                name=name,
                kind=kind,
                task_id=ti_key,
                try_number=try_number,
                reason=request.reason,
                launched_at=self.now,
            )
        )
        task_id, map_index = mapping.split_key(ti_key)
        self.launches.append(CallbackLaunch(name, task_id, try_number, request, map_index))
        self.events.append(RunEvent("CallbackLaunched", f"Launched {kind} as {name}: {why}"))

    def task_failures(self, observed: Observation) -> None:
        """Failures the task's process did not report itself: its failure (or retry) callback here."""
        for key, ti in self.after.task_instances.items():
            old = self.before.task_instances.get(key)
            task = self.dag.tasks.get(mapping.split_key(key)[0])
            if task is None or old is None or ti.state not in _FAILED_STATES or old.state in _FAILED_STATES:
                continue
            attempt = observed.attempts.get(key)
            if (
                attempt is not None
                and attempt.name == old.pod_name
                and attempt.result is not None
                and attempt.result.outcome in _REPORTED_FAILURES
                and not attempt.result.terminated
            ):
                continue  # the runner reported the failure and ran the callback itself
            kind = ON_RETRY if ti.state is S.UP_FOR_RETRY else ON_FAILURE
            callables = task.callbacks.get(kind)
            if not callables:
                continue
            request = CallbackRequest(kind=kind, callables=list(callables), message=ti.reason)
            self._launch(
                kind,
                f"{key}/{ti.try_number}",
                key,
                ti.try_number,
                request,
                why=f"task {key} try {ti.try_number} ended without reporting ({ti.reason})",
            )

    def dag_callbacks(self) -> None:
        """Airflow's `handle_dag_callback`: once per finished run, with the last task instance's context."""
        state = self.after.state
        if state not in FINISHED_RUN_STATES or self.before.state in FINISHED_RUN_STATES:
            return
        spec = self.dag.spec
        callables = spec.on_success_callback if state is DagRunState.SUCCESS else spec.on_failure_callback
        last = _last_task_instance(self.after)
        if not callables or last is None:
            return
        kind = DAG_SUCCESS if state is DagRunState.SUCCESS else DAG_FAILURE
        request = CallbackRequest(
            kind=kind,
            callables=list(callables),
            reason=dag_callback_reason(self.after),
            message=self.after.message,
        )
        try_number = self.after.task_instances[last].try_number
        self._launch(kind, "run", last, try_number, request, why=f"the run ended {state.value}")

    def sla_misses(self, run_type: RunType) -> datetime | None:
        """Airflow's `manage_slas` for this run: each task not done by its deadline missed, once."""
        if run_type is not RunType.SCHEDULED:
            return None  # Airflow checks SLAs of scheduled runs only
        recorded = {miss.task_id for miss in self.misses}
        missed: list[SlaMissRecord] = []
        upcoming: list[datetime] = []
        for task_id, task in self.dag.tasks.items():
            deadline = sla_deadline(self.after.data_interval_end, task.sla)
            instances = [ti for ti in self._instances(task_id).values() if ti.state is not S.REMOVED]
            if deadline is None or task_id in recorded or not instances:
                continue
            if all(
                ti.state in _SLA_DONE_STATES and ti.end_date and ti.end_date <= deadline for ti in instances
            ):
                continue  # every instance (a mapped task's: each one) done in time
            if self.now >= deadline:
                missed.append(SlaMissRecord(task_id=task_id, deadline=deadline, detected_at=self.now))
            else:  # running, waiting, or failed already: a miss unless cleared and done in time
                upcoming.append(deadline)
        if missed:
            self.misses.extend(missed)
            self.new_misses.extend(missed)
            listing = ", ".join(f"{m.task_id} (due {m.deadline.isoformat()})" for m in missed)
            self.events.append(RunEvent("SlaMissed", f"Task(s) missed their SLA: {listing}", warning=True))
            self._sla_callback(missed)
        return min(upcoming, default=None)

    def _instances(self, task_id: str) -> dict[str, TaskInstanceStatus]:
        """A task's instances by status key: itself, or a mapped task's `task[i]`."""
        return {
            key: ti for key, ti in self.after.task_instances.items() if mapping.split_key(key)[0] == task_id
        }

    def _sla_callback(self, missed: list[SlaMissRecord]) -> None:
        callables = self.dag.spec.sla_miss_callback
        if not callables:
            return
        first = next(iter(self._instances(missed[0].task_id)))
        request = CallbackRequest(
            kind=SLA_MISS,
            callables=list(callables),
            sla_misses=[
                MissedSla(task_id=miss.task_id, deadline=miss.deadline, detected_at=miss.detected_at)
                for miss in missed
            ],
            task_states={task_id: ti.state.value for task_id, ti in self.after.task_instances.items()},
        )
        key = ",".join(sorted(miss.task_id for miss in missed))
        self._launch(
            SLA_MISS,
            key,
            first,
            self.after.task_instances[first].try_number,
            request,
            why=f"SLA missed by {key}",
        )


def callback_task(task: ResolvedTask) -> ResolvedTask:
    """The task as its callback try runs: the task runner, in Zonda's image for a container task (whose
    own image may have neither Python nor Zonda)."""
    if task.operator is not None and task.operator not in CONTAINER_OPERATORS:
        return task
    return dataclasses.replace(task, operator="EmptyOperator", args={}, container={})


def dag_callback_reason(status: DagRunStatus) -> str:
    """Airflow's `reason` in a DAG callback's context: success, timed_out or task_failure."""
    if status.state is DagRunState.SUCCESS:
        return "success"
    if status.message and "dagrun_timeout" in status.message:
        return "timed_out"
    return "task_failure"


def _last_task_instance(status: DagRunStatus) -> str | None:
    """Airflow's `DagRun.get_last_ti`: a DAG callback gets the context of the last task instance to end."""
    candidates = [
        (ti.end_date.timestamp() if ti.end_date else 0.0, task_id)
        for task_id, ti in status.task_instances.items()
        if ti.state is not S.REMOVED
    ]
    return max(candidates)[1] if candidates else None


__all__ = [
    "DAG_FAILURE",
    "DAG_SUCCESS",
    "ON_FAILURE",
    "ON_RETRY",
    "SLA_MISS",
    "CallbackLaunch",
    "CallbackPlan",
    "callback_task",
    "dag_callback_reason",
    "plan_callbacks",
    "sla_deadline",
]
