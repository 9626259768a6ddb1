"""A DAG and a run driven pass by pass through `decide()`, as the controller would drive it: pure.

`make_dag` resolves a small DAG spec, `Run` holds a run's status and feeds each pass what an executor
would report (`succeeded`, `failed`, `deferred` ...), `started` makes the first pass. Nothing here
talks to an API or reads the clock: `now` is `Run.now`, moved by the test.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from zonda.passes.decisions import AttemptPhase, Observation, ObservedAttempt, ObservedTrigger, RunPlan
from zonda.passes.limits import DEFAULT_LIMITS, PassLimits
from zonda.passes.run_pass import decide
from zonda.resources.dagrun_models import DagRunStatus, TaskInstanceStatus
from zonda.resources.invocations import DeferralRequest, TaskOutcome, TaskResult
from zonda.resources.models import (
    DagRunState,
    DagSpec,
    TaskInstanceState,
    TaskSpec,
    TriggerRule,
)
from zonda.resources.run_types import RunType
from zonda.specs.dags import ResolvedDag, ResolvedTask

S = TaskInstanceState
TR = TriggerRule
START = datetime(2024, 1, 1, 12, 0, tzinfo=UTC)
LOGICAL_DATE = datetime(2024, 1, 1, tzinfo=UTC)
RUN_NAME = "etl-20240101"


def make_dag(
    tasks: dict[str, dict[str, Any]],
    *,
    name: str = "etl",
    max_active_tasks: int = 16,
    dagrun_timeout: timedelta | None = None,
) -> ResolvedDag:
    """A ResolvedDag from `{task_id: {"upstream": [...], **ResolvedTask fields}}`, topologically ordered."""
    upstream = {task_id: frozenset(spec.get("upstream", ())) for task_id, spec in tasks.items()}
    downstream = {task_id: frozenset(t for t, ups in upstream.items() if task_id in ups) for task_id in tasks}
    ordered: list[str] = []
    while len(ordered) < len(tasks):
        ordered += [t for t in tasks if t not in ordered and upstream[t] <= set(ordered)]
    resolved = {
        task_id: ResolvedTask(
            task_id=task_id,
            args={},
            upstream=upstream[task_id],
            downstream=downstream[task_id],
            operator=tasks[task_id].get("operator", "BashOperator"),
            **{k: v for k, v in tasks[task_id].items() if k not in ("upstream", "operator")},
        )
        for task_id in ordered
    }
    spec = DagSpec(tasks=[TaskSpec(id=task_id) for task_id in ordered], max_active_tasks=max_active_tasks)
    return ResolvedDag(name=name, spec=spec, tasks=resolved, dagrun_timeout=dagrun_timeout)


@dataclass
class Run:
    """A DagRun driven pass by pass, the way the controller drives `decide`."""

    dag: ResolvedDag
    run_type: RunType = RunType.SCHEDULED
    now: datetime = START
    status: DagRunStatus = field(
        default_factory=lambda: DagRunStatus(
            state=DagRunState.QUEUED,
            logical_date=LOGICAL_DATE,
            data_interval_start=LOGICAL_DATE,
            data_interval_end=LOGICAL_DATE + timedelta(days=1),
        )
    )
    plans: list[RunPlan] = field(default_factory=list)
    last_observation: Observation = field(default_factory=Observation)
    pending_timeout: timedelta | None = None  # the controller's --pod-pending-timeout (here: never)
    status_budget_bytes: int | None = None  # the controller's --status-budget-bytes
    inline_task_instances: int | None = None  # the controller's --inline-task-instances

    def wait(self, delta: timedelta) -> None:
        """Let time pass; reports built afterwards carry the new time."""
        self.now += delta

    def step(
        self, *reports: ObservedAttempt | ObservedTrigger, after: timedelta = timedelta(0), **observation: Any
    ) -> RunPlan:
        """One pass; `after` lets time pass first (reports given here were built before it)."""
        self.now += after
        observed = Observation(
            attempts={r.task_id: r for r in reports if isinstance(r, ObservedAttempt)},
            triggers={r.task_id: r for r in reports if isinstance(r, ObservedTrigger)},
            **observation,
        )
        self.last_observation = observed
        plan = decide(
            self.dag,
            run_name=RUN_NAME,
            run_type=self.run_type,
            status=self.status,
            observed=observed,
            now=self.now,
            limits=PassLimits(
                pending_timeout=self.pending_timeout,
                status_budget_bytes=self.status_budget_bytes or DEFAULT_LIMITS.status_budget_bytes,
                inline_task_instances=DEFAULT_LIMITS.inline_task_instances
                if self.inline_task_instances is None
                else self.inline_task_instances,
            ),
        )
        self.status = plan.status
        self.plans.append(plan)
        return plan

    def ti(self, task_id: str) -> TaskInstanceStatus:
        return self.status.task_instances[task_id]

    def states(self) -> dict[str, str]:
        return {task_id: ti.state.value for task_id, ti in self.status.task_instances.items()}

    def attempt(
        self,
        task_id: str,
        phase: AttemptPhase,
        result: TaskResult | None = None,
        exit_code: int | None = None,
        message: str | None = None,
        started_at: datetime | None = None,
    ) -> ObservedAttempt:
        ti = self.ti(task_id)
        assert ti.pod_name is not None, f"{task_id} was never launched"
        finished = phase in (AttemptPhase.SUCCEEDED, AttemptPhase.FAILED)
        return ObservedAttempt(
            task_id=task_id,
            try_number=ti.try_number,
            name=ti.pod_name,
            phase=phase,
            result=result,
            exit_code=exit_code,
            message=message,
            started_at=started_at or ti.queued_at,
            finished_at=self.now if finished else None,
        )

    def succeeded(self, task_id: str, **result: Any) -> ObservedAttempt:
        outcome = result.pop("outcome", TaskOutcome.SUCCESS)
        return self.attempt(
            task_id, AttemptPhase.SUCCEEDED, TaskResult(outcome=outcome, **result), exit_code=0
        )

    def failed(self, task_id: str, exit_code: int = 1, message: str | None = None) -> ObservedAttempt:
        return self.attempt(task_id, AttemptPhase.FAILED, exit_code=exit_code, message=message)

    def running(self, task_id: str) -> ObservedAttempt:
        return self.attempt(task_id, AttemptPhase.RUNNING)

    def deferred(self, task_id: str, **deferral: Any) -> ObservedAttempt:
        deferral_ = DeferralRequest(trigger_classpath="zonda.triggers.DateTimeTrigger", **deferral)
        return self.succeeded(task_id, outcome=TaskOutcome.DEFERRED, deferral=deferral_)

    def trigger(
        self,
        task_id: str,
        *,
        fired: bool = False,
        failed: bool = False,
        event: Any = None,
        message: str | None = None,
    ) -> ObservedTrigger:
        ti = self.ti(task_id)
        assert ti.trigger_name is not None
        return ObservedTrigger(
            task_id=task_id,
            try_number=ti.try_number,
            deferral_count=ti.deferral_count,
            name=ti.trigger_name,
            fired=fired,
            failed=failed,
            event=event,
            message=message,
        )

    def finish_all(self) -> None:
        """Report every queued or running task instance successful, pass after pass, until none is left."""
        for _ in range(len(self.dag.tasks) + 1):
            active = [t for t, ti in self.status.task_instances.items() if ti.state in (S.QUEUED, S.RUNNING)]
            if not active:
                return
            self.step(*(self.succeeded(task_id) for task_id in active))
        raise AssertionError(f"the run did not settle: {self.states()}")


def launched(plan: RunPlan) -> list[str]:
    return [launch.task_id for launch in plan.launches]


def event_reasons(plan: RunPlan) -> list[str]:
    return [event.reason for event in plan.events]


def started(dag: ResolvedDag, **run: Any) -> Run:
    driven = Run(dag, **run)
    driven.step()
    return driven
