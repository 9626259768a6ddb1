"""When a DAG scheduled by a `PartitionedAssetTimetable` is due: one run per partition key.

Airflow 3.2+ (`AssetManager._queue_partitioned_dags`, `SchedulerJobRunner.
_create_dagruns_for_partitioned_asset_dags`) maps each asset event's partition key through the
consumer's mapper for that asset (`partition_mapper_config`, else `default_partition_mapper`) to one
or more downstream keys, queues a row per (DAG, downstream key), and creates a run for a key once the
DAG's asset condition holds over the assets with events for that key (a rollup's asset only once the
window's upstream keys arrived, as its wait policy counts them). The run carries the key.

Here, as for other asset-triggered runs (`zonda.schedules.assets`), the queue is computed from the
events, not stored: the run of a key is named from the key and the events it consumes, so a
restarted or second controller makes the same name and gets 409 — one run per key and satisfying
set. What Airflow does not say and Zonda decides:

* an event without a partition key, or whose key the mapper refuses (`AllowedKeyMapper`, a format
  that does not parse), or that fans out past `max_downstream_keys` (default 1000, Airflow's
  `[scheduler] partition_mapper_max_downstream_keys`), triggers nothing; `skipped` says why (Airflow
  writes a log row);
* the consumed horizon (`Cursor`) does not move past an event still waiting for its key, so a key
  completed late (a slow producer) still finds its earlier events;
* the run's logical date is its newest event's time and its data interval spans the key's events, as
  Zonda's other asset-triggered runs (Airflow 3.2 gives a partitioned run no data interval).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from zonda.resources.asset_models import TriggeringEvent
from zonda.schedules import assets
from zonda.timetables import DataInterval
from zonda.timetables.base import coerce_utc
from zonda.timetables.partitions import (
    DEFAULT_MAX_DOWNSTREAM_KEYS,
    PartitionMapper,
    RollupMapper,
    asset_partitions_from_manifest,
)


@dataclass(frozen=True)
class Partitions:
    """A DAG's `spec.assetPartitions`, read: the default mapper and each asset's (by URI)."""

    default: PartitionMapper
    by_uri: Mapping[str, PartitionMapper] = field(default_factory=dict)

    @classmethod
    def from_manifest(cls, raw: object) -> Partitions:
        default, by_uri = asset_partitions_from_manifest(raw)
        return cls(default, by_uri)

    def mapper(self, uri: str) -> PartitionMapper:
        return self.by_uri.get(uri, self.default)


@dataclass(frozen=True)
class PartitionDecision:
    """The runs to create (oldest key first), the events now fully consumed, the events that still
    wait for a key, and why events were not mapped (event name -> reason)."""

    runs: tuple[assets.AssetRunDue, ...] = ()
    consumed: tuple[TriggeringEvent, ...] = ()
    waiting: tuple[TriggeringEvent, ...] = ()
    skipped: Mapping[str, str] = field(default_factory=dict)


def target_keys(mapper: PartitionMapper, key: str) -> list[str]:
    """The downstream keys an upstream key maps to (Airflow's `mapper.to_downstream`, a fan-out's list)."""
    mapped = mapper.to_downstream(key)
    return [mapped] if isinstance(mapped, str) else list(dict.fromkeys(mapped))


def partition_run_name(dag_name: str, key: str, event_names: Iterable[str]) -> str:
    """The run of a key and its events: the key is in the hash, so one event fanned out to several keys
    makes one run each."""
    return assets.asset_run_name(dag_name, [*event_names, f"\x01partition={key}"])


def decide_partition_runs(
    dag_name: str,
    condition: assets.Condition,
    partitions: Partitions,
    pending: Sequence[TriggeringEvent],
    *,
    consumed: frozenset[tuple[str, str]] = frozenset(),
    limit: int,
) -> PartitionDecision:
    """The partitioned runs `pending` (the DAG's events past its cursor, oldest first) make due.

    `consumed`: (partition key, event name) pairs the DAG's existing runs consumed; `limit`: how many
    runs may be created now (maxActiveRuns' room)."""
    skipped: dict[str, str] = {}
    by_key: dict[str, list[TriggeringEvent]] = {}
    open_keys: dict[str, set[str]] = {}
    for event in pending:
        if not event.partition_key:
            skipped[event.name] = "has no partition key: a partition-aware DAG is not triggered by it"
            continue
        mapper = partitions.mapper(event.uri)
        try:
            keys = target_keys(mapper, event.partition_key)
        except Exception as error:  # any mapper error is the event's, as Airflow's broad except
            skipped[event.name] = (
                f"partition key {event.partition_key!r} could not be mapped by {type(mapper).__name__}: "
                f"{type(error).__name__}: {error}"
            )
            continue
        cap = mapper.max_downstream_keys or DEFAULT_MAX_DOWNSTREAM_KEYS
        if len(keys) > cap:
            skipped[event.name] = (
                f"partition key {event.partition_key!r} maps to {len(keys)} downstream keys, more than "
                f"max_downstream_keys={cap}: no runs for it"
            )
            continue
        open_keys[event.name] = {k for k in keys if (k, event.name) not in consumed}
        for key in open_keys[event.name]:
            by_key.setdefault(key, []).append(event)

    runs: list[assets.AssetRunDue] = []
    for key in sorted(by_key, key=lambda k: (min(assets.recorded_at(e) for e in by_key[k]), k)):
        if len(runs) >= limit:
            break
        events = by_key[key]
        if not assets.evaluate(condition, _satisfied(key, events, partitions)):
            continue
        runs.append(_run(dag_name, key, events, partitions))
        for event in events:
            open_keys[event.name].discard(key)
    fully = tuple(e for e in pending if e.name in open_keys and not open_keys[e.name])
    waiting = tuple(e for e in pending if open_keys.get(e.name))
    return PartitionDecision(tuple(runs), fully, waiting, skipped)


def _satisfied(key: str, events: Sequence[TriggeringEvent], partitions: Partitions) -> frozenset[str]:
    """The condition's keys (URIs, aliases) the events of one downstream key satisfy; a rollup's asset
    only once its wait policy is met by the upstream keys that arrived (Airflow's
    `_resolve_asset_partition_status`)."""
    found: set[str] = set()
    by_uri: dict[str, set[str]] = {}
    for event in events:
        by_uri.setdefault(event.uri, set()).add(str(event.partition_key))
    for uri, arrived in by_uri.items():
        mapper = partitions.mapper(uri)
        if isinstance(mapper, RollupMapper):
            try:
                expected = mapper.to_upstream(key)
            except Exception:  # a key the window cannot expand never completes
                continue
            if not mapper.wait_policy.is_satisfied(len(arrived & expected), len(expected)):
                continue
        found.add(uri)
    for event in events:
        if event.uri in found:
            found.update(assets.event_keys(event))
    return frozenset(found)


def _run(
    dag_name: str, key: str, events: Sequence[TriggeringEvent], partitions: Partitions
) -> assets.AssetRunDue:
    ordered = sorted(events, key=lambda e: (coerce_utc(e.timestamp), e.name))
    first, last = coerce_utc(ordered[0].timestamp), coerce_utc(ordered[-1].timestamp)
    return assets.AssetRunDue(
        run_name=partition_run_name(dag_name, key, [e.name for e in ordered]),
        events=tuple(ordered),
        logical_date=last,
        data_interval=DataInterval(first, last),
        partition_key=key,
        partition_date=_partition_date(partitions, key, ordered),
    )


def _partition_date(partitions: Partitions, key: str, events: Sequence[TriggeringEvent]) -> datetime | None:
    """The run's partition start (Airflow's `to_partition_date`) when every asset's mapper agrees."""
    dates = set()
    for uri in {e.uri for e in events}:
        try:
            dates.add(partitions.mapper(uri).to_partition_date(key))
        except Exception:
            dates.add(None)
    return dates.pop() if len(dates) == 1 else None


__all__ = [
    "PartitionDecision",
    "Partitions",
    "decide_partition_runs",
    "partition_run_name",
    "target_keys",
]
