"""`DagReconciler`: gather a DAG and its runs, `zonda.schedules.dag_plans.plan_dag`, create the due runs,
write status.

Runs get deterministic names (`zonda.schedules.scheduling.dagrun_name`): a restart or a second controller
gets 409 AlreadyExists instead of a duplicate.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from controller.kube import DAGRUNS, DAGS, AlreadyExists, Conflict, KubeApi
from controller.processes.faults import fault_point
from controller.reconcilers import metrics, user_code
from controller.reconcilers.asset_index import (
    AliasResolutions,
    AssetDagIndex,
    AssetEventIndex,
    alias_outlets,
    schedule_keys_of,
)
from controller.reconcilers.common import StatusWriter, parse_status, utcnow
from controller.reconcilers.user_code import BoundedCalls
from zonda.passes import history
from zonda.resources.asset_models import ASSETEVENTS, ASSETS, TriggeringEvent, event_from_body
from zonda.resources.dagrun_models import DagRunSpec
from zonda.resources.models import API_VERSION, DagRunState, DagSpec, DagStatus
from zonda.resources.run_events import RunEvent
from zonda.resources.run_types import RunType
from zonda.resources.wire import ANNOTATION_DELETE_RUNS, LABEL_DAG, LABEL_RUN_TYPE, label_value, parse_time
from zonda.schedules import assets, dag_plans, scheduling
from zonda.specs.dags import DagInvalid
from zonda.timetables import DataInterval
from zonda.timetables.base import coerce_utc

logger = logging.getLogger(__name__)

_RUN_TYPES = frozenset(t.value for t in RunType)
_RUN_STATES = frozenset(s.value for s in DagRunState)


@dataclass
class DagRunRefs:
    """What `plan_dag` needs of every DagRun (`run_ref`), by namespace and DAG, kept from the watch.

    A DAG's pass listed every DagRun of its namespace and kept its own: with 1,000 DAGs each pass read
    every run of the 1,000. A namespace is listed once (`seed`), the watch keeps it current
    (`observed`, `deleted`), and every DagRun write of this controller is recorded at once from its
    answer (`own_write`, subscribed to the `StatusWriter`): the runs a pass creates, so the next pass
    never misses its own runs (maxActiveRuns), and the states the run passes write, so the DAG pass
    their `success` wakes sees it (else it counts the run as active and nothing wakes it again). An
    entry is never replaced by an older body (resourceVersion, as in `controller.kube.cache`): a run
    deleted is not brought back by a list answered before the deletion, and a watch event that
    arrives after our write is not taken for news. Runs created by others are seen when the watch
    delivers them, as a list made a moment earlier would have missed them too; a duplicate is
    refused by name anyway.
    """

    refs: dict[tuple[str, str], dict[str, tuple[int, dag_plans.RunRef]]] = field(default_factory=dict)
    #: (namespace, run) -> its DAG, and the resourceVersion of its deletion (a tombstone) when gone.
    dag_of: dict[tuple[str, str], str] = field(default_factory=dict)
    gone: dict[tuple[str, str], int] = field(default_factory=dict)
    seeded: set[str] = field(default_factory=set)
    #: One list per namespace however many DAG passes start at once (the workers run concurrently).
    _seeding: dict[str, asyncio.Lock] = field(default_factory=dict)

    def observed(self, body: Mapping[str, Any]) -> None:
        meta = body["metadata"]
        key = (meta["namespace"], meta["name"])
        version = _version(meta)
        if key in self.gone and version <= self.gone[key]:
            return
        dag = (body.get("spec") or {}).get("dagName", "")
        bucket = self.refs.setdefault((key[0], dag), {})
        kept = bucket.get(key[1])
        if kept is not None and (version < kept[0] or version == kept[0] != 0):
            return  # older, or this very version again (the watch's ADDED of a run we created)
        self.gone.pop(key, None)
        if (old := self.dag_of.get(key)) is not None and old != dag:
            self.refs.get((key[0], old), {}).pop(key[1], None)
        self.dag_of[key] = dag
        bucket[key[1]] = (version, run_ref(body))

    def own_write(self, plural: str, body: Mapping[str, Any]) -> None:
        """A DagRun as one of our writes left it (`StatusWriter.subscribe`)."""
        if plural == DAGRUNS:
            self.observed(body)

    def knows(self, body: Mapping[str, Any]) -> bool:
        """True when this very version of the run is kept already: the watch's ADDED of a run a DAG
        pass created (recorded from the create's answer), which tells that DAG nothing new."""
        meta = body["metadata"]
        dag = (body.get("spec") or {}).get("dagName", "")
        kept = self.refs.get((meta["namespace"], dag), {}).get(meta["name"])
        return kept is not None and kept[0] == _version(meta) != 0

    def deleted(self, body: Mapping[str, Any]) -> None:
        meta = body["metadata"]
        key = (meta["namespace"], meta["name"])
        self.gone[key] = _version(meta)
        if (dag := self.dag_of.pop(key, None)) is not None:
            self.refs.get((key[0], dag), {}).pop(key[1], None)

    def of_dag(self, namespace: str, dag: str) -> list[dag_plans.RunRef]:
        """The DAG's runs, by name (the order the apiserver lists them in)."""
        bucket = self.refs.get((namespace, dag), {})
        return [bucket[name][1] for name in sorted(bucket)]

    def relist(self) -> None:
        """List each namespace again at its next use (what is kept stays, never replaced by older)."""
        self.seeded.clear()

    async def seed(self, kube: KubeApi, namespace: str) -> None:
        if namespace in self.seeded:
            return
        async with self._seeding.setdefault(namespace, asyncio.Lock()):
            if namespace in self.seeded:
                return
            for run in await kube.list_custom(DAGRUNS, namespace):
                self.observed(run)
            self.seeded.add(namespace)


def _version(meta: Mapping[str, Any]) -> int:
    value = meta.get("resourceVersion")
    return int(value) if isinstance(value, str) and value.isdigit() else 0


@dataclass(frozen=True)
class AssetInputs:
    """What an asset-scheduled DAG's pass reads besides its runs (`plan_dag`'s asset arguments)."""

    events: list[TriggeringEvent] = field(default_factory=list)
    resolutions: dict[str, frozenset[str]] = field(default_factory=dict)
    alias_outlets: frozenset[str] = frozenset()


@dataclass
class PreparedDags:
    """Each DAG's spec parsed, resolved and its timetable built once per version of the spec (keyed by
    the DAG's uid and generation, which the apiserver bumps on every change of the spec), for DAGs on
    Zonda's own timetables. Resolving the spec and building its timetable on every pass was a fifth of
    a creating DAG pass's CPU once the cron lookups were remembered (cProfile, 1,000 DAGs). The newest
    `size` DAGs are kept; an invalid spec is not kept (`plan_dag` reports it on each pass)."""

    size: int = 4096
    kept: OrderedDict[tuple[str, str, str, int | None], dag_plans.PreparedDag] = field(
        default_factory=OrderedDict
    )

    def of(self, dag: Mapping[str, Any]) -> dag_plans.PreparedDag | None:
        meta = dag["metadata"]
        key = (meta["namespace"], meta["name"], meta.get("uid", ""), meta.get("generation"))
        if (found := self.kept.get(key)) is not None:
            self.kept.move_to_end(key)
            return found
        try:
            found = self.kept[key] = dag_plans.prepare_dag(meta["name"], dag.get("spec") or {})
        except (DagInvalid, ValueError, ImportError):
            return None  # plan_dag says why
        if len(self.kept) > self.size:
            self.kept.popitem(last=False)
        return found


@dataclass
class PlansAhead:
    """Each DAG's plan for its next wake-up, made by the pass before it (`dag_plans.plan_ahead`), by
    namespace and name; taken (and dropped) by the next pass, which uses it if it `holds`. The newest
    `size` are kept: a DAG deleted leaves its entry until it is pushed out."""

    size: int = 4096
    kept: OrderedDict[tuple[str, str], dag_plans.PlanAhead] = field(default_factory=OrderedDict)
    #: Passes that found their plan made ahead and used it, and passes that had one that no longer held.
    used: int = 0
    stale: int = 0

    def keep(self, namespace: str, name: str, ahead: dag_plans.PlanAhead) -> None:
        self.kept[(namespace, name)] = ahead
        self.kept.move_to_end((namespace, name))
        if len(self.kept) > self.size:
            self.kept.popitem(last=False)

    def take(self, namespace: str, name: str, now: datetime) -> dag_plans.PlanAhead | None:
        """The plan made for a wake-up that has come (dropped: a pass uses it or plans itself); one
        for a later wake-up stays (a pass before it, woken by a run, replaces it if it writes)."""
        kept = self.kept.get((namespace, name))
        if kept is None or now < kept.at:
            return None
        return self.kept.pop((namespace, name))

    def made(
        self, namespace: str, name: str, at: datetime, version: str | None, runs: list[dag_plans.RunRef]
    ) -> bool:
        """Whether the plan kept is for this wake-up, DAG version and runs already (nothing to plan)."""
        kept = self.kept.get((namespace, name))
        return kept is not None and kept.at == at and kept.version == version and kept.runs == tuple(runs)


@dataclass
class DagReconciler:
    kube: KubeApi
    writer: StatusWriter
    #: The runs by DAG from the watch (the controller's); None: list them from the API each pass.
    runs: DagRunRefs | None = None
    #: The AssetEvents by asset, the DAGs by the assets they name, the aliases' resolutions, from the
    #: watches (the controller's); None: list them each pass.
    asset_events: AssetEventIndex | None = None
    asset_dags: AssetDagIndex | None = None
    aliases: AliasResolutions | None = None
    #: A custom timetable is user code: its pass runs with a time limit (`controller.reconcilers.user_code`).
    timetable_calls: BoundedCalls = field(default_factory=BoundedCalls)
    prepared: PreparedDags = field(default_factory=PreparedDags)
    #: Asks for a later pass of the DAG (namespace, name), after the creations and run passes queued
    #: now: a creating pass leaves its status write to it (`dag_plans.status_written_later`). None:
    #: every pass writes its status itself.
    later: Callable[[str, str], None] | None = None
    #: Each DAG's plan for its next wake-up, made by the pass before it (only with `later`: a pass
    #: that uses one leaves the status to the later pass).
    ahead: PlansAhead = field(default_factory=PlansAhead)

    plural = DAGS

    def keep_runs(self, refs: DagRunRefs) -> None:
        """Read the DAGs' runs from `refs` (which the caller feeds from the DagRun watch), told of our
        own DagRun writes as they answer."""
        self.runs = refs
        self.writer.subscribe(refs.own_write)

    async def reconcile_object(self, dag: Mapping[str, Any], now: datetime) -> datetime | None:
        """One pass; returns when to look again (None: when something changes)."""
        meta = dag["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        if self.runs is not None:
            await self.runs.seed(self.kube, namespace)
            runs = self.runs.of_dag(namespace, name)
        else:
            runs = [
                run_ref(r)
                for r in await self.kube.list_custom(DAGRUNS, namespace)
                if (r.get("spec") or {}).get("dagName") == name
            ]
        ahead = self.ahead.take(namespace, name, now)
        if ahead is not None and self.later is not None:
            if ahead.holds(version=meta.get("resourceVersion"), runs=runs, now=now):
                self.ahead.used += 1
                metrics.DAG_PLANS_AHEAD.labels("used").inc()
                return await self._act(dag, ahead.plan, runs, None, now)
            self.ahead.stale += 1
            metrics.DAG_PLANS_AHEAD.labels("stale").inc()
        old_status = parse_status(DagStatus, dag.get("status"))
        inputs = AssetInputs()
        if (dag.get("spec") or {}).get("assetSchedule") is not None:
            inputs = await self._asset_inputs(namespace, dag["spec"])

        custom = dag_plans.timetable_class(dag.get("spec"))

        def plan() -> dag_plans.DagPlan:
            return dag_plans.plan_dag(
                name,
                dag["spec"],
                status=old_status,
                generation=meta.get("generation"),
                created_at=parse_time(meta["creationTimestamp"]) or now,
                runs=runs,
                now=now,
                asset_events=inputs.events,
                alias_resolutions=inputs.resolutions,
                alias_outlets=inputs.alias_outlets,
                prepared=None if custom is not None else self.prepared.of(dag),
            )

        if custom is None:
            decided = plan()  # Zonda's own timetables: no user code, called inline
        else:
            answer = await self.timetable_calls.ask_timetable(user_code.key_of("dag", dag), custom, plan)
            if isinstance(answer, dag_plans.TimetableFailure):
                if answer.error is not None:
                    logger.warning("DAG %s/%s: %s", namespace, name, answer.says("not scheduled"))
                answer = dag_plans.timetable_failed(
                    answer, status=old_status, generation=meta.get("generation"), now=now
                )
            decided = answer
        return await self._act(dag, decided, runs, old_status, now)

    async def _act(
        self,
        dag: Mapping[str, Any],
        plan: dag_plans.DagPlan,
        runs: list[dag_plans.RunRef],
        old_status: DagStatus | None,
        now: datetime,
    ) -> datetime | None:
        """Carry out `plan`; `old_status` None: the DAG's status as read is parsed only if written."""
        for due in plan.runs_to_create:
            await self._create_run(dag, due, now)
        if plan.asset_run is not None:
            await self._create_asset_run(dag, plan.asset_run, now)
        for partition_run in plan.partition_runs:
            await self._create_asset_run(dag, partition_run, now)
        await self._delete_beyond_history_limits(dag, runs)
        self.writer.post_events(dag, plan.events)
        if self.later is not None and dag_plans.status_written_later(plan):
            self.later(dag["metadata"]["namespace"], dag["metadata"]["name"])
            return plan.wake_at
        if old_status is None:
            old_status = parse_status(DagStatus, dag.get("status"))
        # round-tripped so enum values and datetimes serialise exactly as stored (no needless write)
        new_status = DagStatus.model_validate(plan.status.model_dump())
        new_wire, old_wire = new_status.to_wire(), old_status.to_wire()
        if not await self.writer.write_status(DAGS, dag, old_wire, new_wire):
            return plan.wake_at  # a Conflict: the watch brings the newer DAG, and a pass with it
        meta = dag["metadata"]
        version = meta.get("resourceVersion")
        if new_wire != old_wire:
            version = self.writer.written_version(DAGS, meta["namespace"], meta["name"])
        self._plan_ahead(dag, plan, new_status, runs, version)
        return plan.wake_at

    def _plan_ahead(
        self,
        dag: Mapping[str, Any],
        plan: dag_plans.DagPlan,
        status: DagStatus,
        runs: list[dag_plans.RunRef],
        version: str | None,
    ) -> None:
        """After a pass that created nothing and wrote the DAG's status: the plan for its next wake-up,
        from the DAG as this pass left it (`dag_plans.plan_ahead`), kept for the pass then."""
        if self.later is None or plan.wake_at is None or plan.runs_to_create or plan.asset_run:
            return
        if plan.partition_runs or dag_plans.timetable_class(dag.get("spec")) is not None:
            return
        meta = dag["metadata"]
        if self.ahead.made(meta["namespace"], meta["name"], plan.wake_at, version, runs):
            return  # a pass that changed nothing
        prepared = self.prepared.of(dag)
        if prepared is None:
            return
        ahead = dag_plans.plan_ahead(
            meta["name"],
            prepared,
            status=status,
            generation=meta.get("generation"),
            created_at=parse_time(meta["creationTimestamp"]) or plan.wake_at,
            runs=runs,
            version=version,
            at=plan.wake_at,
        )
        if ahead is not None:
            self.ahead.keep(meta["namespace"], meta["name"], ahead)

    async def _asset_inputs(self, namespace: str, spec: Mapping[str, Any]) -> AssetInputs:
        """The events of the assets (and aliases, and what those resolved to) the DAG's schedule names,
        and which of its aliases some DAG's task outlets: from the indexes, only those."""
        keys = schedule_keys_of(spec)
        aliases = [k.removeprefix("alias:") for k in keys if k.startswith("alias:")]
        if self.asset_events is None or self.aliases is None or self.asset_dags is None:
            bodies = await self.kube.list_custom(ASSETEVENTS, namespace)
            resolutions = AliasResolutions()
            for asset in await self.kube.list_custom(ASSETS, namespace):
                resolutions.observed(asset)
            specs = (
                [d.get("spec") or {} for d in await self.kube.list_custom(DAGS, namespace)] if aliases else []
            )
            return AssetInputs(
                events=[e for e in map(event_from_body, bodies) if e is not None],
                resolutions=resolutions.of_aliases(namespace, aliases),
                alias_outlets=alias_outlets(specs),
            )
        await self.aliases.seed(self.kube, namespace)
        resolved = self.aliases.of_aliases(namespace, aliases)
        await self.asset_events.seed(self.kube, namespace)
        wanted = keys.union(*resolved.values())
        specs = []
        if aliases:
            await self.asset_dags.seed(self.kube, namespace)
            specs = [s for a in aliases for s in self.asset_dags.naming(namespace, f"alias:{a}").values()]
        return AssetInputs(
            events=self.asset_events.of_keys(namespace, wanted),
            resolutions=resolved,
            alias_outlets=alias_outlets(specs),
        )

    async def _create_run(self, dag: Mapping[str, Any], due: scheduling.DueRun, now: datetime) -> None:
        name = dag["metadata"]["name"]
        run_name = scheduling.dagrun_name(name, due.logical_date, RunType.SCHEDULED.value)
        try:
            created = await self.kube.create_custom(
                DAGRUNS, dag["metadata"]["namespace"], scheduled_run(dag, run_name, due)
            )
        except AlreadyExists:
            return  # created before (restart, or another controller): exactly once by name
        self.writer.wrote(DAGRUNS, created)  # counted by the next pass, before the watch shows it
        delay = (now - due.run_after).total_seconds()
        metrics.SCHEDULING_DELAY.labels("run_after_to_run_created").observe(max(0.0, delay))
        if (event := dag_plans.run_created_event(run_name, due, now)) is not None:
            self.writer.post_events(dag, [event])

    async def _create_asset_run(self, dag: Mapping[str, Any], due: assets.AssetRunDue, now: datetime) -> None:
        """The run a satisfying set of asset events makes; its name is the set's, so exactly once."""
        fault_point("asset-run-due")
        try:
            created = await self.kube.create_custom(
                DAGRUNS, dag["metadata"]["namespace"], asset_triggered_run(dag, due)
            )
        except AlreadyExists:
            return  # created before (restart, or another controller): exactly once by name
        self.writer.wrote(DAGRUNS, created)
        fault_point("asset-run-created")
        delay = (now - due.logical_date).total_seconds()
        metrics.SCHEDULING_DELAY.labels("asset_event_to_run_created").observe(max(0.0, delay))
        names = ", ".join(e.name for e in due.events)
        message = f"created {due.run_name} for asset events {names}"
        if due.partition_key is not None:
            message += f" (partition {due.partition_key})"
        self.writer.post_events(dag, [RunEvent("DagRunCreated", message)])
        uris = ", ".join(sorted({e.uri for e in due.events}))
        self.writer.post_events(
            created, [RunEvent("TriggeredByAssetEvents", f"asset events {names} (of {uris})")]
        )

    async def _delete_beyond_history_limits(
        self, dag: Mapping[str, Any], runs: list[dag_plans.RunRef]
    ) -> None:
        """Delete finished runs past `successfulRunsHistoryLimit`/`failedRunsHistoryLimit` (their pods
        are owned by them and go with them)."""
        prepared = None if dag_plans.timetable_class(dag.get("spec")) else self.prepared.of(dag)
        if prepared is not None:
            spec = prepared.spec  # parsed once per version of the spec, not on every pass
        else:
            try:
                spec = DagSpec.model_validate(dag["spec"])
            except ValidationError:
                return  # an invalid DAG: plan_dag reports it
        namespace = dag["metadata"]["namespace"]
        read = {ref.name: ref for ref in runs}
        doomed = [
            name
            for name in history.runs_beyond_history_limits(spec, runs)
            if await self._delete_run(namespace, read[name])
        ]
        if doomed:
            message = f"deleted {len(doomed)} run(s) past the history limits: {', '.join(doomed)}"
            self.writer.post_events(dag, [RunEvent("RunsDeleted", message)])

    async def _delete_run(self, namespace: str, ref: dag_plans.RunRef) -> bool:
        """Delete the run as it was read (its resourceVersion the precondition). Changed since (409:
        a user's clear, a stale cache, another controller's write): read it again and delete it only
        if it is still the finished run decided on, else leave it to the next pass. True if deleted."""
        try:
            return await self.kube.delete_custom(
                DAGRUNS, namespace, ref.name, resource_version=ref.resource_version
            )
        except Conflict:
            fresh = await self.kube.get_custom(DAGRUNS, namespace, ref.name)
            if fresh is None or run_ref(fresh).state != ref.state:
                logger.info("run %s/%s changed since read: not deleted this pass", namespace, ref.name)
                return False
        try:
            return await self.kube.delete_custom(
                DAGRUNS, namespace, ref.name, resource_version=fresh["metadata"]["resourceVersion"]
            )
        except Conflict:
            return False


def run_ref(run: Mapping[str, Any]) -> dag_plans.RunRef:
    """What the DAG's scheduling needs of one of its runs' bodies."""
    spec, status = run.get("spec") or {}, run.get("status") or {}
    interval = spec.get("dataInterval") or {}
    start, end = parse_time(interval.get("start")), parse_time(interval.get("end"))
    run_type, state = str(spec.get("runType")), str(status.get("state"))
    return dag_plans.RunRef(
        name=run["metadata"]["name"],
        created_at=parse_time(run["metadata"]["creationTimestamp"]) or utcnow(),
        run_type=RunType(run_type) if run_type in _RUN_TYPES else None,
        state=DagRunState(state) if state in _RUN_STATES else None,
        data_interval=DataInterval(coerce_utc(start), coerce_utc(end)) if start and end else None,
        consumed_events=frozenset(
            str(e.get("name")) for e in spec.get("triggeringAssetEvents") or [] if isinstance(e, Mapping)
        ),
        partition_key=spec.get("partitionKey") if isinstance(spec.get("partitionKey"), str) else None,
        resource_version=run["metadata"].get("resourceVersion"),
    )


def asset_triggered_run(dag: Mapping[str, Any], due: assets.AssetRunDue) -> dict[str, Any]:
    """The body of an asset-triggered DagRun (Airflow 2 files: `dataset_triggered`), naming its events."""
    meta = dag["metadata"]
    dag_spec = dag.get("spec") or {}
    run_type = RunType(dag_spec.get("assetRunType") or RunType.ASSET_TRIGGERED.value)
    # Airflow 3 gives an asset-triggered run no logical date and no data interval, and runs it after
    # the newest event (SchedulerJobRunner._create_dag_runs_asset_triggered); Airflow 2.10 gives it both
    dated = dag_spec.get("airflowVersion") != "3"
    body: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": "DagRun",
        "metadata": {
            "name": due.run_name,
            "namespace": meta["namespace"],
            "labels": {LABEL_DAG: label_value(meta["name"]), LABEL_RUN_TYPE: run_type.value},
        },
        "spec": DagRunSpec(
            dag_name=meta["name"],
            run_type=run_type,
            logical_date=due.logical_date if dated else None,
            data_interval={"start": due.data_interval.start, "end": due.data_interval.end} if dated else None,
            run_after=None if dated else due.logical_date,
            triggering_asset_events=list(due.events),
            partition_key=due.partition_key,
            partition_date=due.partition_date,
        ).to_wire(),
    }
    if (meta.get("annotations") or {}).get(ANNOTATION_DELETE_RUNS) == "true":
        body["metadata"]["ownerReferences"] = [
            {"apiVersion": API_VERSION, "kind": "DAG", "name": meta["name"], "uid": meta["uid"]}
        ]
    return body


def scheduled_run(dag: Mapping[str, Any], run_name: str, due: scheduling.DueRun) -> dict[str, Any]:
    """The body of a scheduled DagRun; owned by the DAG when it asks for that (annotation)."""
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
            partition_key=due.partition_key,
            partition_date=due.partition_date,
        ).to_wire(),
    }
    if (meta.get("annotations") or {}).get(ANNOTATION_DELETE_RUNS) == "true":
        body["metadata"]["ownerReferences"] = [
            {"apiVersion": API_VERSION, "kind": "DAG", "name": meta["name"], "uid": meta["uid"]}
        ]
    return body
