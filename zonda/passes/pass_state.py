"""The working state of one scheduler pass, which the pass's steps share.

`zonda.passes.run_pass.RunPass` walks the steps in order; the steps with a subject of their own
(`attempts`, `readiness`, `mapped_instances`) act on a `PassState`: the working copy of the run's
task instances, the actions gathered so far, and the one way to move a task instance (`set`, which
checks the move and records its Event). They reach each other through the two small protocols below,
so no step imports another step nor the pass that orders them.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any, Protocol

from zonda.passes.decisions import AttemptPhase, Observation, ObservedAttempt, TaskLaunch, TriggerRequest
from zonda.passes.limits import PassLimits
from zonda.resources.dagrun_models import DagRunStatus, TaskInstanceStatus
from zonda.resources.models import TaskInstanceState
from zonda.resources.names import attempt_name
from zonda.resources.run_events import RunEvent
from zonda.resources.run_types import RunType
from zonda.resources.states import check_transition
from zonda.specs import mapping
from zonda.specs.dags import ResolvedDag, ResolvedTask

S = TaskInstanceState

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


class Skipping(Protocol):
    """What the steps ask of readiness (`zonda.passes.readiness.Readiness`): skips and depends_on_past."""

    def skip_all_except(self, branch_key: str, follow: Iterable[str]) -> None: ...

    def skip_downstream(self, decider_key: str, to_skip: list[str], reason: str) -> None: ...

    def skip_if_not_followed(self, task: ResolvedTask, key: str, keys: list[str]) -> bool: ...

    def past_problem(self, task: ResolvedTask, key: str) -> str | None: ...


class Instances(Protocol):
    """What the steps ask of mapped instances (`zonda.passes.mapped_instances.MappedInstances`)."""

    def keys(self, task_id: str, *, removed: bool = False) -> list[str]: ...

    def awaits_expansion(self, task: ResolvedTask) -> bool: ...

    def upstream_states(self, task: ResolvedTask, key: str | None = None) -> dict[str, TaskInstanceState]: ...

    def expand_in_group(self, task: ResolvedTask) -> list[str] | None: ...

    def expand(self, task: ResolvedTask, reason: str) -> None: ...


class PassState:
    """One pass's inputs, its working copy of the task instances, and the actions it gathered."""

    #: Set by the pass once its steps exist (they need the state to be built).
    readiness: Skipping
    mapped: Instances

    def __init__(
        self,
        dag: ResolvedDag,
        *,
        run_name: str,
        run_type: RunType,
        status: DagRunStatus,
        observed: Observation,
        now: datetime,
        limits: PassLimits,
    ) -> None:
        self.dag = dag
        self.run_name = run_name
        self.run_type = run_type
        self.observed = observed
        self.now = now
        self.limits = limits
        self.status = status
        self.logical_date = status.logical_date
        self.data_interval_end = status.data_interval_end
        self.tis: dict[str, TaskInstanceStatus] = dict(status.task_instances)
        self.launches: list[TaskLaunch] = []
        self.adoptions: list[TaskLaunch] = []  # tries whose attempt exists already: recorded, not created
        self.kills: list[str] = []
        self.triggers_to_create: list[TriggerRequest] = []
        self.triggers_to_delete: list[str] = []
        #: None: an event taken back (a scheduled -> queued step of one pass makes one event, not two).
        self.events: list[RunEvent | None] = []
        self.scheduled_event_at: dict[str, int] = {}
        self.runs_to_wake: list[str] = []

    def task(self, key: str) -> ResolvedTask:
        """The task of a task instance key (a task id, or ``task_id[map_index]``)."""
        return self.dag.tasks[mapping.split_key(key)[0]]

    def in_dag(self, key: str) -> bool:
        return mapping.split_key(key)[0] in self.dag.tasks

    def set(self, key: str, state: TaskInstanceState, reason: str, **fields: Any) -> None:
        """Move a task instance to `state` (legal moves only), record why, and tell the user."""
        ti = self.tis[key]
        check_transition(ti.state, state, task_id=key)
        self.tis[key] = ti.model_copy(update={"state": state, "reason": reason, **fields})
        event_reason, warning = _EVENT_REASONS[state]
        if state is S.SCHEDULED:
            self.scheduled_event_at[key] = len(self.events)
        self.events.append(
            RunEvent(
                event_reason, f"Task {key} ({ti.state.value} -> {state.value}): {reason}", warning=warning
            )
        )

    def update(self, key: str, **fields: Any) -> None:
        """Change a task instance's fields without moving it (a reason to wait, a try's progress)."""
        self.tis[key] = self.tis[key].model_copy(update=fields)

    def next_attempt(self, key: str) -> tuple[int, str]:
        """The try number and deterministic attempt name the task instance's next launch gets."""
        ti = self.tis[key]
        if ti.next_method is not None or ti.first_try_start is not None:
            # resuming a deferral or a rescheduled poke: Airflow keeps the try number, but the attempt
            # needs a name of its own: derived from the previous attempt's, it is deterministic and
            # differs from every earlier one
            return ti.try_number, attempt_name(self.run_name, f"{key}~{ti.pod_name or ''}", ti.try_number)
        return ti.try_number + 1, attempt_name(self.run_name, key, ti.try_number + 1)

    def existing_attempt(self, key: str) -> ObservedAttempt | None:
        """The attempt of the task instance's next launch that exists already, unrecorded (an earlier
        pass created it and stopped before its status write), if the executor reports one."""
        found = self.observed.other_attempts.get(self.next_attempt(key)[1])
        return found if found is not None and found.phase is not AttemptPhase.MISSING else None

    def stop_attempt_of(self, ti: TaskInstanceStatus) -> None:
        """Kill a task instance's live attempt, or delete its trigger if it is deferred."""
        if ti.state in (S.QUEUED, S.RUNNING, S.RESTARTING) and ti.pod_name:
            self.kills.append(ti.pod_name)
        if ti.state is S.DEFERRED and ti.trigger_name:
            self.triggers_to_delete.append(ti.trigger_name)


__all__ = ["Instances", "PassState", "Skipping"]
