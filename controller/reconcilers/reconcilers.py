"""Reconcilers: gather from the API, call the pure core, act once. No scheduling logic lives here.

- `reconcile_dag`: validate the DAG, create the DagRuns its timetable says are due (deterministic
  names: a restart or a second controller gets 409 instead of a duplicate), write its status, and
  return when the next run is due.
- `reconcile_run`: snapshot the DAG spec into a new run, observe its attempts (pods or processes)
  and triggers, `zonda.decisions.decide`, then launch / create triggers / write status (one
  optimistic write, resourceVersion-checked) / kill / delete triggers / post Events.

Invariant: the controller writes only `status` (and creates/deletes its own children).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pendulum
from pydantic import ValidationError

from controller.app import metrics
from controller.executors.executors import LABEL_DAGRUN_UID, Executor
from controller.executors.pods import LABEL_DAG, LABEL_DAGRUN, label_value
from controller.kube import DAGRUNS, DAGS, TRIGGERS, AlreadyExists, Conflict, Kube
from controller.triggerer.shards import shard_for
from zonda import conditions, decisions, scheduling
from zonda.dags import DagInvalid, ResolvedDag, parse_dag_spec, resolve_dag
from zonda.decisions import AttemptPhase, Observation, ObservedAttempt, ObservedTrigger
from zonda.invocations import TaskInvocation
from zonda.models import (
    API_VERSION,
    FINISHED_TI_STATES,
    DagRunSpec,
    DagRunState,
    DagRunStatus,
    DagSpec,
    DagStatus,
    RunType,
    TaskInstanceState,
    TriggerSpec,
)
from zonda.timetables import DataInterval, TimeRestriction, Timetable, load_timetable, timetable_for_schedule
from zonda.timetables.base import pinned_clock

logger = logging.getLogger(__name__)

#: On a DAG, "true" makes its scheduled runs owned by it, so deleting the DAG deletes them.
ANNOTATION_DELETE_RUNS = "zonda.dev/delete-runs-with-dag"
LABEL_SHARD = "zonda.dev/shard"
LABEL_RUN_TYPE = "zonda.dev/run-type"
FINISHED_RUN_STATES = (DagRunState.SUCCESS.value, DagRunState.FAILED.value)
DAG_NOT_FOUND_RETRY = timedelta(seconds=5)


def utcnow() -> datetime:
    """The controller's clock (the core never reads one)."""
    return pendulum.now("UTC")


def timetable_for(spec: DagSpec) -> Timetable:
    if spec.timetable is not None:
        return load_timetable(spec.timetable.class_, dict(spec.timetable.params))
    return timetable_for_schedule(spec.schedule, spec.timezone)


def _time(value: Any) -> datetime | None:
    if not value:
        return None
    if isinstance(value, datetime):
        return value
    parsed = pendulum.parse(str(value))
    assert isinstance(parsed, datetime), f"not a date-time: {value!r}"
    return parsed.astimezone(UTC)


@dataclass
class RunSummary:
    """What the controller remembers of each DagRun from its watch (for cross-run questions)."""

    dag_name: str
    logical_date: datetime | None
    state: str | None
    data_interval: tuple[datetime, datetime] | None
    running_tasks: int
    ti_states: dict[str, str]


@dataclass
class RunIndex:
    """An in-memory index of DagRuns by namespace, fed by kopf's watch events."""

    runs: dict[tuple[str, str], RunSummary] = field(default_factory=dict)

    def update(self, body: Mapping[str, Any]) -> RunSummary | None:
        meta = body["metadata"]
        key = (meta["namespace"], meta["name"])
        status = body.get("status") or {}
        spec = body.get("spec") or {}
        tis = status.get("taskInstances") or {}
        start, end = _time(status.get("dataIntervalStart")), _time(status.get("dataIntervalEnd"))
        summary = RunSummary(
            dag_name=spec.get("dagName", ""),
            logical_date=_time(status.get("logicalDate")),
            state=status.get("state"),
            data_interval=(start, end) if start and end else None,
            running_tasks=sum(1 for ti in tis.values() if ti.get("state") in ("queued", "running")),
            ti_states={tid: ti.get("state", "none") for tid, ti in tis.items()},
        )
        previous = self.runs.get(key)
        self.runs[key] = summary
        return previous

    def remove(self, namespace: str, name: str) -> None:
        self.runs.pop((namespace, name), None)

    def of_dag(self, namespace: str, dag_name: str) -> dict[str, RunSummary]:
        return {name: s for (ns, name), s in self.runs.items() if ns == namespace and s.dag_name == dag_name}


@dataclass
class Reconcilers:
    kube: Kube
    executor: Executor
    trigger_shards: int = 16
    index: RunIndex = field(default_factory=RunIndex)
    own_writes: dict[tuple[str, str, str], str] = field(default_factory=dict)
    #: Called with (namespace, DAG name, run name, new state) when a run's state changes: the DAG may
    #: schedule more (maxActiveRuns), and its other runs may proceed (dependsOnPast, maxActiveTasks).
    on_run_state_change: Callable[[str, str, str, str | None], None] | None = None
    _background: set[asyncio.Task[None]] = field(default_factory=set)

    # ------------------------------------------------------------------------------------ DAGs

    async def reconcile_dag(self, namespace: str, name: str) -> datetime | None:
        dag = await self.kube.get_custom(DAGS, namespace, name)
        if dag is None or dag["metadata"].get("deletionTimestamp"):
            return None
        now = utcnow()
        generation = dag["metadata"].get("generation")
        old_status = _parse_status(DagStatus, dag.get("status"))
        status = old_status
        try:
            spec = parse_dag_spec(dag["spec"])
            resolve_dag(name, spec)
            timetable = timetable_for(spec)
        except (DagInvalid, ValueError, ImportError) as exc:
            errors = exc.errors if isinstance(exc, DagInvalid) else [str(exc)]
            message = "; ".join(errors)
            conds = conditions.set_condition(
                status.conditions,
                type="Valid",
                status=False,
                reason="InvalidSpec",
                message=message,
                now=now,
                generation=generation,
            )
            conds = conditions.set_condition(
                conds,
                type="Ready",
                status=False,
                reason="InvalidSpec",
                message="the DAG is not scheduled until its spec is valid",
                now=now,
                generation=generation,
            )
            status = status.model_copy(update={"conditions": conds, "observed_generation": generation})
            if conditions.condition_changed(old_status.conditions, conds, "Valid"):
                await self.kube.emit_event(dag, reason="InvalidSpec", message=message, warning=True)
            await self._write_status(DAGS, dag, old_status.to_wire(), status.to_wire())
            return None

        runs = [
            r
            for r in await self.kube.list_custom(DAGRUNS, namespace)
            if (r.get("spec") or {}).get("dagName") == name
        ]
        active = [r for r in runs if (r.get("status") or {}).get("state") not in FINISHED_RUN_STATES]
        last_interval = _last_automated_interval(status, runs)
        start_date = spec.start_date or _time(dag["metadata"]["creationTimestamp"])
        wake_at: datetime | None = None
        created: list[str] = []
        # a timetable may cap active runs itself (@continuous: one at a time), as Airflow's does
        limit = timetable.active_runs_limit
        max_active_runs = min(spec.max_active_runs, limit) if limit else spec.max_active_runs
        next_due: scheduling.DueRun | None = None

        def decide_at(moment: datetime) -> scheduling.NextRunDecision:
            return scheduling.decide_next_run(
                timetable,
                last_automated_data_interval=last_interval,
                start_date=start_date,
                end_date=spec.end_date,
                catchup=spec.catchup,
                now=moment,
            )

        while True:
            decision = decide_at(now)
            next_due = decision.due
            if decision.due is None:
                wake_at = decision.wake_at
                break
            if spec.paused or len(active) >= max_active_runs:
                break  # woken again when a run finishes or the DAG is unpaused
            run_name = scheduling.dagrun_name(name, decision.due.logical_date, RunType.SCHEDULED.value)
            body = self._scheduled_run(dag, run_name, decision.due)
            try:
                created_run = await self.kube.create_custom(DAGRUNS, namespace, body)
                created.append(run_name)
                active.append(created_run)
                delay = (now - decision.due.run_after).total_seconds()
                metrics.SCHEDULING_DELAY.labels("run_after_to_run_created").observe(max(0.0, delay))
                await self.kube.emit_event(
                    dag,
                    reason="DagRunCreated",
                    message=f"created {run_name} for data interval {decision.due.data_interval.start} .. "
                    f"{decision.due.data_interval.end}",
                )
            except AlreadyExists:
                pass  # created before (restart, or another controller): exactly once by name
            last_interval = decision.due.data_interval

        # the run to show as next: the one due now (held back by maxActiveRuns/pause), else the one due
        # when the loop's last decision wakes (its interval is the last one created, so it still holds)
        upcoming = next_due or (decide_at(decision.wake_at).due if decision.wake_at else None)
        latest = max(runs, key=lambda r: r["metadata"]["creationTimestamp"], default=None)
        conds = conditions.set_condition(
            status.conditions,
            type="Valid",
            status=True,
            reason="Valid",
            message="",
            now=now,
            generation=generation,
        )
        if spec.paused:
            ready = ("Paused", False, "paused: no scheduled runs are created (manual runs are accepted)")
        elif not timetable.can_be_scheduled:
            ready = ("ManualOnly", True, "no schedule: runs are created manually")
        elif len(active) >= max_active_runs and next_due is not None:
            ready = ("MaxActiveRuns", True, f"{len(active)} active runs reached maxActiveRuns")
        else:
            ready = ("Scheduled", True, "")
        conds = conditions.set_condition(
            conds,
            type="Ready",
            status=ready[1],
            reason=ready[0],
            message=ready[2],
            now=now,
            generation=generation,
        )
        update: dict[str, Any] = {
            "conditions": conds,
            "observed_generation": generation,
            "timetable_summary": timetable.summary,
            "active_runs": len(active),
            "next_logical_date": upcoming.logical_date if upcoming else None,
            "next_run_after": upcoming.run_after if upcoming else None,
            "next_data_interval_start": upcoming.data_interval.start if upcoming else None,
            "next_data_interval_end": upcoming.data_interval.end if upcoming else None,
            "last_automated_data_interval_start": last_interval.start if last_interval else None,
            "last_automated_data_interval_end": last_interval.end if last_interval else None,
        }
        if latest is not None:
            update["last_run"] = latest["metadata"]["name"]
            latest_state = (latest.get("status") or {}).get("state")
            update["last_run_state"] = DagRunState(latest_state) if latest_state else None
        status = status.model_copy(update=update)
        await self._write_status(DAGS, dag, old_status.to_wire(), _validated(DagStatus, status))
        if created and len(active) < max_active_runs and not spec.paused:
            return now  # more backlog may be due: go again at once
        return wake_at

    def _scheduled_run(self, dag: Mapping[str, Any], run_name: str, due: scheduling.DueRun) -> dict[str, Any]:
        meta = dag["metadata"]
        body: dict[str, Any] = {
            "apiVersion": API_VERSION,
            "kind": "DagRun",
            "metadata": {
                "name": run_name,
                "namespace": meta["namespace"],
                "labels": {LABEL_DAG: label_value(meta["name"]), LABEL_RUN_TYPE: RunType.SCHEDULED.value},
            },
            "spec": DagRunSpec(
                dag_name=meta["name"],
                run_type=RunType.SCHEDULED,
                logical_date=due.logical_date,
                data_interval={"start": due.data_interval.start, "end": due.data_interval.end},
            ).to_wire(),
        }
        if (meta.get("annotations") or {}).get(ANNOTATION_DELETE_RUNS) == "true":
            body["metadata"]["ownerReferences"] = [
                {"apiVersion": API_VERSION, "kind": "DAG", "name": meta["name"], "uid": meta["uid"]}
            ]
        return body

    # ------------------------------------------------------------------------------------ runs

    async def reconcile_run(self, namespace: str, name: str) -> datetime | None:
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
        status = _parse_status(DagRunStatus, old_wire)
        if status.dag_spec is None:
            started = await self._start_run(run, spec, status, now)
            if started is None:
                return now + DAG_NOT_FOUND_RETRY
            status = started
        dag_spec = DagSpec.model_validate(status.dag_spec)
        try:
            dag = resolve_dag(spec.dag_name, dag_spec)
        except DagInvalid as exc:  # cannot happen for a snapshot that resolved at start, unless code changed
            status = status.model_copy(
                update={"state": DagRunState.FAILED, "message": str(exc), "end_date": now}
            )
            await self._write_status(DAGRUNS, run, old_wire, status.to_wire())
            return None

        if status.state in (DagRunState.SUCCESS, DagRunState.FAILED) and _settled(status) and old_wire:
            return None  # finished, nothing in flight: no API reads for history

        observation = await self._observe(run, status, dag, dag_spec, spec)
        plan = decisions.decide(
            dag,
            run_name=name,
            run_type=spec.run_type,
            status=status,
            observed=observation,
            now=now,
            logical_date=status.logical_date,
            data_interval_end=status.data_interval_end,
        )
        for request in plan.triggers_to_create:
            await self._create_trigger(run, request)
        for launch in plan.launches:
            await self._launch(run, spec, plan.status, dag, dag_spec, launch, now)
        new_wire = plan.status.to_wire()
        if not await self._write_status(DAGRUNS, run, old_wire, new_wire):
            return now  # someone else wrote first (a user's clear/mark): decide again on the fresh object
        for attempt_name in plan.kills:
            await self.executor.kill(run, attempt_name)
            metrics.PODS_DELETED.inc()
        for trigger_name in plan.triggers_to_delete:
            await self.kube.delete_custom(TRIGGERS, namespace, trigger_name)
        old_state, new_state = old_wire.get("state"), new_wire.get("state")
        if old_state != new_state and self.on_run_state_change is not None:
            self.on_run_state_change(namespace, spec.dag_name, name, new_state)
        if plan.events:  # advisory: posted in the background so the next reconcile need not wait for them
            self._post_events(run, plan.events)
        metrics.record_run(run, plan.status)
        self.index.update({**run, "status": new_wire})
        return plan.wake_at

    async def _start_run(
        self, run: Mapping[str, Any], spec: DagRunSpec, status: DagRunStatus, now: datetime
    ) -> DagRunStatus | None:
        """Snapshot the DAG into the run (editing the DAG later never changes this run)."""
        meta = run["metadata"]
        dag = await self.kube.get_custom(DAGS, meta["namespace"], spec.dag_name)
        if dag is None:
            conds = conditions.set_condition(
                status.conditions,
                type="Ready",
                status=False,
                reason="DagNotFound",
                message=f"DAG {spec.dag_name!r} does not exist in namespace {meta['namespace']}",
                now=now,
            )
            new = status.model_copy(update={"conditions": conds, "state": DagRunState.QUEUED})
            if conditions.condition_changed(status.conditions, conds, "Ready"):
                await self.kube.emit_event(run, reason="DagNotFound", message=conds[-1].message, warning=True)
            await self._write_status(DAGRUNS, run, dict(run.get("status") or {}), new.to_wire())
            return None
        try:
            dag_spec = parse_dag_spec(dag["spec"])
            resolve_dag(spec.dag_name, dag_spec)
            timetable = timetable_for(dag_spec)
        except (DagInvalid, ValueError, ImportError) as exc:
            message = f"DAG {spec.dag_name!r} is invalid: {exc}"
            conds = conditions.set_condition(
                status.conditions, type="Ready", status=False, reason="InvalidDag", message=message, now=now
            )
            new = status.model_copy(update={"conditions": conds, "state": DagRunState.QUEUED})
            if conditions.condition_changed(status.conditions, conds, "Ready"):
                await self.kube.emit_event(run, reason="InvalidDag", message=message, warning=True)
            await self._write_status(DAGRUNS, run, dict(run.get("status") or {}), new.to_wire())
            return None
        if spec.data_interval is not None:
            interval = DataInterval(
                pendulum.instance(spec.data_interval.start), pendulum.instance(spec.data_interval.end)
            )
            logical_date = spec.logical_date or interval.start
        else:
            run_after = (
                pendulum.instance(spec.logical_date)
                if spec.logical_date
                else _time(meta["creationTimestamp"]) or now
            )
            due = scheduling.manual_run(timetable, run_after=run_after)
            interval, logical_date = due.data_interval, spec.logical_date or due.logical_date
        conds = conditions.set_condition(
            status.conditions,
            type="Ready",
            status=True,
            reason="Started",
            message=f"DAG generation {dag['metadata'].get('generation')}",
            now=now,
        )
        return status.model_copy(
            update={
                "dag_spec": dag["spec"],
                "dag_generation": dag["metadata"].get("generation"),
                "run_id": f"{spec.run_type.value}__{pendulum.instance(logical_date).isoformat()}",
                "logical_date": logical_date,
                "data_interval_start": interval.start,
                "data_interval_end": interval.end,
                "queued_at": status.queued_at or now,
                "state": status.state or DagRunState.QUEUED,
                "conditions": conds,
                "observed_generation": meta.get("generation"),
            }
        )

    async def _observe(
        self,
        run: Mapping[str, Any],
        status: DagRunStatus,
        dag: ResolvedDag,
        dag_spec: DagSpec,
        spec: DagRunSpec,
    ) -> Observation:
        meta = run["metadata"]
        attempts = await self.executor.observe(run)
        expected = {ti.pod_name: task_id for task_id, ti in status.task_instances.items() if ti.pod_name}
        by_task: dict[str, ObservedAttempt] = {}
        strays: list[str] = []
        for attempt_name, attempt in attempts.items():
            task_id = expected.get(attempt_name)
            ti = status.task_instances.get(task_id) if task_id else None
            if ti is None:
                # an earlier try (kept for its logs) or a try nobody expects: stop it if it still runs
                if attempt.phase in (AttemptPhase.PENDING, AttemptPhase.RUNNING):
                    strays.append(attempt_name)
            elif ti.state in (TaskInstanceState.QUEUED, TaskInstanceState.RUNNING):
                by_task[task_id] = attempt  # type: ignore[index]
            elif attempt.phase in (AttemptPhase.PENDING, AttemptPhase.RUNNING):
                strays.append(attempt_name)  # undead: the try is no longer running (cleared, marked)
        for task_id, ti in status.task_instances.items():
            if ti.state in (TaskInstanceState.QUEUED, TaskInstanceState.RUNNING) and task_id not in by_task:
                by_task[task_id] = ObservedAttempt(
                    task_id=task_id,
                    try_number=ti.try_number,
                    name=ti.pod_name or "",
                    phase=AttemptPhase.MISSING,
                    message="its pod (or process) no longer exists",
                )
        triggers = await self.kube.list_custom(
            TRIGGERS, meta["namespace"], f"{LABEL_DAGRUN_UID}={meta['uid']}"
        )
        observed_triggers: dict[str, ObservedTrigger] = {}
        stray_triggers: list[str] = []
        for trigger in triggers:
            tspec, tstatus = trigger.get("spec") or {}, trigger.get("status") or {}
            task_id = tspec.get("taskId", "")
            ti = status.task_instances.get(task_id)
            tname = trigger["metadata"]["name"]
            if ti is None or ti.state != TaskInstanceState.DEFERRED or ti.trigger_name != tname:
                stray_triggers.append(tname)
                continue
            observed_triggers[task_id] = ObservedTrigger(
                task_id=task_id,
                try_number=tspec.get("tryNumber", 0),
                deferral_count=tspec.get("deferralCount", 1),
                name=tname,
                fired=tstatus.get("state") == "fired",
                failed=tstatus.get("state") == "failed",
                event=tstatus.get("event"),
                message=tstatus.get("message"),
            )
        siblings = self.index.of_dag(meta["namespace"], spec.dag_name)
        siblings.pop(meta["name"], None)
        return Observation(
            attempts=by_task,
            stray_attempts=tuple(strays),
            triggers=observed_triggers,
            stray_triggers=tuple(stray_triggers),
            previous_run_states=_previous_states(siblings, status.logical_date),
            latest_window_end=_latest_window_end(dag_spec, status, utcnow()),
            running_in_dag=sum(s.running_tasks for s in siblings.values()),
        )

    async def _launch(
        self,
        run: Mapping[str, Any],
        spec: DagRunSpec,
        status: DagRunStatus,
        dag: ResolvedDag,
        dag_spec: DagSpec,
        launch: decisions.TaskLaunch,
        now: datetime,
    ) -> None:
        task = dag.tasks[launch.task_id]
        ti = status.task_instances[launch.task_id]
        meta = run["metadata"]
        previous_success = _previous_success(
            self.index.of_dag(meta["namespace"], spec.dag_name), status.logical_date, meta["name"]
        )
        assert status.logical_date and status.data_interval_start and status.data_interval_end
        invocation = TaskInvocation(
            dag_name=spec.dag_name,
            run_name=meta["name"],
            run_type=spec.run_type,
            task_id=launch.task_id,
            try_number=launch.try_number,
            max_tries=ti.max_tries or 0,
            operator=task.operator,
            args=dict(task.args),
            logical_date=status.logical_date,
            data_interval_start=status.data_interval_start,
            data_interval_end=status.data_interval_end,
            timezone=dag_spec.timezone,
            conf=dict(spec.conf),
            params=dict(dag_spec.params),
            xcoms={
                tid: t.xcom
                for tid, t in status.task_instances.items()
                if t.xcom is not None and t.state in FINISHED_TI_STATES
            },
            prev_data_interval_start_success=previous_success[0] if previous_success else None,
            prev_data_interval_end_success=previous_success[1] if previous_success else None,
            first_try_start=ti.first_try_start,
            next_method=ti.next_method,
            next_kwargs=ti.next_kwargs,
        )
        await self.executor.launch(run, task=task, invocation=invocation, attempt_name=launch.attempt_name)
        metrics.PODS_CREATED.inc()
        upstream_done = [
            status.task_instances[u].end_date
            for u in task.upstream
            if u in status.task_instances and status.task_instances[u].end_date
        ]
        first_start = launch.try_number == 1 and ti.next_method is None and ti.first_try_start is None
        if upstream_done and first_start:  # retries, resumptions and pokes wait on purpose: not a delay
            gap = (utcnow() - max(d for d in upstream_done if d is not None)).total_seconds()
            metrics.SCHEDULING_DELAY.labels("upstream_done_to_pod_created").observe(max(0.0, gap))

    def _post_events(self, obj: Mapping[str, Any], events: Sequence[decisions.RunEvent]) -> None:
        async def post() -> None:
            results = await asyncio.gather(
                *(
                    self.kube.emit_event(obj, reason=e.reason, message=e.message, warning=e.warning)
                    for e in events
                ),
                return_exceptions=True,
            )
            for result in results:
                if isinstance(result, BaseException):
                    metrics.API_ERRORS.labels("event").inc()
                    logger.warning("posting an Event failed: %s", result)

        task = asyncio.create_task(post())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _create_trigger(self, run: Mapping[str, Any], request: decisions.TriggerRequest) -> None:
        meta = run["metadata"]
        shard = shard_for(request.name, self.trigger_shards)
        spec = TriggerSpec(
            classpath=request.deferral.trigger_classpath,
            kwargs=dict(request.deferral.trigger_kwargs),
            dag_run=meta["name"],
            task_id=request.task_id,
            try_number=request.try_number,
            deferral_count=request.deferral_count,
            timeout_at=request.timeout_at,
            shard=shard,
        )
        body = {
            "apiVersion": API_VERSION,
            "kind": "Trigger",
            "metadata": {
                "name": request.name,
                "namespace": meta["namespace"],
                "labels": {
                    LABEL_SHARD: str(shard),
                    LABEL_DAGRUN_UID: meta["uid"],
                    LABEL_DAGRUN: label_value(meta["name"]),
                },
                "ownerReferences": [
                    {
                        "apiVersion": API_VERSION,
                        "kind": "DagRun",
                        "name": meta["name"],
                        "uid": meta["uid"],
                        "controller": True,
                    }
                ],
            },
            "spec": spec.to_wire(),
        }
        with contextlib.suppress(AlreadyExists):
            await self.kube.create_custom(TRIGGERS, meta["namespace"], body)

    async def _write_status(
        self, plural: str, obj: Mapping[str, Any], old: Mapping[str, Any], new: Mapping[str, Any]
    ) -> bool:
        """Replace the whole status if it changed, only if nobody wrote since we read (else False)."""
        if dict(old) == dict(new):
            return True
        body = {
            "apiVersion": obj["apiVersion"],
            "kind": obj["kind"],
            "metadata": obj["metadata"],
            "spec": obj["spec"],
            "status": dict(new),
        }
        meta = obj["metadata"]
        try:
            written = await self.kube.replace_custom_status(plural, meta["namespace"], body)
        except Conflict:
            metrics.API_ERRORS.labels("conflict").inc()
            return False
        self.own_writes[(plural, meta["namespace"], meta["name"])] = written["metadata"]["resourceVersion"]
        return True

    def is_own_write(self, plural: str, namespace: str, name: str, resource_version: str | None) -> bool:
        """True for the watch event of a status we just wrote: it needs no reconcile of its own.

        Each pass already settles everything its decision implies, and asks to be woken for the rest;
        re-reading our own write would only cost three API reads per task-instance change.
        """
        return (
            resource_version is not None
            and self.own_writes.get((plural, namespace, name)) == resource_version
        )


def _parse_status(model: Any, raw: Mapping[str, Any] | None) -> Any:
    try:
        return model.model_validate(raw or {})
    except ValidationError:
        logger.warning("ignoring an unreadable %s", model.__name__)
        return model()


def _validated(model: Any, status: Any) -> dict[str, Any]:
    """Round-trip through the model so enum values and datetimes serialise exactly as stored."""
    wire: dict[str, Any] = model.model_validate(status.model_dump()).to_wire()
    return wire


def _settled(status: DagRunStatus) -> bool:
    return all(ti.state in FINISHED_TI_STATES for ti in status.task_instances.values())


def _last_automated_interval(status: DagStatus, runs: Sequence[Mapping[str, Any]]) -> DataInterval | None:
    """The newest automated interval: from the DAG's status, or its runs (whichever is later).

    Keeping it in status means deleting a run does not make the controller create it again.
    """
    best: DataInterval | None = None
    if status.last_automated_data_interval_start and status.last_automated_data_interval_end:
        best = DataInterval(
            pendulum.instance(status.last_automated_data_interval_start),
            pendulum.instance(status.last_automated_data_interval_end),
        )
    for run in runs:
        spec = run.get("spec") or {}
        if spec.get("runType") not in (RunType.SCHEDULED.value, RunType.BACKFILL.value):
            continue
        interval = spec.get("dataInterval") or {}
        start, end = _time(interval.get("start")), _time(interval.get("end"))
        if start and end and (best is None or end > best.end):
            best = DataInterval(pendulum.instance(start), pendulum.instance(end))
    return best


def _previous_states(
    siblings: Mapping[str, RunSummary], logical_date: datetime | None
) -> dict[str, TaskInstanceState] | None:
    if logical_date is None:
        return None
    earlier = [s for s in siblings.values() if s.logical_date is not None and s.logical_date < logical_date]
    if not earlier:
        return None
    previous = max(earlier, key=lambda s: s.logical_date or datetime.min.replace(tzinfo=UTC))
    return {tid: TaskInstanceState(state) for tid, state in previous.ti_states.items()}


def _previous_success(
    siblings: Mapping[str, RunSummary], logical_date: datetime | None, own: str
) -> tuple[datetime, datetime] | None:
    if logical_date is None:
        return None
    done = [
        s
        for name, s in siblings.items()
        if name != own
        and s.state == DagRunState.SUCCESS.value
        and s.logical_date is not None
        and s.logical_date < logical_date
        and s.data_interval
    ]
    if not done:
        return None
    best = max(done, key=lambda s: s.logical_date or datetime.min.replace(tzinfo=UTC))
    return best.data_interval


def _latest_window_end(dag_spec: DagSpec, status: DagRunStatus, now: datetime) -> datetime | None:
    """End of the interval after this run's: LatestOnly's "is this the latest run" window."""
    if status.data_interval_start is None or status.data_interval_end is None:
        return None
    try:
        timetable = timetable_for(dag_spec)
        with pinned_clock(now):
            info = timetable.next_dagrun_info(
                last_automated_data_interval=DataInterval(
                    pendulum.instance(status.data_interval_start), pendulum.instance(status.data_interval_end)
                ),
                restriction=TimeRestriction(earliest=None, latest=None, catchup=True),
            )
    except Exception:  # a custom timetable that cannot answer: LatestOnly then treats the run as latest
        logger.debug("no next interval for LatestOnly", exc_info=True)
        return None
    return info.data_interval.end if info else None
