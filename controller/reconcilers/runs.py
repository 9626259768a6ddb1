"""`RunReconciler`: gather a DagRun, its attempts and triggers; `zonda.passes.run_pass.decide`; act on the
plan.

Acting is: create triggers, launch attempts, write the status (one optimistic write,
resourceVersion-checked), then kill attempts, delete triggers and post Events. Launches come before
the write so a crash in between leaves a pod the next pass adopts by its deterministic name, never a
status that claims a launch that did not happen. A write the apiserver refuses as too large keeps the
status last written and says so (`zonda.passes.status_budget.refused_write`), instead of failing every pass.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pydantic import ValidationError

from controller.executors.base import Executor
from controller.kube import DAGRUNS, DAGS, TRIGGERS, AlreadyExists, KubeApi, KubeError
from controller.reconcilers import callbacks as reconciler_callbacks
from controller.reconcilers import metrics
from controller.reconcilers.assets import record_task_events
from controller.reconcilers.common import StatusWriter, parse_status, utcnow
from controller.reconcilers.index import RunIndex, RunSummary, previous_states, previous_success
from controller.reconcilers.pools import PoolAdmission, runs_to_wake
from controller.reconcilers.stored_xcoms import StoredXComReader
from controller.reconcilers.trigger_resources import trigger_body, trigger_report
from zonda.passes import callbacks, container_mapping, decisions, events, history, plans, status_budget
from zonda.resources.dagrun_models import DagRunSpec, DagRunStatus, dag_label_problem
from zonda.resources.models import Condition, DagSpec
from zonda.resources.states import FINISHED_RUN_STATES
from zonda.resources.wire import LABEL_DAGRUN_UID, parse_time
from zonda.specs import mapping
from zonda.specs.dags import DagInvalid, ResolvedDag, resolve_dag
from zonda.tries import invocation_builder

logger = logging.getLogger(__name__)

DAG_NOT_FOUND_RETRY = timedelta(seconds=5)
#: When a run whose status the apiserver refused as too large is looked at again (its pods' changes
#: also wake it); every pass until it fits is refused the same way.
STATUS_REFUSED_RETRY = timedelta(minutes=5)


class StatusRefused(Exception):
    """The apiserver refused the pass's status as too large; reported on the run already."""


@dataclass
class RunReconciler:
    kube: KubeApi
    executor: Executor
    writer: StatusWriter
    index: RunIndex
    trigger_shards: int = 16
    #: Airflow's `worker_pods_pending_timeout`: a try whose pod stays Pending this long fails (None: never).
    pending_timeout: timedelta | None = None
    #: Airflow's `[core] max_map_length`: a mapped task with more instances fails (None: 1,024).
    max_map_length: int | None = None
    #: The most bytes a run's status may be expected to reach: a wider expansion fails (None: 1 MiB).
    status_budget_bytes: int | None = None
    #: Called with (namespace, DAG name, run name, new state) when a run's state changes: the DAG may
    #: schedule more (maxActiveRuns), and its other runs may proceed (dependsOnPast, maxActiveTasks).
    on_run_state_change: Callable[[str, str, str, str | None], None] | None = None
    #: Called with (kind, namespace, name) to reconcile another object: "run" or "pool".
    enqueue: Callable[[str, str, str], None] | None = None
    #: Pool admission's critical section: one per controller process.
    admission: PoolAdmission = dataclasses.field(init=False)
    #: Values in the XCom backend that mapped KubernetesPodOperators map over.
    stored_xcoms: StoredXComReader = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        self.admission = PoolAdmission(self.kube, self.index)
        self.stored_xcoms = StoredXComReader(self.kube)

    async def reconcile(self, namespace: str, name: str) -> datetime | None:
        """One pass; returns when to look again (None: when something changes)."""
        run = await self.kube.get_custom(DAGRUNS, namespace, name)
        if run is None or run["metadata"].get("deletionTimestamp"):
            return None
        now = utcnow()
        try:
            spec = DagRunSpec.model_validate(run["spec"])
        except ValidationError as exc:
            await self.kube.emit_event(run, reason="InvalidSpec", message=str(exc), warning=True)
            return None
        old_wire = dict(run.get("status") or {})
        status = before = parse_status(DagRunStatus, old_wire)
        if status.dag_spec is None:
            start = await self._start(run, spec, status, now)
            if not start.started:  # failed for good (invalid conf), or the DAG is missing or invalid
                if start.status.state not in FINISHED_RUN_STATES:
                    return now + DAG_NOT_FOUND_RETRY
                if start.status.state != status.state and self.on_run_state_change is not None:
                    self.on_run_state_change(namespace, spec.dag_name, name, start.status.state)
                return None
            status = start.status
        dag_spec = DagSpec.model_validate(status.dag_spec)
        try:
            dag = resolve_dag(spec.dag_name, dag_spec)
        except DagInvalid as exc:  # cannot happen for a snapshot that resolved at start, unless code changed
            await self.kube.emit_event(run, reason="InvalidDag", message=str(exc), warning=True)
            return None
        attempts, callback_tries = reconciler_callbacks.split_attempts(await self.executor.observe(run))
        observation = await self._observe(run, spec, status, dag_spec, attempts, now)
        if urls := container_mapping.stored_urls(dag, status, observation):  # a mapped pod's items
            stored, unreadable = await self.stored_xcoms.read(urls)
            observation = dataclasses.replace(observation, stored_xcoms=stored, unreadable_xcoms=unreadable)
        decide = functools.partial(
            plans.decide_run,
            dag,
            status,
            run_name=name,
            run_type=spec.run_type,
            now=now,
            pending_timeout=self.pending_timeout,
            max_map_length=self.max_map_length,
            status_budget_bytes=self.status_budget_bytes,
        )
        act = functools.partial(
            self._launch_and_write, run, spec, dag, dag_spec, before, callback_tries, old_wire, now
        )
        plan = decide(observed=observation)  # no pool limits: only to learn whether it would launch
        before_pass = None
        if plan.launches:
            async with self.admission.lock:  # the critical section: see controller.reconcilers.pools
                concurrency = await self.admission.concurrency(namespace, name)
                observation = dataclasses.replace(observation, concurrency=concurrency)
                plan = decide(observed=observation)
                if plan.launches:  # what it admits counts as held before the lock is released
                    before_pass = self.index.reserve({**run, "status": plan.status.to_wire()})
        try:
            due = await act(plan, observation, before_pass)
        except StatusRefused:  # nothing of this pass is recorded: no kills, deletions nor its Events
            return now + STATUS_REFUSED_RETRY
        if due is None:
            return now  # someone else wrote first (a user's clear/mark): decide again on the fresh object
        for attempt_name in plan.kills:
            await self.executor.kill(run, attempt_name)
            metrics.PODS_DELETED.inc()
        for trigger_name in plan.triggers_to_delete:
            await self.kube.delete_custom(TRIGGERS, namespace, trigger_name)
        await self._delete_worker_pods(run, dag_spec, due.status, {**attempts, **callback_tries})
        old_state = old_wire.get("state")
        new_state = due.status.state.value if due.status.state is not None else None
        if old_state != new_state and self.on_run_state_change is not None:
            self.on_run_state_change(namespace, spec.dag_name, name, new_state)
        self.writer.post_events(run, [*events.events_to_post(plan.events), *due.events])
        log_state_changes(namespace, spec.dag_name, name, before, plan.status)
        metrics.record_run(run, plan.status)
        if due.new_sla_misses:
            metrics.SLA_MISSES.labels(namespace, spec.dag_name).inc(len(due.new_sla_misses))
        return min(filter(None, (plan.wake_at, due.wake_at)), default=None)

    async def _launch_and_write(
        self,
        run: Mapping[str, Any],
        spec: DagRunSpec,
        dag: ResolvedDag,
        dag_spec: DagSpec,
        before: DagRunStatus,
        callback_tries: Mapping[str, decisions.ObservedAttempt],
        old_wire: Mapping[str, Any],
        now: datetime,
        plan: decisions.RunPlan,
        observation: decisions.Observation,
        before_pass: RunSummary | None,
    ) -> callbacks.CallbackPlan | None:
        """Plan callbacks, create triggers, launch, write the status and record it in the index.

        Returns the callbacks' plan, or None when the write met a conflict. `before_pass` is what
        the index knew of the run before this pass reserved its admissions (None: nothing reserved).
        """
        namespace, name = run["metadata"]["namespace"], run["metadata"]["name"]
        due = callbacks.plan_callbacks(
            dag,
            run_name=name,
            run_type=spec.run_type,
            before=before,
            after=plan.status,
            observed=observation,
            callback_attempts=callback_tries,
            now=now,
        )
        for request in plan.triggers_to_create:
            await self._create_trigger(run, request)
        for launch in plan.launches:
            await self._launch(run, spec, plan.status, dag, dag_spec, launch, observation)
        await reconciler_callbacks.launch_callbacks(
            self.executor,
            run,
            spec=spec,
            status=due.status,
            dag=dag,
            dag_spec=dag_spec,
            launches=due.launches,
        )
        await record_task_events(
            self.kube, run, dag, before, due.status, now
        )  # before the write says success
        new_wire = due.status.to_wire()
        kept = [Condition.model_validate(c) for c in new_wire.get("conditions") or []]
        if (back := status_budget.written(kept, now=now)) is not kept:
            new_wire["conditions"] = [c.to_wire() for c in back]
        version = self.writer.written_version(DAGRUNS, namespace, name)
        try:
            if not await self.writer.write_status(DAGRUNS, run, old_wire, new_wire):
                return None
        except KubeError as error:
            message = error.api_message
            if not status_budget.is_too_large(error.status, message):
                raise
            await self._report_refused(run, old_wire, status_budget.wire_bytes(new_wire), message, now)
            raise StatusRefused(message) from error
        written = self.writer.written_version(DAGRUNS, namespace, name)
        previous = self.index.record({**run, "status": new_wire}, written if written != version else None)
        self._wake_after(namespace, name, before_pass or previous, plan.runs_to_wake)
        return due

    async def _report_refused(
        self, run: Mapping[str, Any], old_wire: Mapping[str, Any], size: int, message: str, now: datetime
    ) -> None:
        """A condition on the status last written, and one Event, when it turns False."""
        meta = run["metadata"]
        logger.warning(
            "run %s/%s: a status of %d bytes was refused: %s", meta["namespace"], meta["name"], size, message
        )
        old = [Condition.model_validate(c) for c in old_wire.get("conditions") or []]
        new, event = status_budget.refused_write(old, size, message, now=now)
        if event is None:
            return
        await self.writer.write_status(
            DAGRUNS, run, old_wire, {**old_wire, "conditions": [c.to_wire() for c in new]}
        )
        await self.kube.emit_event(run, reason="StatusTooLarge", message=event, warning=True)

    def _wake_after(
        self, namespace: str, name: str, previous: RunSummary | None, admitted_elsewhere: tuple[str, ...]
    ) -> None:
        """Runs admitted ahead of this one, or waiting for slots this pass freed, look again."""
        if self.enqueue is None:
            return
        runs, touched_pools = runs_to_wake(
            self.index, namespace, name, previous, self.index.runs.get((namespace, name))
        )
        for other in sorted(runs | set(admitted_elsewhere)):
            self.enqueue("run", namespace, other)
        for pool in sorted(touched_pools):
            self.enqueue("pool", namespace, pool)

    async def _start(
        self, run: Mapping[str, Any], spec: DagRunSpec, status: DagRunStatus, now: datetime
    ) -> plans.RunStart:
        """Snapshot the DAG into the run; if it cannot start yet, say why on the run."""
        meta = run["metadata"]
        dag = await self.kube.get_custom(DAGS, meta["namespace"], spec.dag_name)
        start = plans.start_run(
            spec,
            status,
            plans.DagRef(dag["spec"], dag["metadata"].get("generation")) if dag is not None else None,
            namespace=meta["namespace"],
            created_at=parse_time(meta["creationTimestamp"]) or now,
            generation=meta.get("generation"),
            now=now,
        )
        if not start.started:
            for event in start.events:
                await self.kube.emit_event(run, reason=event.reason, message=event.message, warning=True)
            await self.writer.write_status(
                DAGRUNS, run, dict(run.get("status") or {}), start.status.to_wire()
            )
        elif unlabelled := dag_label_problem(meta, spec.dag_name):  # made by hand: said once, at start
            await self.kube.emit_event(run, reason="MissingDagLabel", message=unlabelled, warning=True)
        return start

    async def _observe(
        self,
        run: Mapping[str, Any],
        spec: DagRunSpec,
        status: DagRunStatus,
        dag_spec: DagSpec,
        attempts: Mapping[str, decisions.ObservedAttempt],
        now: datetime,
    ) -> decisions.Observation:
        """Gather what the triggerer reports; `zonda.passes.plans.observe_run` sorts it with the attempts."""
        meta = run["metadata"]
        triggers = [
            trigger_report(trigger)
            for trigger in await self.kube.list_custom(
                TRIGGERS, meta["namespace"], f"{LABEL_DAGRUN_UID}={meta['uid']}"
            )
        ]
        siblings = self.index.siblings(meta["namespace"], spec.dag_name, meta["name"])
        return plans.observe_run(
            dag_spec,
            status,
            attempts,
            triggers,
            now=now,
            previous_run_states=previous_states(siblings, status.logical_date),
            running_in_dag=sum(s.running_tasks for s in siblings.values()),
        )

    async def _delete_worker_pods(
        self,
        run: Mapping[str, Any],
        dag_spec: DagSpec,
        status: DagRunStatus,
        attempts: Mapping[str, decisions.ObservedAttempt],
    ) -> None:
        """A finished run's pods the DAG does not keep (`deleteWorkerPods`): after the status write, so
        every result they held is recorded first."""
        deleted = [
            name
            for name in history.worker_pods_to_delete(dag_spec, status.state, attempts)
            if await self.executor.delete_finished(run, name)
        ]
        if deleted:
            message = f"deleted {len(deleted)} finished pod(s) and their logs (deleteWorkerPods): "
            await self.kube.emit_event(run, reason="WorkerPodsDeleted", message=message + ", ".join(deleted))

    async def _launch(
        self,
        run: Mapping[str, Any],
        spec: DagRunSpec,
        status: DagRunStatus,
        dag: ResolvedDag,
        dag_spec: DagSpec,
        launch: decisions.TaskLaunch,
        observed: decisions.Observation,
    ) -> None:
        task = dag.tasks[launch.task_id]
        ti = status.task_instances[mapping.ti_key(launch.task_id, launch.map_index)]
        if launch.map_index >= 0 and container_mapping.is_mapped_container_task(task):
            # A mapped KubernetesPodOperator: its pod carries the instance's own arguments.
            args = container_mapping.mapped_container_args(
                task, launch.map_index, status, observed.stored_xcoms, observed.unreadable_xcoms
            )
            task = dataclasses.replace(task, args=args)
        meta = run["metadata"]
        success = previous_success(
            self.index.siblings(meta["namespace"], spec.dag_name, meta["name"]), status.logical_date
        )
        invocation = invocation_builder.task_invocation(
            run_name=meta["name"],
            spec=spec,
            status=status,
            dag_spec=dag_spec,
            task=task,
            try_number=launch.try_number,
            previous_success=success,
            namespace=meta["namespace"],
            map_index=launch.map_index,
            run_uid=meta.get("uid"),
        )
        await self.executor.launch(run, task=task, invocation=invocation, attempt_name=launch.attempt_name)
        metrics.PODS_CREATED.inc()
        upstream_done = [
            end
            for u in task.upstream
            if u in status.task_instances and (end := status.task_instances[u].end_date) is not None
        ]
        first_start = launch.try_number == 1 and ti.next_method is None and ti.first_try_start is None
        if upstream_done and first_start:  # retries, resumptions and pokes wait on purpose: not a delay
            gap = (utcnow() - max(upstream_done)).total_seconds()  # after the launch: what a watch sees
            metrics.SCHEDULING_DELAY.labels("upstream_done_to_pod_created").observe(max(0.0, gap))

    async def _create_trigger(self, run: Mapping[str, Any], request: decisions.TriggerRequest) -> None:
        body = trigger_body(run["metadata"], request, self.trigger_shards)
        with contextlib.suppress(AlreadyExists):
            await self.kube.create_custom(TRIGGERS, run["metadata"]["namespace"], body)


def log_state_changes(namespace: str, dag: str, run: str, old: DagRunStatus, new: DagRunStatus) -> None:
    """One INFO line per run and task-instance state change, with its fields for JSON logs."""
    for change in events.state_changes(old, new):
        fields = {
            "namespace": namespace,
            "dag": dag,
            "run": run,
            "task": change.task,
            "try_number": change.try_number,
            "from_state": change.old,
            "state": change.new,
            "reason": change.reason,
        }
        if change.task is None:
            logger.info("run %s/%s: %s -> %s", namespace, run, change.old, change.new, extra=fields)
        else:
            logger.info(
                "run %s/%s task %s try %s: %s -> %s (%s)",
                namespace,
                run,
                change.task,
                change.try_number,
                change.old,
                change.new,
                change.reason or "",
                extra=fields,
            )
