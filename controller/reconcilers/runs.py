"""`RunReconciler`: gather a DagRun, its attempts, triggers and what the pass needs read
(`zonda.passes.compose.Gathered`); `zonda.passes.compose.compose_pass`; act on the plan.

Acting is: create triggers, launch attempts and callback tries, write the status (one optimistic
write, resourceVersion-checked), then kill attempts, delete triggers and finished pods, and post
Events. Launches come before the write so a crash in between leaves a pod the next pass adopts by its
deterministic name (`PassPlan.adoptions`: recorded, not created again) or stops with an Event if it
no longer launches that try, never a status that claims a launch that did not happen
(`ZONDA_FAULT_EXIT_AT=try-launched` exits right after a launch: the cluster tests' crash there).
A pass is composed inside the pool admission lock, with the pools' occupancy read there from memory
(`controller.reconcilers.pools`), once: composing it first without the lock to learn whether it
would launch composed every launching pass twice (11 % of the busy loop with 100 runs at once,
docs/benchmarks.md, fifteenth round). With `--shards`, whose occupancy may need a read of the slot
ledger, a pass still learns that first, and only one that would launch takes the lock. A write the
apiserver refuses as too large keeps the status last written and says so
(`zonda.passes.status_budget.refused_write`), instead of failing every pass.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pydantic import ValidationError

from controller.executors.base import Executor
from controller.kube import DAGRUNS, DAGS, TRIGGERS, AlreadyExists, Conflict, KubeApi, KubeError
from controller.kube.cache import LabelledObjects, copy_body
from controller.processes.faults import fault_point
from controller.reconcilers import callbacks as reconciler_callbacks
from controller.reconcilers import metrics, user_code
from controller.reconcilers.assets import record_events
from controller.reconcilers.common import StatusWriter, parse_status, utcnow
from controller.reconcilers.index import RunIndex, RunSummary, previous_states, previous_success
from controller.reconcilers.pools import PoolAdmission, runs_to_wake
from controller.reconcilers.stored_xcoms import StoredXComReader
from controller.reconcilers.trigger_resources import trigger_body, trigger_report
from controller.reconcilers.user_code import BoundedCalls, TimeLimitExceeded
from zonda.passes import compose, decisions, events, plans, status_budget
from zonda.passes.decisions import Unanswered
from zonda.passes.limits import DEFAULT_LIMITS, PassLimits
from zonda.resources.dagrun_models import DagRunSpec, DagRunStatus, dag_label_problem
from zonda.resources.models import Condition, DagSpec
from zonda.resources.run_events import RunEvent
from zonda.resources.states import FINISHED_RUN_STATES
from zonda.resources.wire import LABEL_DAGRUN_UID, parse_time
from zonda.schedules import dag_plans
from zonda.schedules.dag_plans import TIMETABLE_RETRY
from zonda.specs import priority_strategies
from zonda.specs.dags import DagInvalid, ResolvedDag, resolve_dag

logger = logging.getLogger(__name__)

DAG_NOT_FOUND_RETRY = timedelta(seconds=5)
#: `--shards`: admissions decided again when the slot ledger moved under them, then a retry this soon.
LEDGER_ATTEMPTS = 3
LEDGER_RETRY = timedelta(milliseconds=200)


class StatusRefused(Exception):
    """The apiserver refused the pass's status as too large; reported on the run already."""


@dataclass(frozen=True)
class TimetableAnswer:
    """What a pass asked the run's custom timetable: LatestOnly's window (`Unanswered.UNKNOWN` when it
    did not answer in time or raised), the status with its `Timetable` condition, the Events to post."""

    window: plans.LatestWindow | Unanswered
    status: DagRunStatus
    events: tuple[RunEvent, ...]
    failed: bool


@dataclass
class RunReconciler:
    kube: KubeApi
    executor: Executor
    writer: StatusWriter
    index: RunIndex
    trigger_shards: int = 16
    #: The limits every pass applies (`zonda.passes.limits.PassLimits`), from the settings.
    limits: PassLimits = DEFAULT_LIMITS
    #: Called with (namespace, DAG name, run name, new state) when a run's state changes: the DAG may
    #: schedule more (maxActiveRuns), and its other runs may proceed (dependsOnPast, maxActiveTasks).
    on_run_state_change: Callable[[str, str, str, str | None], None] | None = None
    #: Called with (kind, namespace, name) to reconcile another object: "run" or "pool".
    enqueue: Callable[[str, str, str], None] | None = None
    #: Pool admission's critical section: one per controller process.
    admission: PoolAdmission = dataclasses.field(init=False)
    #: Values in the XCom backend that mapped KubernetesPodOperators map over.
    stored_xcoms: StoredXComReader = dataclasses.field(init=False)
    #: Each run's DAG snapshot, parsed and resolved once (`Snapshots`), not on every pass.
    snapshots: Snapshots = dataclasses.field(init=False)
    #: The Triggers by run uid, kept by the controller's Trigger watch (None: listed on every pass,
    #: one API read per pass: a fifth of the reconcile workers' time with 100 runs at once).
    triggers: LabelledObjects | None = None
    #: A custom timetable is user code: what a run asks of it runs with a time limit (its manual data
    #: interval at start, LatestOnlyOperator's window), as in the DAG pass (`reconcilers.user_code`).
    timetable_calls: BoundedCalls = dataclasses.field(default_factory=BoundedCalls)

    def __post_init__(self) -> None:
        self.admission = PoolAdmission(self.kube, self.index)
        self.stored_xcoms = StoredXComReader(self.kube)
        self.snapshots = Snapshots()
        #: (namespace, run) -> its status writes refused as too large in a row (until one is written).
        self.refusals: dict[tuple[str, str], int] = {}

    plural = DAGRUNS

    async def reconcile_object(self, run: Mapping[str, Any], now: datetime) -> datetime | None:
        """One pass; returns when to look again (None: when something changes)."""
        namespace, name = run["metadata"]["namespace"], run["metadata"]["name"]
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
                    return now + (TIMETABLE_RETRY if start.timetable_failed else DAG_NOT_FOUND_RETRY)
                if start.status.state != status.state and self.on_run_state_change is not None:
                    self.on_run_state_change(namespace, spec.dag_name, name, start.status.state)
                return None
            status = start.status
        try:
            dag_spec, dag = self.snapshots.resolved(run, spec.dag_name, status)
        except DagInvalid as exc:  # cannot happen for a snapshot that resolved at start, unless code changed
            await self.kube.emit_event(run, reason="InvalidDag", message=str(exc), warning=True)
            return None
        answer = await self._ask_timetable(run, status, dag, dag_spec, now)
        if answer is not None:
            status = answer.status  # with its Timetable condition
        gathered = await self._gather(run, spec, status, dag, dag_spec, now)
        if answer is not None:
            gathered = dataclasses.replace(gathered, latest_window=answer.window)
        plan = None
        if self.admission.sharding is not None:  # its occupancy may be an API read: only to launch
            plan = compose.compose_pass(gathered)  # no pool limits: only to learn whether it would launch
        before_pass, new_wire = None, None
        if plan is None or plan.launches or plan.adoptions:
            async with self.admission.lock:  # the critical section: see controller.reconcilers.pools
                for _ in range(LEDGER_ATTEMPTS):
                    concurrency = await self.admission.concurrency(namespace, name)
                    plan = compose.compose_pass(dataclasses.replace(gathered, concurrency=concurrency))
                    if not plan.launches and not plan.adoptions:
                        break
                    # what it admits (or adopts) counts as held before the lock is released
                    new_wire = plan.status.to_wire()
                    before_pass = self.index.reserve({**run, "status": new_wire})
                    if await self.admission.declare(namespace, name):  # --shards: the slot ledger
                        break
                    self.index.record(run, None)  # not declared: not launched, nothing reserved
                    before_pass, new_wire = None, None
                else:
                    return now + LEDGER_RETRY  # the ledger kept moving, or the shard is not ours
        assert plan is not None  # composed above (LEDGER_ATTEMPTS > 0)
        if stopped := priority_strategies.take_timeouts():  # a user's get_weight, stopped in this pass
            for message in stopped:
                logger.warning("run %s/%s: %s", namespace, name, message)
            said = [RunEvent("PriorityWeightTimeout", message, warning=True) for message in stopped]
            self.writer.post_events(run, said)
        try:
            written, refused = await self._launch_and_write(run, plan, old_wire, before_pass, now, new_wire)
        except StatusRefused:  # nothing of this pass is recorded: no kills, deletions nor its Events
            refusals = self.refusals[namespace, name] = self.refusals.get((namespace, name), 0) + 1
            return status_budget.next_pass_after_refusal(refusals, plan.wake_at, now)
        self.refusals.pop((namespace, name), None)
        if not written:
            return now  # someone else wrote first (a user's clear/mark): decide again on the fresh object
        # task pods deleted before now, held by their finalizer until a status accounts for their try
        # (zonda.passes.try_tracking): those this status does may go
        await self.executor.release_recorded(run, gathered.attempts, plan.status)
        for attempt_name in plan.kills:
            await self.executor.kill(run, attempt_name, uid=plan.uids.get(attempt_name))
            metrics.PODS_DELETED.inc()
        for trigger_name, uid in plan.fenced(plan.triggers_to_delete):
            try:
                await self.kube.delete_custom(TRIGGERS, namespace, trigger_name, uid=uid)
            except Conflict as conflict:  # created again since the pass observed it: not the one decided on
                logger.info("trigger %s/%s not deleted: %s", namespace, trigger_name, conflict.api_message)
        await self._delete_worker_pods(run, plan.pods_to_delete, plan.uids)
        old_state = old_wire.get("state")
        new_state = plan.status.state.value if plan.status.state is not None else None
        if old_state != new_state and self.on_run_state_change is not None:
            self.on_run_state_change(namespace, spec.dag_name, name, new_state)
        self.writer.post_events(run, plan.events if answer is None else [*answer.events, *plan.events])
        log_state_changes(namespace, spec.dag_name, name, before, plan.status)
        metrics.record_run(run, plan.status)
        if plan.new_sla_misses:
            metrics.SLA_MISSES.labels(namespace, spec.dag_name).inc(len(plan.new_sla_misses))
        if refused:  # no pod will wake it: the next pass fails the refused tries now
            return now
        if answer is not None and answer.failed:  # ask again then (or sooner, if the run's pods change)
            retry = now + TIMETABLE_RETRY
            return retry if plan.wake_at is None else min(plan.wake_at, retry)
        return plan.wake_at

    async def _ask_timetable(
        self, run: Mapping[str, Any], status: DagRunStatus, dag: ResolvedDag, dag_spec: DagSpec, now: datetime
    ) -> TimetableAnswer | None:
        """LatestOnlyOperator's window from the run's custom timetable, with the time limit (None: not
        a custom timetable, or no LatestOnlyOperator: the pass asks nothing, or Zonda's own inline).
        Past the limit, or when it raises, LatestOnly waits and the run's `Timetable` condition says why;
        the rest of the pass goes on."""
        class_path = dag_plans.timetable_class(status.dag_spec)
        if class_path is None or not plans.needs_latest_window(dag):
            return None
        meta = run["metadata"]
        answer = await self.timetable_calls.ask_timetable(
            user_code.key_of("run", run), class_path, lambda: plans.ask_latest_window(dag_spec, status, now)
        )
        window: plans.LatestWindow | Unanswered = Unanswered.UNKNOWN
        failure = None
        if isinstance(answer, dag_plans.TimetableFailure):
            failure = answer
            if failure.error is not None:
                logger.warning(
                    "run %s/%s: %s", meta["namespace"], meta["name"], failure.says("LatestOnly waits")
                )
        else:
            window = answer
        new, events = plans.timetable_condition(status, failure, now)
        return TimetableAnswer(window, new, events, failed=failure is not None)

    async def _gather(
        self,
        run: Mapping[str, Any],
        spec: DagRunSpec,
        status: DagRunStatus,
        dag: ResolvedDag,
        dag_spec: DagSpec,
        now: datetime,
    ) -> compose.Gathered:
        """What the pass needs read: the executor's and the triggerer's reports, the DAG's other runs
        (from the index), and the values in the XCom backend a mapped pod's items are in."""
        meta = run["metadata"]
        attempts = await self.executor.observe(run)
        triggers = [trigger_report(t) for t in await self._triggers_of(meta["namespace"], meta["uid"])]
        siblings = self.index.siblings(meta["namespace"], spec.dag_name, meta["name"])
        gathered = compose.Gathered(
            dag=dag,
            dag_spec=dag_spec,
            spec=spec,
            status=status,
            run_name=meta["name"],
            now=now,
            namespace=meta["namespace"],
            run_uid=meta.get("uid"),
            attempts=attempts,
            triggers=triggers,
            previous_run_states=previous_states(siblings, status.logical_date),
            previous_success=previous_success(siblings, status.logical_date),
            running_in_dag=sum(s.running_tasks for s in siblings.values()),
            limits=self.limits,
        )
        if urls := compose.stored_xcoms_to_read(gathered):  # a mapped pod's items
            stored, unreadable = await self.stored_xcoms.read(urls)
            gathered = dataclasses.replace(gathered, stored_xcoms=stored, unreadable_xcoms=unreadable)
        return gathered

    async def _triggers_of(self, namespace: str, run_uid: str) -> list[dict[str, Any]]:
        """The run's Triggers, to read only: from the watch once the namespace was listed into it."""
        if self.triggers is None:
            return await self.kube.list_custom(TRIGGERS, namespace, f"{LABEL_DAGRUN_UID}={run_uid}")
        if (kept := self.triggers.kept(namespace, run_uid)) is not None:
            return kept
        every = await self.kube.list_custom(TRIGGERS, namespace, LABEL_DAGRUN_UID)  # every run's
        self.triggers.seed(namespace, [copy_body(trigger) for trigger in every])
        return self.triggers.kept(namespace, run_uid) or []

    async def _launch_and_write(
        self,
        run: Mapping[str, Any],
        plan: compose.PassPlan,
        old_wire: Mapping[str, Any],
        before_pass: RunSummary | None,
        now: datetime,
        new_wire: dict[str, Any] | None = None,
    ) -> tuple[bool, bool]:
        """Create triggers, launch, record the asset events of tries that succeeded, write the status
        and record it in the index.

        Returns (written: False when the write met a conflict, refused: whether the apiserver refused a
        try's pod for good). `before_pass` is what the index knew of the run before this pass reserved
        its admissions (None: nothing reserved), `new_wire` the plan's status as it reserved it.
        """
        namespace, name = run["metadata"]["namespace"], run["metadata"]["name"]
        if (plan.launches or plan.triggers_to_create) and not self._still_served(run):
            return False, False  # the shard was lost in this pass (paused past its Lease): its holder decides
        for request in plan.triggers_to_create:
            await self._create_trigger(run, request)
        refused = False
        for launch in plan.launches:
            refused = not await self._launch(run, launch) or refused
        if await reconciler_callbacks.launch_callbacks(self.executor, run, plan.callback_tries):
            refused = True
        await record_events(self.kube, run, plan.asset_events)  # before the write says success
        if new_wire is None:
            new_wire = plan.status.to_wire()
        version = self.writer.written_version(DAGRUNS, namespace, name)
        try:
            if not await self.writer.write_status(DAGRUNS, run, old_wire, new_wire):
                return False, refused
        except KubeError as error:
            message = error.api_message
            if not status_budget.is_too_large(error.status, message):
                raise
            await self._report_refused(run, old_wire, status_budget.wire_bytes(new_wire), message, now)
            raise StatusRefused(message) from error
        written = self.writer.written_version(DAGRUNS, namespace, name)
        previous = self.index.record({**run, "status": new_wire}, written if written != version else None)
        self._wake_after(namespace, name, before_pass or previous, plan.runs_to_wake)
        return True, refused

    def _still_served(self, run: Mapping[str, Any]) -> bool:
        """Whether this replica still holds the run's controller shard (always, unsharded), checked
        again just before a launch: a pass paused past its shard's Lease (SIGSTOP, a long GC) would
        otherwise launch what it admitted under the old slot ledger beside the new holder's launches,
        and a pool would hold more than its slots."""
        sharding = self.admission.sharding
        if sharding is None:
            return True
        return sharding.serves_dag(run["metadata"]["namespace"], run["spec"]["dagName"])

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
        try:
            await self.writer.write_status(
                DAGRUNS, run, old_wire, {**old_wire, "conditions": [c.to_wire() for c in new]}
            )
        except KubeError as error:  # the condition's own write refused too: the Event still tells
            if not status_budget.is_too_large(error.status, error.api_message):
                raise
            logger.warning(
                "run %s/%s: its StatusWritten condition was refused too", meta["namespace"], meta["name"]
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
        if runs or touched_pools:  # --shards: slots given back reach the other replicas' admissions
            self.admission.release_soon(namespace)

    async def _start(
        self, run: Mapping[str, Any], spec: DagRunSpec, status: DagRunStatus, now: datetime
    ) -> plans.RunStart:
        """Snapshot the DAG into the run; if it cannot start yet, say why on the run. A DAG with a
        custom timetable starts its run with the time limit (the timetable is loaded, and a manual
        run's data interval asked of it)."""
        meta = run["metadata"]
        dag = await self.kube.get_custom(DAGS, meta["namespace"], spec.dag_name)

        def start_run() -> plans.RunStart:
            return plans.start_run(
                spec,
                status,
                plans.DagRef(dag["spec"], dag["metadata"].get("generation")) if dag is not None else None,
                namespace=meta["namespace"],
                created_at=parse_time(meta["creationTimestamp"]) or now,
                generation=meta.get("generation"),
                now=now,
            )

        class_path = dag_plans.timetable_class(dag["spec"]) if dag is not None else None
        if class_path is None:
            start = start_run()
        else:
            try:
                start = await self.timetable_calls.call(user_code.key_of("run", run), start_run)
            except TimeLimitExceeded as exc:
                failure = dag_plans.TimetableFailure(class_path, exc.limit_seconds, exc.earlier)
                start = plans.timetable_not_answered(status, failure, now)
        if not start.started:
            for event in start.events:
                await self.kube.emit_event(run, reason=event.reason, message=event.message, warning=True)
            await self.writer.write_status(
                DAGRUNS, run, dict(run.get("status") or {}), start.status.to_wire()
            )
        elif unlabelled := dag_label_problem(meta, spec.dag_name):  # made by hand: said once, at start
            await self.kube.emit_event(run, reason="MissingDagLabel", message=unlabelled, warning=True)
        return start

    async def _delete_worker_pods(
        self, run: Mapping[str, Any], names: list[str], uids: Mapping[str, str]
    ) -> None:
        """A finished run's pods the DAG does not keep (`deleteWorkerPods`): after the status write, so
        every result they held is recorded first; each at the uid the pass observed it with."""
        deleted = [
            name for name in names if await self.executor.delete_finished(run, name, uid=uids.get(name))
        ]
        if deleted:
            message = f"deleted {len(deleted)} finished pod(s) and their logs (deleteWorkerPods): "
            await self.kube.emit_event(run, reason="WorkerPodsDeleted", message=message + ", ".join(deleted))

    async def _launch(self, run: Mapping[str, Any], launch: compose.Launch) -> bool:
        """Launch one try; False when the apiserver refused its pod for good (the executor reports the
        try failed to the next pass, which fails it with the apiserver's words)."""
        words = await self.executor.launch(
            run, task=launch.task, invocation=launch.invocation, attempt_name=launch.launch.attempt_name
        )
        if words is not None:
            meta = run["metadata"]
            logger.warning(
                "run %s/%s task %s try %s: %s",
                meta["namespace"],
                meta["name"],
                launch.launch.task_id,
                launch.launch.try_number,
                words,
            )
            return False
        fault_point("try-launched")
        metrics.PODS_CREATED.inc()
        if launch.upstream_done_at is not None:  # after the launch: what a watch sees
            gap = (utcnow() - launch.upstream_done_at).total_seconds()
            metrics.SCHEDULING_DELAY.labels("upstream_done_to_pod_created").observe(max(0.0, gap))
        return True

    async def _create_trigger(self, run: Mapping[str, Any], request: decisions.TriggerRequest) -> None:
        body = trigger_body(run["metadata"], request, self.trigger_shards)
        with contextlib.suppress(AlreadyExists):
            created = await self.kube.create_custom(TRIGGERS, run["metadata"]["namespace"], body)
            if self.triggers is not None:  # the next pass sees it before the watch delivers it
                self.triggers.observed(copy_body(created))


@dataclass
class Snapshots:
    """Each run's DAG snapshot (`status.dagSpec`) parsed and resolved once: it is written when the
    run starts and never changes after (keyed by the run's uid and the DAG generation it was taken
    from). Parsing and resolving it on every pass was 11 % of the controller's CPU with 100 runs at
    once (py-spy). The newest `size` runs are kept; an older one is resolved again if it needs a pass.
    """

    size: int = 1024
    kept: OrderedDict[tuple[str, str, str, int | None], tuple[DagSpec, ResolvedDag]] = dataclasses.field(
        default_factory=OrderedDict
    )

    def resolved(
        self, run: Mapping[str, Any], dag_name: str, status: DagRunStatus
    ) -> tuple[DagSpec, ResolvedDag]:
        """(the snapshot, resolved); raises `DagInvalid` (not kept) when it does not resolve."""
        meta = run["metadata"]
        key = (meta["namespace"], meta["name"], meta.get("uid", ""), status.dag_generation)
        if (found := self.kept.get(key)) is not None:
            self.kept.move_to_end(key)
            return found
        dag_spec = DagSpec.model_validate(status.dag_spec)
        found = self.kept[key] = (dag_spec, resolve_dag(dag_name, dag_spec))
        if len(self.kept) > self.size:
            self.kept.popitem(last=False)
        return found


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
