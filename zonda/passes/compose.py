"""One pass over a DagRun, composed: what the pass gathered in (`Gathered`), everything it must do out
(`PassPlan`). Pure, `now` passed in.

The run reconciler (`controller.reconcilers.runs`), `DAG.test()` / `zonda dags test`
(`controller.devtools.dag_runs`) and the callback launches (`controller.reconcilers.callbacks`) all
call `compose_pass`, so a new step of a pass is added here, once. The steps, in order:

1. sort the executor's report into task tries and callback tries, and both with the triggerer's
   into the current attempt of each task instance and the strays (`plans.observe_run`);
2. decide the pass (`run_pass.decide`, with `Gathered.limits`);
3. plan the callback tries and SLA misses it leaves due (`callbacks.plan_callbacks`);
4. take back a refused write's condition on a status written again (`status_budget.written`);
5. build each launch's invocation (`zonda.tries.invocation_builder.task_invocation`; a mapped
   KubernetesPodOperator's instance with its own arguments, `container_mapping`) and each callback
   try's;
6. order the Events to post (`events.events_to_post`) and pick the finished pods to delete
   (`history.worker_pods_to_delete`).

Two of a pass's inputs cost a read, so they are asked for: `stored_xcoms_to_read` says which values
in the XCom backend a pass needs (read them, then pass them in `Gathered.stored_xcoms`), and a pass
that launches nothing needs no pool occupancy (`Gathered.concurrency`): call `compose_pass` without
it first, and only if `PassPlan.launches` or `PassPlan.adoptions`, again with it (the controller
does that inside its admission lock, `controller.reconcilers.pools.PoolAdmission`).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from zonda.passes import callbacks, container_mapping, events, history, plans, status_budget
from zonda.passes.decisions import Observation, ObservedAttempt, ObservedTrigger, TaskLaunch, TriggerRequest
from zonda.passes.limits import DEFAULT_LIMITS, PassLimits
from zonda.passes.pools import Concurrency
from zonda.passes.produced_assets import ProducedAssetEvent, produced_asset_events
from zonda.passes.run_pass import decide
from zonda.resources.dagrun_models import DagRunSpec, DagRunStatus, SlaMissRecord
from zonda.resources.invocations import TaskInvocation
from zonda.resources.models import DagSpec, TaskInstanceState
from zonda.resources.names import is_callback_name
from zonda.resources.run_events import RunEvent
from zonda.specs import mapping
from zonda.specs.dags import ResolvedDag, ResolvedTask
from zonda.tries import invocation_builder


@dataclass(frozen=True)
class Gathered:
    """What one pass over a run gathered: the run, what the executor and triggerer report, facts of
    the DAG's other runs, the values read for it, and the limits and time it runs under."""

    dag: ResolvedDag
    dag_spec: DagSpec
    spec: DagRunSpec
    #: The run's status as read (its DAG snapshot taken: `plans.start_run`).
    status: DagRunStatus
    run_name: str
    now: datetime
    #: Airflow 2's `DagRun.external_trigger` (what LatestOnlyOperator asks of a manual run): True for
    #: every manual run in the cluster (`zonda dags trigger`, the UI, TriggerDagRunOperator), False for
    #: the run of `DAG.test()`, whose LatestOnly then judges its interval as Airflow 2's `dag.test()`.
    externally_triggered: bool = True
    #: The run's namespace and uid, as a try's invocation carries them (None in `DAG.test()`).
    namespace: str | None = None
    run_uid: str | None = None
    #: Everything the executor reports for the run, by attempt name: task tries and callback tries.
    attempts: Mapping[str, ObservedAttempt] = field(default_factory=dict)
    triggers: Iterable[ObservedTrigger] = ()
    #: The task states of the run before this one (dependsOnPast; None: the first run).
    previous_run_states: dict[str, TaskInstanceState] | None = None
    #: The data interval of the latest successful run before this one (`prev_*_success` templates).
    previous_success: tuple[datetime, datetime] | None = None
    #: Task instances running in the DAG's other runs (maxActiveTasks without pool accounting).
    running_in_dag: int = 0
    #: Pool occupancy and every other run's waiting task instances; None: no pool limits.
    concurrency: Concurrency | None = None
    #: Values in the XCom backend that `stored_xcoms_to_read` asked for, by URL, and why others failed.
    stored_xcoms: Mapping[str, Any] = field(default_factory=dict)
    unreadable_xcoms: Mapping[str, str] = field(default_factory=dict)
    limits: PassLimits = DEFAULT_LIMITS
    #: LatestOnlyOperator's window as the controller asked the timetable for it, with its time limit
    #: (`plans.ask_latest_window`); not given: asked inline, and only for a DAG with a LatestOnlyOperator.
    latest_window: plans.LatestWindow | plans.Unanswered = plans.Unanswered.ASK


@dataclass(frozen=True)
class Launch:
    """One try to launch: the task as its pod is built (a mapped KubernetesPodOperator instance's
    own arguments), and what the runner gets.

    Both are built when first asked for, once: a pass composed only to learn whether it would launch
    (outside the admission lock) builds none, and each costs a walk over the run's task instances.
    """

    launch: TaskLaunch
    #: When the upstreams this first try waited for were done (the scheduling delay's start); None
    #: for a retry, a resumption or a poke, which wait on purpose.
    upstream_done_at: datetime | None
    gathered: Gathered = field(repr=False, compare=False)
    #: The status the pass writes, which the try's context and upstream XComs come from.
    status: DagRunStatus = field(repr=False, compare=False)
    #: That status's XComs, built once for all the pass's tries (`invocation_builder.RunXComs`).
    run_xcoms: Callable[[], invocation_builder.RunXComs] = field(repr=False, compare=False)

    @functools.cached_property
    def task(self) -> ResolvedTask:
        task = self.gathered.dag.tasks[self.launch.task_id]
        if self.launch.map_index >= 0 and container_mapping.is_mapped_container_task(task):
            # A mapped KubernetesPodOperator: its pod carries the instance's own arguments.
            args = container_mapping.mapped_container_args(
                task,
                self.launch.map_index,
                self.status,
                self.gathered.stored_xcoms,
                self.gathered.unreadable_xcoms,
            )
            task = dataclasses.replace(task, args=args)
        return task

    @functools.cached_property
    def invocation(self) -> TaskInvocation:
        return _invocation(
            self.gathered,
            self.status,
            self.task,
            self.launch.try_number,
            self.launch.map_index,
            self.gathered.previous_success,
            self.run_xcoms(),
        )


@dataclass(frozen=True)
class CallbackTry:
    """One callback try to launch under its deterministic name (`callbacks.CallbackLaunch`)."""

    callback: callbacks.CallbackLaunch
    task: ResolvedTask
    invocation: TaskInvocation


@dataclass(frozen=True)
class PassPlan:
    """Everything one pass must do, in the order the controller acts: create `triggers_to_create`,
    launch `launches` and `callback_tries`, record `asset_events`, write `status`, then kill `kills`, delete
    `triggers_to_delete` and the finished pods of `pods_to_delete`, post `events`."""

    #: The status to write: the pass's decisions, callback and SLA records, conditions within budget.
    status: DagRunStatus
    launches: list[Launch] = field(default_factory=list)
    #: Tries the status now records whose attempt exists already (`decisions.RunPlan.adoptions`):
    #: nothing to create, but admitted as launches are.
    adoptions: list[TaskLaunch] = field(default_factory=list)
    callback_tries: list[CallbackTry] = field(default_factory=list)
    kills: list[str] = field(default_factory=list)
    triggers_to_create: list[TriggerRequest] = field(default_factory=list)
    triggers_to_delete: list[str] = field(default_factory=list)
    #: The Events to post, in the order a user should read them (`events.events_to_post`).
    events: list[RunEvent] = field(default_factory=list)
    #: Every Event of the pass as it happened, one per change (what `DAG.test()` prints).
    happened: list[RunEvent] = field(default_factory=list)
    #: Attempt names of the finished pods the DAG does not keep (`deleteWorkerPods`), after the write.
    pods_to_delete: list[str] = field(default_factory=list)
    new_sla_misses: list[SlaMissRecord] = field(default_factory=list)
    #: The asset events of the tries this pass saw succeed: recorded before the status says so.
    asset_events: list[ProducedAssetEvent] = field(default_factory=list)
    #: Other runs whose waiting task instances this pass found admitted ahead of its own.
    runs_to_wake: tuple[str, ...] = ()
    #: When to look again though nothing is reported (None: when something changes).
    wake_at: datetime | None = None
    #: The uid each attempt and Trigger of the run was observed with, by name: the precondition of the
    #: delete that kills or removes it (`fenced`), never stored in the status.
    uids: dict[str, str] = field(default_factory=dict)

    def fenced(self, names: Iterable[str]) -> list[tuple[str, str]]:
        """Each of `names` this pass observed, with the uid it was observed at: deleted at that uid, an
        object of the name created again since (by a newer leader) is refused, not deleted. One not
        observed is left: nothing of it was seen (gone, or never delivered to this replica's watch);
        if it is there, the watch delivers it and a later pass removes it as a stray."""
        return [(name, self.uids[name]) for name in names if name in self.uids]


def observed_uids(gathered: Gathered) -> dict[str, str]:
    """The uid of each attempt and Trigger the pass observed, by name (`PassPlan.uids`)."""
    observed: list[ObservedAttempt | ObservedTrigger] = [*gathered.attempts.values(), *gathered.triggers]
    return {seen.name: seen.uid for seen in observed if seen.uid is not None}


def split_attempts(
    attempts: Mapping[str, ObservedAttempt],
) -> tuple[dict[str, ObservedAttempt], dict[str, ObservedAttempt]]:
    """The executor's report as (task tries, callback tries): a callback try is never a stray to kill."""
    tries = {name: attempt for name, attempt in attempts.items() if not is_callback_name(name)}
    callback_tries = {name: attempt for name, attempt in attempts.items() if is_callback_name(name)}
    return tries, callback_tries


def observation(gathered: Gathered) -> Observation:
    """What the pass observes (`plans.observe_run`): current attempts and triggers, strays, and the rest."""
    tries, _ = split_attempts(gathered.attempts)
    window = gathered.latest_window if plans.needs_latest_window(gathered.dag) else None
    return plans.observe_run(
        gathered.dag_spec,
        gathered.status,
        tries,
        gathered.triggers,
        now=gathered.now,
        window=window,
        previous_run_states=gathered.previous_run_states,
        running_in_dag=gathered.running_in_dag,
        externally_triggered=gathered.externally_triggered,
        concurrency=gathered.concurrency,
        stored_xcoms=dict(gathered.stored_xcoms),
        unreadable_xcoms=dict(gathered.unreadable_xcoms),
    )


def stored_xcoms_to_read(gathered: Gathered) -> dict[str, int | None]:
    """The values in the XCom backend (URL: size) the pass needs: a mapped KubernetesPodOperator's items."""
    if not any(container_mapping.is_mapped_container_task(task) for task in gathered.dag.tasks.values()):
        return {}
    return container_mapping.stored_urls(gathered.dag, gathered.status, observation(gathered))


def compose_pass(gathered: Gathered) -> PassPlan:
    """One pass over a run: everything it must do, from what it gathered. Replaying it with the
    returned status and the same reports launches nothing again (see `run_pass.decide`)."""
    observed = observation(gathered)
    _, callback_attempts = split_attempts(gathered.attempts)
    plan = decide(
        gathered.dag,
        run_name=gathered.run_name,
        run_type=gathered.spec.run_type,
        status=gathered.status,
        observed=observed,
        now=gathered.now,
        limits=gathered.limits,
    )
    due = callbacks.plan_callbacks(
        gathered.dag,
        run_name=gathered.run_name,
        run_type=gathered.spec.run_type,
        before=gathered.status,
        after=plan.status,
        observed=observed,
        callback_attempts=callback_attempts,
        now=gathered.now,
    )
    status = due.status
    if (kept := status_budget.written(status.conditions, now=gathered.now)) is not status.conditions:
        status = status.model_copy(update={"conditions": kept})
    run_xcoms = functools.cache(functools.partial(invocation_builder.RunXComs.of, status))
    return PassPlan(
        status=status,
        launches=[_launch(gathered, status, launch, run_xcoms) for launch in plan.launches],
        adoptions=plan.adoptions,
        callback_tries=[_callback_try(gathered, status, callback, run_xcoms) for callback in due.launches],
        kills=plan.kills,
        triggers_to_create=plan.triggers_to_create,
        triggers_to_delete=plan.triggers_to_delete,
        events=[*events.events_to_post(plan.events), *due.events],
        happened=[*plan.events, *due.events],
        pods_to_delete=history.worker_pods_to_delete(gathered.dag_spec, status.state, gathered.attempts),
        new_sla_misses=due.new_sla_misses,
        asset_events=produced_asset_events(
            gathered.dag,
            gathered.run_name,
            gathered.status,
            status,
            gathered.now,
            gathered.spec.partition_key,
        ),
        runs_to_wake=plan.runs_to_wake,
        wake_at=min(filter(None, (plan.wake_at, due.wake_at)), default=None),
        uids=observed_uids(gathered),
    )


def _invocation(
    gathered: Gathered,
    status: DagRunStatus,
    task: ResolvedTask,
    try_number: int,
    map_index: int,
    previous_success: tuple[datetime, datetime] | None,
    run_xcoms: invocation_builder.RunXComs | None = None,
) -> TaskInvocation:
    return invocation_builder.task_invocation(
        run_name=gathered.run_name,
        spec=gathered.spec,
        status=status,
        dag_spec=gathered.dag_spec,
        task=task,
        try_number=try_number,
        previous_success=previous_success,
        namespace=gathered.namespace,
        map_index=map_index,
        run_uid=gathered.run_uid,
        run_xcoms=run_xcoms,
    )


def _launch(
    gathered: Gathered,
    status: DagRunStatus,
    launch: TaskLaunch,
    run_xcoms: Callable[[], invocation_builder.RunXComs],
) -> Launch:
    ti = status.task_instances[mapping.ti_key(launch.task_id, launch.map_index)]
    upstream_done = [
        end
        for up in gathered.dag.tasks[launch.task_id].upstream
        if up in status.task_instances and (end := status.task_instances[up].end_date) is not None
    ]
    first_start = launch.try_number == 1 and ti.next_method is None and ti.first_try_start is None
    waited_since = max(upstream_done) if upstream_done and first_start else None
    return Launch(
        launch=launch, upstream_done_at=waited_since, gathered=gathered, status=status, run_xcoms=run_xcoms
    )


def _callback_try(
    gathered: Gathered,
    status: DagRunStatus,
    callback: callbacks.CallbackLaunch,
    run_xcoms: Callable[[], invocation_builder.RunXComs],
) -> CallbackTry:
    """A callback try runs in the runner with its task's context (`callbacks.callback_task`), without
    the `prev_*_success` of a task's own try."""
    task = callbacks.callback_task(gathered.dag.tasks[callback.task_id])
    invocation = _invocation(
        gathered, status, task, callback.try_number, callback.map_index, None, run_xcoms()
    )
    return CallbackTry(
        callback=callback, task=task, invocation=invocation.replace(callback=callback.request, callbacks={})
    )


__all__ = [
    "CallbackTry",
    "Gathered",
    "Launch",
    "PassPlan",
    "compose_pass",
    "observation",
    "split_attempts",
    "stored_xcoms_to_read",
]
