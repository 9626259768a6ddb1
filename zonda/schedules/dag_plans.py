"""What the DAG reconciler decides, as one pure function with `now` passed in: `plan_dag`.

`plan_dag` validates a DAG, works out the runs its timetable says are due
(`zonda.schedules.scheduling.catchup_backlog` within `maxActiveRuns`) and its whole new status (Valid and
Ready
conditions, the next run, the last automated interval) — what `reconcile_dag` writes after creating
the runs. `timetable_for` and `last_automated_interval` are shared with backfills, the upcoming-runs
view and the run reconciler's decisions in `zonda.passes.plans`.

Its own module because the DAG reconciler's decisions share nothing with a run's but the timetable.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from zonda.resources import conditions
from zonda.resources.asset_models import TriggeringEvent
from zonda.resources.models import Condition as StatusCondition
from zonda.resources.models import DagRunState, DagSpec, DagStatus, dag_display_fields
from zonda.resources.run_events import RunEvent
from zonda.resources.run_types import RunType
from zonda.resources.states import FINISHED_RUN_STATES
from zonda.schedules import assets, partitioned_assets, scheduling
from zonda.specs.dags import DagInvalid, parse_dag_spec, resolve_dag
from zonda.timetables import (
    CronDataIntervalTimetable,
    CronTriggerTimetable,
    DataInterval,
    DeltaDataIntervalTimetable,
    Timetable,
    load_timetable,
    timetable_for_schedule,
)
from zonda.timetables.base import coerce_utc

#: Run types whose data intervals the timetable continues from (Airflow's "automated" runs).
_AUTOMATED_RUN_TYPES = frozenset({RunType.SCHEDULED, RunType.BACKFILL})


def timetable_for(spec: DagSpec) -> Timetable:
    """The DAG's timetable: its custom `timetable`, else its `schedule` (Airflow's `dag.timetable`)."""
    if spec.timetable is not None:
        return load_timetable(spec.timetable.class_, dict(spec.timetable.params))
    return timetable_for_schedule(spec.schedule, spec.timezone)


@dataclass(frozen=True)
class PreparedDag:
    """A DAG's spec parsed and resolved, and its timetable: the same for every pass over one version of
    the spec, so a caller may keep it (`prepare_dag`) and give it to `plan_dag`. Built-in timetables keep
    no state between calls; a custom one is user code, built again on each pass by `plan_dag`."""

    spec: DagSpec
    timetable: Timetable


def prepare_dag(name: str, raw_spec: Mapping[str, Any]) -> PreparedDag:
    """Validate the DAG (raises `DagInvalid`, or `ValueError`/`ImportError` for its timetable) and build
    its timetable."""
    spec = parse_dag_spec(raw_spec)
    resolve_dag(name, spec)
    return PreparedDag(spec=spec, timetable=timetable_for(spec))


@dataclass(frozen=True)
class RunRef:
    """What the DAG's scheduling needs to know of one of its existing runs."""

    name: str
    created_at: datetime
    run_type: RunType | None
    state: DagRunState | None
    data_interval: DataInterval | None  # the spec's, for scheduled and backfill runs
    consumed_events: frozenset[str] = frozenset()  # an asset-triggered run's AssetEvent names
    partition_key: str | None = None  # the run's spec.partitionKey
    # the version read: a delete past the history limits is of this version only (a run a user
    # cleared since, or another controller changed, is decided again)
    resource_version: str | None = dataclasses.field(default=None, compare=False)


@dataclass(frozen=True)
class DagPlan:
    """The DAG's new status, the runs to create now (oldest first), what to tell the user, when to wake."""

    status: DagStatus
    runs_to_create: tuple[scheduling.DueRun, ...] = ()
    events: tuple[RunEvent, ...] = ()
    wake_at: datetime | None = None
    asset_run: assets.AssetRunDue | None = None
    #: A `PartitionedAssetTimetable` DAG's runs, one per partition key now due (oldest first).
    partition_runs: tuple[assets.AssetRunDue, ...] = ()


#: A scheduled run created more than this after it became runnable is told by an Event on its DAG.
LATE_RUN_CREATED = timedelta(seconds=60)


def run_created_event(run_name: str, due: scheduling.DueRun, now: datetime) -> RunEvent | None:
    """The `DagRunCreated` Event for a scheduled run created `now`: only a late one (a catch-up, or a
    controller that was down or behind), saying how late; None for one created on time.

    A run created on time is its own record: the DagRun (its data interval, creationTimestamp, label
    `zonda.dev/dag`, `kubectl get dagruns`) and the DAG's `status.lastRun`. Airflow records no event
    per run created either. One Event per run on every boundary was a third of a DAG pass's writes
    (1,000 DAGs on `* * * * *`: 1,000 Event posts a minute), and it buried the DAG's warnings in
    `kubectl describe dag` under one line a period. Asset-triggered runs and backfills keep theirs."""
    late = now - due.run_after
    if late <= LATE_RUN_CREATED:
        return None
    interval = due.data_interval
    return RunEvent(
        "DagRunCreated",
        f"created {run_name} for data interval {interval.start} .. {interval.end}, "
        f"{late.total_seconds():.0f} s after it became runnable",
    )


def status_written_later(plan: DagPlan) -> bool:
    """Whether a pass that carries out `plan` leaves its status write to a pass of its own, queued
    after the other DAGs' creations and the run passes of the moment (`DagReconciler.later`).

    True when the pass creates scheduled runs and has nothing to tell: at a minute boundary of 1,000
    DAGs on `* * * * *` each creating pass PUT the DAG's status (`next*`, `lastRun`, `activeRuns`),
    the largest part of its time (py-spy), so the last run of the minute waited for 999 status writes
    as well as 999 creations. The later pass plans again and writes the same status (`plan_dag` reads
    the runs, ours included, so it creates nothing twice; a run's name is its interval's, so a create
    can never be repeated either); the run's first pass moves it to running and wakes its DAG, which
    then writes once what both passes changed (one DAG status write per run of an EmptyOperator,
    not two). A pass with an Event (an invalid spec, a warning) writes at once."""
    return bool(plan.runs_to_create) and not plan.events


#: Timetables whose answer is the same at every moment from one of their wake-ups to the next (cron
#: firings, epoch-aligned deltas; with catchup off they skip to the latest interval *complete* at that
#: moment, which moves only at a firing). Not `@continuous` (its interval ends at the moment asked),
#: partitioned or asset timetables, nor user code.
_STEADY_TIMETABLES = (CronDataIntervalTimetable, DeltaDataIntervalTimetable, CronTriggerTimetable)


@dataclass(frozen=True)
class PlanAhead:
    """`plan_dag`'s answer at the DAG's next wake-up `at`, made by an earlier pass (`plan_ahead`), and
    what it was made from: the DAG as that pass left it (`version`, its resourceVersion: any change of
    spec, status or metadata bumps it) and its runs. The pass at `at` carries it out without planning
    when it `holds`."""

    at: datetime
    version: str | None
    runs: tuple[RunRef, ...]
    plan: DagPlan

    def holds(self, *, version: str | None, runs: Sequence[RunRef], now: datetime) -> bool:
        """True when `plan_dag` at `now` would create the same runs: the same DAG and runs as it was made
        from, and `now` from `at` until the plan's next wake-up (before which its timetable says
        nothing new). A controller behind by a whole period plans again."""
        return (
            version is not None
            and version == self.version
            and self.plan.wake_at is not None
            and self.at <= now < self.plan.wake_at
            and tuple(runs) == self.runs
        )


def plan_ahead(
    name: str,
    prepared: PreparedDag,
    *,
    status: DagStatus,
    generation: int | None,
    created_at: datetime,
    runs: Sequence[RunRef],
    version: str | None,
    at: datetime,
) -> PlanAhead | None:
    """The DAG's plan for its next wake-up `at`, made now, so that the pass at `at` only creates the runs
    due then (a minute boundary of 1,000 DAGs on `* * * * *` planned 1,000 DAGs at once, about a third
    of each creating pass's CPU on the boundary; now each plans in the quiet part of the minute).

    None when a plan made ahead could not stand for that pass: a timetable whose answer moves between
    its wake-ups (`_STEADY_TIMETABLES`), an asset schedule, a paused DAG, no run to create then, an
    Event to post, or a status the creating pass would have to write itself
    (`status_written_later`). The plan's status is the one `plan_dag` would give at `at`; the pass that
    uses it leaves the status to the later pass, which plans with its own `now`."""
    spec = prepared.spec
    if type(prepared.timetable) not in _STEADY_TIMETABLES or spec.paused:
        return None
    if spec.asset_schedule is not None or spec.asset_partitions is not None:
        return None
    plan = plan_dag(
        name,
        {},
        status=status,
        generation=generation,
        created_at=created_at,
        runs=runs,
        now=at,
        prepared=prepared,
    )
    if not status_written_later(plan) or plan.asset_run is not None or plan.partition_runs:
        return None
    if plan.wake_at is None:  # runs held back (maxActiveRuns): the next pass decides with its own now
        return None
    return PlanAhead(at=at, version=version, runs=tuple(runs), plan=plan)


def _with_partition(timetable: Any, due: scheduling.DueRun) -> scheduling.DueRun:
    """A partitioned timetable's run (Airflow's `DagRunInfo.partition_key`): its partition's key and date."""
    if not getattr(timetable, "partitioned", False) or not hasattr(timetable, "partition_key"):
        return due
    date = timetable.partition_date(due.run_after)
    return dataclasses.replace(due, partition_key=timetable.partition_key(due.run_after), partition_date=date)


def plan_dag(
    name: str,
    raw_spec: Mapping[str, Any],
    *,
    status: DagStatus,
    generation: int | None,
    created_at: datetime,
    runs: Sequence[RunRef],
    now: datetime,
    asset_events: Sequence[TriggeringEvent] = (),
    alias_resolutions: Mapping[str, frozenset[str]] | None = None,
    alias_outlets: frozenset[str] = frozenset(),
    prepared: PreparedDag | None = None,
) -> DagPlan:
    """One scheduling pass over a DAG: Airflow's `DagModel.next_dagrun` bookkeeping, without a database.

    Runs are created oldest first up to `maxActiveRuns` (a timetable's own `active_runs_limit`, e.g.
    `@continuous`, caps it further); a paused DAG creates none. The status assumes every run listed in
    `runs_to_create` gets created (an AlreadyExists counts: it was created before).

    A DAG scheduled on assets (`assetSchedule`) also gets the asset-triggered run its pending
    `asset_events` make due (`zonda.schedules.assets`), within the same `maxActiveRuns`. An alias in
    its schedule also matches the assets it resolved to (`alias_resolutions`: alias -> URIs, as
    Airflow); one no task outlets (`alias_outlets`: the aliases some DAG's task names as an outlet)
    and nothing resolved yet is reported (`AssetAliasesResolvable=False` and a Warning Event).

    `prepared`: `prepare_dag(name, raw_spec)` kept from an earlier pass over the same spec (else made
    here).
    """
    try:
        if prepared is None:
            prepared = prepare_dag(name, raw_spec)
        spec, timetable = prepared.spec, prepared.timetable
        condition = None if spec.asset_schedule is None else assets.parse_condition(spec.asset_schedule)
        if condition is not None:
            condition = assets.expand_aliases(condition, alias_resolutions or {})
        partitions = None
        if spec.asset_partitions is not None:
            partitions = partitioned_assets.Partitions.from_manifest(spec.asset_partitions)
    except (DagInvalid, ValueError, ImportError) as exc:
        return _invalid_dag(exc, status=status, generation=generation, now=now)

    active = sum(1 for run in runs if run.state not in FINISHED_RUN_STATES)
    limit = timetable.active_runs_limit
    max_active_runs = min(spec.max_active_runs, limit) if limit else spec.max_active_runs
    last_interval = last_automated_interval(status, runs)
    start_date = spec.start_date or created_at
    room = 0 if spec.paused else max(max_active_runs - active, 0)
    due, after = scheduling.catchup_backlog(
        timetable,
        last_automated_data_interval=last_interval,
        start_date=start_date,
        end_date=spec.end_date,
        catchup=spec.catchup,
        now=now,
        limit=room,
    )
    due = [_with_partition(timetable, run) for run in due]
    active += len(due)
    last_interval = due[-1].data_interval if due else last_interval
    asset_update: dict[str, Any] = {}
    asset_run = None
    held_events = 0  # the pending events of an asset-triggered run held back by maxActiveRuns
    partition_runs: tuple[assets.AssetRunDue, ...] = ()
    if condition is not None and partitions is not None:
        partition_runs, asset_update = _partition_runs(
            name, condition, partitions, status, runs, asset_events, created_at, max(room - len(due), 0)
        )
        active += len(partition_runs)
    elif condition is not None:
        consumed = frozenset().union(*(run.consumed_events for run in runs))
        cursor = assets.Cursor(
            status.asset_cursor_time or created_at, frozenset(status.asset_cursor_events or ())
        )
        # a run made by a pass whose status write never happened (a crash) moves the cursor too
        cursor = cursor.advanced(
            [e for e in asset_events if e.name in consumed and cursor.is_past(e)], asset_events
        )
        pending = assets.pending_events(condition, asset_events, consumed=consumed, cursor=cursor)
        asset_run = assets.decide_asset_run(name, condition, pending)
        if asset_run is not None and room <= len(due):
            # held at maxActiveRuns: its events stay pending, and those that arrive meanwhile join them
            held_events, asset_run = len(asset_run.events), None
        if asset_run is not None:
            active += 1
            cursor = cursor.advanced(asset_run.events, asset_events)
            pending = []
        asset_update = {
            "asset_cursor_time": cursor.time,
            "asset_cursor_events": sorted(cursor.names),
            "awaited_assets": assets.awaited(condition, pending),
        }
    # The run to show as next: the one due now but held back (maxActiveRuns, pause), else the one due
    # when the trailing decision wakes.
    upcoming = after.due
    if upcoming is None and after.wake_at is not None:
        upcoming = scheduling.decide_next_run(
            timetable,
            last_automated_data_interval=last_interval,
            start_date=start_date,
            end_date=spec.end_date,
            catchup=spec.catchup,
            now=after.wake_at,
        ).due
    if spec.paused:
        ready = ("Paused", False, "paused: no scheduled runs are created (manual runs are accepted)")
    elif held_events:
        ready = (
            "MaxActiveRuns",
            True,
            f"{held_events} asset events queued for the next run: {active} active runs reached maxActiveRuns",
        )
    elif condition is not None and not timetable.can_be_scheduled:
        waiting = ", ".join(asset_update["awaited_assets"])
        ready = ("AssetScheduled", True, f"waiting for asset events: {waiting}" if waiting else "")
    elif not timetable.can_be_scheduled:
        ready = ("ManualOnly", True, "no schedule: runs are created manually")
    elif active >= max_active_runs and after.due is not None:
        ready = ("MaxActiveRuns", True, f"{active} active runs reached maxActiveRuns")
    elif after.due is None and after.wake_at is None:  # no run will come: say why (end date, year 9999)
        ready = ("Scheduled", True, after.reason)
    else:
        ready = ("Scheduled", True, "")
    conds = conditions.set_condition(
        status.conditions, type="Valid", status=True, reason="Valid", now=now, generation=generation
    )
    events: tuple[RunEvent, ...] = ()
    if condition is not None and (aliases := assets.aliases_in(condition)):
        conds, events = _aliases_resolvable(conds, aliases, alias_resolutions or {}, alias_outlets, now)
    conds = conditions.set_condition(
        conds,
        type="Ready",
        status=ready[1],
        reason=ready[0],
        message=ready[2],
        now=now,
        generation=generation,
    )
    latest = max(runs, key=lambda run: run.created_at, default=None)
    update: dict[str, Any] = {
        "conditions": conds,
        "observed_generation": generation,
        "timetable_summary": timetable.summary,
        **dag_display_fields(spec, timetable.summary),
        "active_runs": active,
        "next_logical_date": upcoming.logical_date if upcoming else None,
        "next_run_after": upcoming.run_after if upcoming else None,
        "next_data_interval_start": upcoming.data_interval.start if upcoming else None,
        "next_data_interval_end": upcoming.data_interval.end if upcoming else None,
        "last_automated_data_interval_start": last_interval.start if last_interval else None,
        "last_automated_data_interval_end": last_interval.end if last_interval else None,
        **asset_update,
    }
    if latest is not None:
        update |= {"last_run": latest.name, "last_run_state": latest.state}
    return DagPlan(
        status=status.model_copy(update=update),
        runs_to_create=tuple(due),
        events=events,
        wake_at=None if after.due is not None else after.wake_at,
        asset_run=asset_run,
        partition_runs=partition_runs,
    )


def _partition_runs(
    name: str,
    condition: assets.Condition,
    partitions: partitioned_assets.Partitions,
    status: DagStatus,
    runs: Sequence[RunRef],
    asset_events: Sequence[TriggeringEvent],
    created_at: datetime,
    room: int,
) -> tuple[tuple[assets.AssetRunDue, ...], dict[str, Any]]:
    """A `PartitionedAssetTimetable` DAG's runs due now, and its cursor's new place: an event is
    consumed once every key it maps to has its run; the horizon waits for the oldest still waiting."""
    consumed_pairs = frozenset(
        (run.partition_key, event) for run in runs if run.partition_key for event in run.consumed_events
    )
    cursor = assets.Cursor(
        status.asset_cursor_time or created_at, frozenset(status.asset_cursor_events or ())
    )
    # events some run already consumed are decided again: their other keys (a fan-out) may be open
    pending = assets.pending_events(condition, asset_events, consumed=frozenset(), cursor=cursor)
    decision = partitioned_assets.decide_partition_runs(
        name, condition, partitions, pending, consumed=consumed_pairs, limit=room
    )
    hold = min((assets.recorded_at(e) for e in decision.waiting), default=None)
    cursor = cursor.advanced(decision.consumed, asset_events, hold=hold)
    waiting_names = {e.name for e in decision.waiting}
    return decision.runs, {
        "asset_cursor_time": cursor.time,
        "asset_cursor_events": sorted(cursor.names),
        "awaited_assets": assets.awaited(condition, [e for e in pending if e.name in waiting_names]),
    }


def _aliases_resolvable(
    conds: list[StatusCondition],
    aliases: Sequence[str],
    resolved: Mapping[str, frozenset[str]],
    outlets: frozenset[str],
    now: datetime,
) -> tuple[list[StatusCondition], tuple[RunEvent, ...]]:
    """`AssetAliasesResolvable`: False while an alias of the schedule has no producer anywhere in the
    namespace (no task outlets it) and no event was ever emitted through it. Airflow accepts such a DAG
    and it never runs; here the DAG stays valid (a producer may be applied later, or any system may
    create an AssetEvent naming the alias) but the user is told which alias nothing resolves."""
    orphans = [a for a in aliases if not resolved.get(a) and a not in outlets]
    if orphans:
        names = ", ".join(orphans)
        message = (
            f"no task of any DAG in this namespace has AssetAlias {names} as an outlet and no AssetEvent "
            "was emitted through it: this DAG is not triggered by it until one is"
        )
        new = conditions.set_condition(
            conds,
            type="AssetAliasesResolvable",
            status=False,
            reason="NoAliasProducer",
            message=message,
            now=now,
        )
        changed = conditions.condition_changed(conds, new, "AssetAliasesResolvable")
        return new, (RunEvent("UnresolvedAssetAlias", message, warning=True),) if changed else ()
    new = conditions.set_condition(
        conds, type="AssetAliasesResolvable", status=True, reason="AliasesResolvable", message="", now=now
    )
    return new, ()


#: How long an object whose custom timetable overran its time limit (or raised) waits before the
#: timetable is asked again: a DAG, a run that needs it, a Backfill listing its dates.
TIMETABLE_RETRY = timedelta(seconds=60)
#: How much of a timetable's exception message a condition and an Event quote.
TIMETABLE_ERROR_CHARS = 300


def timetable_class(raw_spec: Mapping[str, Any] | None) -> str | None:
    """The class path of a DAG spec's custom timetable (None: Zonda's own, no user code)."""
    timetable = raw_spec.get("timetable") if isinstance(raw_spec, Mapping) else None
    class_path = timetable.get("class") if isinstance(timetable, Mapping) else None
    return str(class_path) if class_path else None


@dataclass(frozen=True)
class TimetableFailure:
    """A custom timetable the controller asked that did not answer within its limit (`limit_seconds`;
    `still_running`: its earlier call has not returned, so it was not called again), or raised (`error`:
    the exception's type and message, cut). The same words on a DAG, a run and a Backfill."""

    class_path: str
    limit_seconds: float | None = None
    still_running: bool = False
    error: str | None = None
    #: Whose limit it was: the controller's, or a CLI command's.
    limited_by: str = "the controller's"

    @classmethod
    def raised(cls, class_path: str, exc: BaseException) -> TimetableFailure:
        text = str(exc)
        if len(text) > TIMETABLE_ERROR_CHARS:
            text = text[: TIMETABLE_ERROR_CHARS - 3] + "..."
        return cls(class_path, error=f"{type(exc).__name__}: {text}" if text else type(exc).__name__)

    @property
    def reason(self) -> str:
        return "TimetableError" if self.error is not None else "TimetableTimeout"

    def says(self, consequence: str) -> str:
        """The message: what the timetable did, then `consequence` (what the object does meanwhile)."""
        if self.error is not None:
            text = f"timetable {self.class_path} raised {self.error}"
        else:
            limit = self.limit_seconds or 0.0
            text = (
                f"timetable {self.class_path} did not answer within {self.limited_by} limit of {limit:g} s "
                "(--timetable-timeout)"
            )
            if self.still_running:
                text += (
                    "; its earlier call is still running (the controller does not call it again until then)"
                )
        return f"{text}: {consequence}"


def timetable_failed(
    failure: TimetableFailure, *, status: DagStatus, generation: int | None, now: datetime
) -> DagPlan:
    """The DAG's status when its custom timetable did not answer within the controller's time limit,
    or raised.

    Nothing is scheduled for it (no run is created from a guess); the other DAGs' passes go on (the
    controller stopped waiting, or caught the exception). `Ready=False` (`TimetableTimeout` or
    `TimetableError`) names the class and the limit or the exception, with a Warning Event when it
    starts; the timetable is asked again after `TIMETABLE_RETRY`, and the DAG schedules as before once
    it answers in time.
    """
    message = failure.says(
        f"no runs are scheduled for this DAG until it answers{'' if failure.error else ' in time'}"
    )
    conds = conditions.set_condition(
        status.conditions,
        type="Ready",
        status=False,
        reason=failure.reason,
        message=message,
        now=now,
        generation=generation,
    )
    events: tuple[RunEvent, ...] = ()
    if conditions.condition_turned(status.conditions, conds, "Ready"):
        events = (RunEvent(failure.reason, message, warning=True),)
    new = status.model_copy(update={"conditions": conds, "observed_generation": generation})
    return DagPlan(status=new, events=events, wake_at=now + TIMETABLE_RETRY)


def _invalid_dag(exc: Exception, *, status: DagStatus, generation: int | None, now: datetime) -> DagPlan:
    message = "; ".join(exc.errors if isinstance(exc, DagInvalid) else [str(exc)])
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
    events: tuple[RunEvent, ...] = ()
    if conditions.condition_changed(status.conditions, conds, "Valid"):
        events = (RunEvent("InvalidSpec", message, warning=True),)
    new = status.model_copy(update={"conditions": conds, "observed_generation": generation})
    return DagPlan(status=new, events=events)


def last_automated_interval(status: DagStatus, runs: Iterable[RunRef]) -> DataInterval | None:
    """The newest automated data interval: from the DAG's status or its runs, whichever is later.

    Keeping it in status means deleting a run does not make the controller create it again.
    """
    best: DataInterval | None = None
    if status.last_automated_data_interval_start and status.last_automated_data_interval_end:
        best = utc_interval(
            status.last_automated_data_interval_start, status.last_automated_data_interval_end
        )
    for run in runs:
        automated = run.run_type in _AUTOMATED_RUN_TYPES and run.data_interval is not None
        if automated and run.data_interval is not None and (best is None or run.data_interval.end > best.end):
            best = utc_interval(run.data_interval.start, run.data_interval.end)
    return best


def utc_interval(start: datetime, end: datetime) -> DataInterval:
    """A data interval with both ends in UTC (as the timetables compute them)."""
    return DataInterval(coerce_utc(start), coerce_utc(end))


__all__ = [
    "DagPlan",
    "PlanAhead",
    "RunRef",
    "TimetableFailure",
    "last_automated_interval",
    "plan_ahead",
    "plan_dag",
    "status_written_later",
    "timetable_class",
    "timetable_failed",
    "timetable_for",
    "utc_interval",
]
