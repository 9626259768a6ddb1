"""The types of the scheduling decision for one DagRun: gather -> **decide** -> act.

`zonda.passes.run_pass.decide(dag, run_name=..., status=..., observed=..., now=...)` is pure: given the
resolved DAG, the run's current status and what the executors and triggerer report, it returns a
`RunPlan` — the new status and the actions the controller carries out (launch tries, kill attempts,
create/delete triggers, emit events) and when to wake next. It never touches Kubernetes nor reads the clock.

INTERFACE FILE: the types below are the contract with the controller.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from zonda.passes.pools import Concurrency
from zonda.resources.dagrun_models import DagRunStatus, Deferral
from zonda.resources.invocations import TaskResult
from zonda.resources.models import TaskInstanceState
from zonda.resources.run_events import RunEvent


class AttemptPhase(enum.StrEnum):
    PENDING = "pending"  # created, not running yet (pod Pending, process starting)
    RUNNING = "running"
    SUCCEEDED = "succeeded"  # exited 0
    FAILED = "failed"  # exited non-zero, or the executor gave up on it (evicted, node lost...)
    MISSING = "missing"  # the executor knows nothing of an attempt the status says was started


@dataclass(frozen=True)
class ObservedAttempt:
    """What the executor reports of one task-instance try (one Pod or one local process)."""

    task_id: str
    try_number: int
    name: str
    phase: AttemptPhase
    result: TaskResult | None = None  # parsed from the termination message / result file
    exit_code: int | None = None
    message: str | None = None  # e.g. "OOMKilled", "Evicted: node lost", result parse errors
    started_at: datetime | None = None
    finished_at: datetime | None = None
    pending_since: datetime | None = None  # PENDING: when the pod was created (the pending timeout's start)
    #: The pod's metadata.uid as observed (None: a local process, or a pod refused): a kill carries it as
    #: its delete's precondition, so a pod of that name created again since is not the one killed.
    uid: str | None = None


@dataclass(frozen=True)
class ObservedTrigger:
    """What the triggerer reported for a deferred try (from the Trigger resource's status)."""

    task_id: str
    try_number: int
    deferral_count: int
    name: str
    fired: bool = False
    failed: bool = False
    event: Any = None
    message: str | None = None
    uid: str | None = None  # the Trigger's metadata.uid as observed: its delete's precondition


class Unanswered(enum.Enum):
    """A LatestOnly window the timetable has not given: `ASK` it (inline, when the pass is composed),
    or `UNKNOWN`: the controller asked its custom timetable, which did not answer in time or raised, so
    a LatestOnlyOperator that needs the window waits (the run's `Timetable` condition says why)."""

    ASK = "ask"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Observation:
    attempts: dict[str, ObservedAttempt] = field(default_factory=dict)  # by task id, current tries only
    stray_attempts: tuple[str, ...] = ()  # attempt names of tries the status no longer expects
    #: Every reported task try that is not a current one, by attempt name (strays, finished earlier
    #: tries, and tries an earlier pass created but never recorded): the launch step adopts the one
    #: named as the try it is about to launch, instead of creating it again.
    other_attempts: dict[str, ObservedAttempt] = field(default_factory=dict)
    triggers: dict[str, ObservedTrigger] = field(default_factory=dict)  # by task id
    stray_triggers: tuple[str, ...] = ()  # trigger names whose task instance is no longer deferred
    previous_run_states: dict[str, TaskInstanceState] | None = None  # for dependsOnPast; None: first run
    #: LatestOnlyOperator's window `(left, right]` (`zonda.passes.plans.latest_window`); None: the last
    #: run; `Unanswered.UNKNOWN`: the timetable did not answer, a LatestOnlyOperator waits.
    latest_window: tuple[datetime, datetime] | Unanswered | None = None
    #: Airflow 2's `DagRun.external_trigger`: a manual run a user or another DAG made (every manual run
    #: in the cluster); False for the run of `dag.test()` / `zonda dags test`, which LatestOnly judges.
    externally_triggered: bool = True
    running_in_dag: int = 0  # task instances running in other runs of the DAG (maxActiveTasks)
    #: Pools and what every other run holds and waits for (`zonda.passes.pools.admit`); None: no pool limits,
    #: only maxActiveTasks counted with `running_in_dag` (which `concurrency`, when given, replaces).
    concurrency: Concurrency | None = None
    #: Values in the XCom backend that mapped KubernetesPodOperators map over, read by the controller
    #: (by URL, `zonda.passes.container_mapping.stored_urls`), and why any other could not be read.
    stored_xcoms: dict[str, Any] = field(default_factory=dict)
    unreadable_xcoms: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class TaskLaunch:
    task_id: str
    try_number: int
    attempt_name: str
    map_index: int = -1  # a mapped task's instance; its status key is `zonda.specs.mapping.ti_key`


@dataclass(frozen=True)
class TriggerRequest:
    name: str
    task_id: str
    try_number: int
    deferral_count: int
    deferral: Deferral
    timeout_at: datetime | None


@dataclass(frozen=True)
class RunPlan:
    status: DagRunStatus
    launches: list[TaskLaunch] = field(default_factory=list)
    #: Tries recorded as queued (or further) whose attempt already exists under their deterministic
    #: name (an earlier pass created it and stopped before writing the status): never created again.
    adoptions: list[TaskLaunch] = field(default_factory=list)
    kills: list[str] = field(default_factory=list)  # attempt names to stop and delete
    triggers_to_create: list[TriggerRequest] = field(default_factory=list)
    triggers_to_delete: list[str] = field(default_factory=list)
    events: list[RunEvent] = field(default_factory=list)
    wake_at: datetime | None = None
    #: Other runs whose waiting task instances this pass found admitted ahead of its own (by weight).
    runs_to_wake: tuple[str, ...] = ()


__all__ = [
    "AttemptPhase",
    "Observation",
    "ObservedAttempt",
    "ObservedTrigger",
    "RunPlan",
    "TaskLaunch",
    "TriggerRequest",
]
