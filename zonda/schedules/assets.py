"""When a DAG scheduled on assets is due: Airflow's `DatasetDagRunQueue` without a database.

Airflow (2.10 `SchedulerJobRunner._create_dag_runs_dataset_triggered`, 3.x the same for assets)
queues a (DAG, asset) row when an event is recorded, evaluates the DAG's condition over the queued
assets, and when it holds creates one run whose consumed events are all the DAG's assets' events
since the previous asset-triggered run, up to the newest queued one; its logical date is that
newest time and its data interval spans the events. Then the queue is emptied.

Here the queue is computed, not stored: the pending events of a DAG are those of its assets past
its cursor (`DagStatus.assetCursor*`: by arrival, the apiserver's creationTimestamp, not the event's
own timestamp, as Airflow queues a DAG when an event is recorded) that no existing asset-triggered
run names. The run's name is a hash of the names of the events it consumes, so a
restarted controller, or a second one, computes the same name and gets 409: each satisfying set of
events makes exactly one run. Events that arrive while the DAG is at `maxActiveRuns` wait and go,
all together, into the next run (as Airflow's queue rows wait for the next scheduler loop).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import pydantic

from zonda.resources.asset_models import (
    AssetRef,
    AssetWatcherRef,
    TriggeringEvent,
    sanitize_uri,
    watcher_trigger_name,
)
from zonda.schedules.scheduling import MAX_NAME_LENGTH
from zonda.timetables import DataInterval
from zonda.timetables.base import coerce_utc
from zonda.tries.asset_events import OUTLET_EVENTS_KEY


class AssetConditionInvalid(ValueError):
    """The DAG's `assetSchedule` is not an asset, an alias, or an `all`/`any` of them."""


@dataclass(frozen=True)
class Leaf:
    key: str  # a URI, or alias:<name>


@dataclass(frozen=True)
class AllOf:
    items: tuple[Condition, ...]


@dataclass(frozen=True)
class AnyOf:
    items: tuple[Condition, ...]


Condition = Leaf | AllOf | AnyOf


def parse_condition(raw: Any, where: str = "spec.assetSchedule") -> Condition:
    """`{"uri": ...}`, `{"alias": ...}`, `{"all": [...]}` or `{"any": [...]}`, nested."""
    if not isinstance(raw, Mapping):
        raise AssetConditionInvalid(f"{where}: expected an object with uri, alias, all or any")
    for kind, make in (("all", AllOf), ("any", AnyOf)):
        if kind in raw:
            items = raw[kind]
            if len(raw) != 1 or not isinstance(items, list) or not items:
                raise AssetConditionInvalid(f"{where}.{kind}: expected a non-empty list, alone")
            return make(tuple(parse_condition(item, f"{where}.{kind}[{i}]") for i, item in enumerate(items)))
    try:
        return Leaf(AssetRef.model_validate(raw).key())
    except pydantic.ValidationError as error:
        reason = "; ".join(str(e["msg"]).removeprefix("Value error, ") for e in error.errors())
        raise AssetConditionInvalid(f"{where}: {reason}") from error


def condition_keys(condition: Condition) -> frozenset[str]:
    if isinstance(condition, Leaf):
        return frozenset({condition.key})
    return frozenset().union(*(condition_keys(item) for item in condition.items))


def aliases_in(condition: Condition) -> list[str]:
    """The names of the AssetAliases a condition names."""
    return sorted(k.removeprefix("alias:") for k in condition_keys(condition) if k.startswith("alias:"))


def expand_aliases(condition: Condition, resolved: Mapping[str, Iterable[str]]) -> Condition:
    """Each alias as Airflow's `_DatasetAliasCondition` (2.10) / `AssetAliasCondition` (3.x) reads it:
    any of the assets it resolved to (`resolved`: alias name -> URIs an event was emitted through it
    for), or an event emitted through it. Once resolved, an update of such an asset by any producer
    (not only through the alias) satisfies it, as Airflow's DAG re-parsed after the alias resolved."""
    if isinstance(condition, Leaf):
        if not condition.key.startswith("alias:"):
            return condition
        uris = sorted(set(resolved.get(condition.key.removeprefix("alias:"), ())))
        return AnyOf((condition, *(Leaf(u) for u in uris))) if uris else condition
    items = tuple(expand_aliases(item, resolved) for item in condition.items)
    return AllOf(items) if isinstance(condition, AllOf) else AnyOf(items)


def evaluate(condition: Condition, updated: frozenset[str]) -> bool:
    """Airflow's `BaseAsset.evaluate(statuses)`: whether the updated assets satisfy the condition."""
    if isinstance(condition, Leaf):
        return condition.key in updated
    results = (evaluate(item, updated) for item in condition.items)
    return all(results) if isinstance(condition, AllOf) else any(results)


def event_keys(event: TriggeringEvent) -> frozenset[str]:
    return frozenset({event.uri, *(f"alias:{alias}" for alias in event.aliases)})


#: The most consumed events a DAG's cursor names (`DagStatus.assetCursorEvents`), the newest by arrival.
#: The names are kept for as long as their events exist (the assets' history limits bound them, 100 per
#: asset by default); only beyond this many does the horizon move, past the names it drops.
MAX_CURSOR_NAMES = 1000


def recorded_at(event: TriggeringEvent) -> datetime:
    """When the event arrived (the apiserver's creationTimestamp); its own time when unknown."""
    return coerce_utc(event.recorded or event.timestamp)


@dataclass(frozen=True)
class Cursor:
    """What a consumer DAG consumed, by arrival: Airflow queues a DAG when an event is *recorded*,
    whatever the event's timestamp, so an event created with an old `timestamp`, or a producer's write
    that landed after a newer event, is consumed too.

    `names` are the consumed events that still exist: an event is consumed once by name, however late
    it became visible, whatever the clocks said (Airflow's queue row is written in the event's own
    transaction, so it has no late events; here the apiserver stamps creationTimestamp before the
    create commits, and several apiservers' clocks may differ). `time` is a horizon of arrival: events
    recorded before it are not pending — those before the DAG, and those older than the
    `MAX_CURSOR_NAMES` newest consumed, which the horizon passes as it drops their names.
    """

    time: datetime | None
    names: frozenset[str] = frozenset()

    def is_past(self, event: TriggeringEvent) -> bool:
        """Whether the event is past the cursor (not consumed, not before the horizon)."""
        if event.name in self.names:
            return False
        return self.time is None or recorded_at(event) >= coerce_utc(self.time)

    def advanced(
        self,
        consumed: Iterable[TriggeringEvent],
        known: Iterable[TriggeringEvent] = (),
        hold: datetime | None = None,
    ) -> Cursor:
        """The cursor once `consumed` are consumed too. `known`: the DAG's assets' events now; a kept
        name whose event is neither is forgotten (deleted: nothing can bring it back under that name).
        `hold`: the horizon does not move past it (a partitioned DAG's oldest event still waiting)."""
        consumed = list(consumed)
        names = self.names | {e.name for e in consumed}
        recorded = {e.name: recorded_at(e) for e in (*known, *consumed)}
        kept = sorted((recorded[n], n) for n in names if n in recorded)
        horizon: datetime | None = None if self.time is None else coerce_utc(self.time)
        if len(kept) > MAX_CURSOR_NAMES:
            # past the newest name dropped; names at or after the horizon stay (a held one keeps more)
            candidate = kept[len(kept) - MAX_CURSOR_NAMES - 1][0] + timedelta(microseconds=1)
            if hold is not None:
                candidate = min(candidate, coerce_utc(hold))
            if horizon is None or candidate > horizon:
                horizon = candidate
        return Cursor(horizon, frozenset(n for t, n in kept if horizon is None or t >= horizon))


@dataclass(frozen=True)
class AssetRunDue:
    """One asset-triggered run to create: its name, the events it consumes (oldest first), its dates."""

    run_name: str
    events: tuple[TriggeringEvent, ...]
    logical_date: datetime
    data_interval: DataInterval
    #: A `PartitionedAssetTimetable` run's (`zonda.schedules.partitioned_assets`): its partition.
    partition_key: str | None = None
    partition_date: datetime | None = None


def pending_events(
    condition: Condition,
    events: Iterable[TriggeringEvent],
    *,
    consumed: frozenset[str],
    cursor: Cursor,
) -> list[TriggeringEvent]:
    """The DAG's queue: events of its assets after the cursor that no existing run consumed."""
    keys = condition_keys(condition)
    found = [e for e in events if e.name not in consumed and cursor.is_past(e) and event_keys(e) & keys]
    return sorted(found, key=lambda e: (coerce_utc(e.timestamp), e.name))


def awaited(condition: Condition, pending: Sequence[TriggeringEvent]) -> list[str]:
    """The condition's assets with no pending event (what the DAG still waits for)."""
    updated = frozenset().union(*(event_keys(e) for e in pending)) if pending else frozenset()
    return sorted(condition_keys(condition) - updated)


def decide_asset_run(
    dag_name: str, condition: Condition, pending: Sequence[TriggeringEvent]
) -> AssetRunDue | None:
    """The run the pending events make due, or None while the condition does not hold."""
    if not pending:
        return None
    updated = frozenset().union(*(event_keys(e) for e in pending))
    if not evaluate(condition, updated):
        return None
    first, last = coerce_utc(pending[0].timestamp), coerce_utc(pending[-1].timestamp)
    return AssetRunDue(
        run_name=asset_run_name(dag_name, [e.name for e in pending]),
        events=tuple(pending),
        logical_date=last,
        data_interval=DataInterval(first, last),
    )


def asset_run_name(dag_name: str, event_names: Iterable[str]) -> str:
    """`<dag>-asset-<hash of the consumed events' names>`: the same set always gives the same name."""
    digest = hashlib.sha256("\x00".join(sorted(event_names)).encode()).hexdigest()[:16]
    suffix = f"-asset-{digest}"
    dag = "".join(c if c.isalnum() or c in "-." else "-" for c in dag_name.lower()).strip("-.")
    return f"{dag[: MAX_NAME_LENGTH - len(suffix)].rstrip('-.')}{suffix}"


# ------------------------------------------------------------------ producers and the asset's own status


@dataclass(frozen=True)
class OutletEvent:
    """An event a producing try records: the asset, the extra, the aliases it came through."""

    uri: str
    extra: Mapping[str, Any]
    aliases: tuple[str, ...] = ()
    partition_key: str | None = None
    #: Whether the task added the key (`add_partitions`), not the run: the event's name says it.
    added_partition: bool = False


def outlet_events(
    outlets: Sequence[AssetRef], reported: Any, partition_key: str | None = None
) -> list[OutletEvent]:
    """Airflow's `TaskInstance._register_asset_changes`: one event per outlet asset with the extra the
    task set (`outlet_events[asset].extra`, `yield Metadata`), and one per asset a task added to an
    alias outlet (`outlet_events[alias].add(asset)`); an asset reached both ways is one event.

    Each carries the run's `partition_key`; an outlet asset the task added partitions to
    (`outlet_events[asset].add_partitions(...)`) gets one event per added key instead (Airflow 3.2+)."""
    found = _outlet_events(outlets, reported if isinstance(reported, Mapping) else {})
    partitions = reported.get("partitions") if isinstance(reported, Mapping) else None
    partitions = partitions if isinstance(partitions, Mapping) else {}
    outlet_uris = {ref.uri for ref in outlets if ref.uri is not None}
    events: list[OutletEvent] = []
    for event in found:
        keys = partitions.get(event.uri) if event.uri in outlet_uris else None
        if isinstance(keys, list) and keys:
            events.extend(
                OutletEvent(event.uri, event.extra, event.aliases, str(key), added_partition=True)
                for key in sorted({str(k) for k in keys})
            )
        else:
            events.append(OutletEvent(event.uri, event.extra, event.aliases, partition_key))
    return events


def _outlet_events(outlets: Sequence[AssetRef], reported: Mapping[str, Any]) -> list[OutletEvent]:
    given = reported.get("extras")
    extras: Mapping[str, Any] = given if isinstance(given, Mapping) else {}
    found: dict[str, OutletEvent] = {}
    for ref in outlets:
        if ref.uri is not None:
            found[ref.uri] = OutletEvent(ref.uri, dict(extras.get(ref.uri) or {}))
    alias_names = {ref.alias for ref in outlets if ref.alias is not None}
    for added in reported.get("aliases") or []:
        if not isinstance(added, Mapping) or added.get("alias") not in alias_names:
            continue
        uri = sanitize_uri(str(added.get("uri")))
        before = found.get(uri, OutletEvent(uri, dict(added.get("extra") or {})))
        aliases = tuple(sorted({*before.aliases, str(added["alias"])}))
        found[uri] = OutletEvent(uri, {**before.extra, **dict(added.get("extra") or {})}, aliases)
    return [found[uri] for uri in sorted(found)]


def asset_dags(uri: str, dags: Mapping[str, Mapping[str, Any]]) -> tuple[list[str], list[str]]:
    """(producing, consuming) DAG names of an asset, from the DAGs' specs as stored (camelCase)."""
    producing, consuming = [], []
    for name, spec in sorted(dags.items()):
        outlets = [o for task in spec.get("tasks") or [] for o in (task.get("outlets") or [])]
        if any(_same_uri(o.get("uri"), uri) for o in outlets if isinstance(o, Mapping)):
            producing.append(name)
        raw = spec.get("assetSchedule")
        if raw is not None:
            try:
                if uri in condition_keys(parse_condition(raw)):
                    consuming.append(name)
            except AssetConditionInvalid:
                continue
    return producing, consuming


def event_holders(uri: str, aliases: Iterable[str], dags: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The DAGs whose unconsumed events of the asset its history limit waits for (`events_to_prune`):
    those scheduled on its URI, and those scheduled on an alias that resolved to it (`aliases`, its
    `status.aliases`). An alias stands for any of its assets (`expand_aliases`, as Airflow 3's
    `AssetEvaluator` expands an alias to its resolved assets), so such a DAG consumes every event of
    the asset, not only those emitted through the alias."""
    wanted = {uri, *(f"alias:{a}" for a in aliases)}
    holders = []
    for name, spec in sorted(dags.items()):
        raw = spec.get("assetSchedule")
        if raw is None:
            continue
        try:
            if wanted & condition_keys(parse_condition(raw)):
                holders.append(name)
        except AssetConditionInvalid:
            continue
    return holders


def schedule_watchers(raw: Any) -> list[tuple[str, AssetWatcherRef]]:
    """(URI, watcher) of every AssetWatcher on an asset of a schedule as stored (camelCase), nested
    in `all`/`any`; an invalid leaf gives none (the DAG is invalid, and says so)."""
    if not isinstance(raw, Mapping):
        return []
    for kind in ("all", "any"):
        if isinstance(raw.get(kind), list):
            return [found for item in raw[kind] for found in schedule_watchers(item)]
    try:
        ref = AssetRef.model_validate(raw)
    except pydantic.ValidationError:
        return []
    return [(ref.uri, watcher) for watcher in ref.watchers or [] if ref.uri is not None]


def asset_watchers(uri: str, dags: Mapping[str, Mapping[str, Any]]) -> dict[str, AssetWatcherRef]:
    """The watchers an asset runs: those its consuming DAGs' schedules put on it (Airflow registers
    the watchers of the assets in DAG schedules), by their Trigger's name: two DAGs giving the same
    watcher share it."""
    found: dict[str, AssetWatcherRef] = {}
    for _, spec in sorted(dags.items()):
        for where, watcher in schedule_watchers(spec.get("assetSchedule")):
            if where == uri:
                found.setdefault(watcher_trigger_name(uri, watcher), watcher)
    return found


def _same_uri(written: Any, uri: str) -> bool:
    try:
        return isinstance(written, str) and sanitize_uri(written) == uri
    except ValueError:
        return False


#: An asset keeps the events a consumer has not consumed yet past its `eventsHistoryLimit`, up to this
#: many times the limit in all (a consumer that never runs — paused, its `&` never satisfied — must not
#: keep them forever): past it, the oldest go even so, with a Warning naming the consumer.
HELD_EVENTS_CEILING_FACTOR = 10


@dataclass(frozen=True)
class Pruning:
    """What an asset's history limit deletes (`events_to_prune`)."""

    #: The names to delete, recorded first first.
    doomed: tuple[str, ...]
    #: Events past the limit kept because a consumer has not consumed them.
    held: int = 0
    #: consumer DAG -> the events it had not consumed that the ceiling deleted nonetheless.
    lost: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


def events_to_prune(
    events: Sequence[TriggeringEvent],
    limit: int,
    consumers: Mapping[str, Cursor],
    ceiling: int | None = None,
) -> Pruning:
    """The events recorded first past the asset's history limit, to delete — except those a consumer
    (its DAG name -> its asset cursor) has not consumed yet, kept up to `ceiling` events in all
    (default `HELD_EVENTS_CEILING_FACTOR` x the limit), the oldest held going first past it.

    By arrival, as consumers take them: a late event with an old timestamp is not deleted before it is
    consumed. A cursor that says "not consumed" of an event a run already took only keeps it longer."""
    ordered = sorted(events, key=lambda e: (recorded_at(e), e.name))
    beyond = ordered[: max(len(ordered) - limit, 0)]
    waiting = {e.name: tuple(sorted(d for d, c in consumers.items() if c.is_past(e))) for e in beyond}
    held = [e for e in beyond if waiting[e.name]]
    room = max((limit * HELD_EVENTS_CEILING_FACTOR if ceiling is None else ceiling) - limit, 0)
    over = held[: max(len(held) - room, 0)]
    kept = {e.name for e in held[len(over) :]}
    lost: dict[str, list[str]] = {}
    for event in over:
        for dag in waiting[event.name]:
            lost.setdefault(dag, []).append(event.name)
    return Pruning(
        doomed=tuple(e.name for e in beyond if e.name not in kept),
        held=len(kept),
        lost={dag: tuple(names) for dag, names in lost.items()},
    )


__all__ = [
    "HELD_EVENTS_CEILING_FACTOR",
    "MAX_CURSOR_NAMES",
    "OUTLET_EVENTS_KEY",
    "AllOf",
    "AnyOf",
    "AssetConditionInvalid",
    "AssetRunDue",
    "Condition",
    "Cursor",
    "Leaf",
    "OutletEvent",
    "Pruning",
    "aliases_in",
    "asset_dags",
    "asset_run_name",
    "asset_watchers",
    "awaited",
    "condition_keys",
    "decide_asset_run",
    "evaluate",
    "event_holders",
    "event_keys",
    "events_to_prune",
    "expand_aliases",
    "outlet_events",
    "parse_condition",
    "pending_events",
    "recorded_at",
    "schedule_watchers",
]
