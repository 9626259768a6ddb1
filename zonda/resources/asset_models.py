"""The `Asset` and `AssetEvent` resources' shapes, and what an asset reference in a DAG spec is.

Airflow's data-aware scheduling (2.x Datasets, 3.x Assets) without a database: an asset is a
resource named from its URI (`asset_name`), each update of it is an `AssetEvent` resource named from
what produced it (`asset_event_name`: run, task, map index, try and asset), so a controller that
restarts, or a second one, gets 409 AlreadyExists instead of writing an event twice. A user (or any
system) creating an `AssetEvent` with kubectl is Airflow 3's `POST /assets/events`.

Events are owned by their `Asset` (garbage collection deletes them with it); the controller keeps at
most `Asset.spec.eventsHistoryLimit` (default 100) of an asset's events, deleting the oldest first.

URIs are checked and normalised as Airflow's `_sanitize_uri` does (`sanitize_uri`).
"""

from __future__ import annotations

import hashlib
import json
import re
from datetime import datetime
from typing import Any

from pydantic import Field, field_validator

from zonda.resources.asset_refs import AssetRef, AssetWatcherRef, sanitize_uri
from zonda.resources.json_values import to_json_safe
from zonda.resources.models import CrdModel, JsonObject
from zonda.resources.wire import parse_time

ASSETS = "assets"
ASSETEVENTS = "assetevents"
#: Label on an AssetEvent the controller writes: the asset's resource name (`asset_name`).
LABEL_ASSET = "zonda.dev/asset"
#: Events of one asset kept when its spec says nothing.
DEFAULT_EVENTS_HISTORY_LIMIT = 100
_INVALID = re.compile(r"[^a-z0-9-]+")


def _slug(text: str, limit: int) -> str:
    return _INVALID.sub("-", text.lower()).strip("-")[:limit].strip("-") or "asset"


def _digest(*parts: object) -> str:
    return hashlib.sha256("\x00".join(str(p) for p in parts).encode()).hexdigest()[:10]


def asset_name(uri: str) -> str:
    """The `Asset` resource's name for a (sanitised) URI: readable slug plus a hash of the whole URI."""
    tail = uri.split("://", 1)[-1]
    return f"{_slug(tail, 40)}-{_digest(uri)}"


def asset_event_name(
    run: str, task_id: str, map_index: int, try_number: int, uri: str, partition: str | None = None
) -> str:
    """One event per producing try and asset (and partition the task added): the same inputs after a
    restart give the same name."""
    parts: tuple[object, ...] = (run, task_id, map_index, try_number, uri)
    if partition is not None:
        parts = (*parts, partition)
    return f"{_slug(run, 30)}-{_slug(task_id, 16)}-{_digest(*parts)}"


def watcher_trigger_name(uri: str, watcher: AssetWatcherRef) -> str:
    """The `Trigger` resource that runs an asset's watcher: from the URI, the watcher's name and its
    trigger, so every controller makes the same one, and a changed trigger is a new one."""
    kwargs = json.dumps(watcher.kwargs, sort_keys=True, default=str)
    return f"watch-{_slug(watcher.name, 30)}-{_digest(uri, watcher.name, watcher.classpath, kwargs)}"


def watcher_event_name(trigger: str, payload: Any, key: str | None = None) -> str:
    """The AssetEvent a watcher's event records: from its Trigger and the event's payload. Airflow asks
    a trigger for events "the same wherever the trigger is run" so that duplicates from two triggerers
    can be dropped: the same event, yielded again after a failover, has this name again and gets 409.
    `key` is the trigger's `event_key`: one occurrence of what a consuming trigger reports (a deleted
    file), so equal payloads of different occurrences are different events."""
    canonical = json.dumps(to_json_safe(payload, path="event"), sort_keys=True, separators=(",", ":"))
    parts = (trigger, canonical) if key is None else (trigger, canonical, key)
    return f"{trigger[:40].rstrip('-')}-{_digest(*parts)}"


class AssetSpec(CrdModel):
    uri: str = Field(min_length=1, description="The asset's URI.")
    name: str | None = None
    group: str | None = None
    extra: JsonObject = Field(default_factory=dict)
    events_history_limit: int | None = Field(
        default=None, ge=1, description="Keep this many newest events of the asset (unset: 100)."
    )

    @field_validator("uri")
    @classmethod
    def _valid_uri(cls, uri: str) -> str:
        return sanitize_uri(uri)


class AssetStatus(CrdModel):
    last_event: str | None = Field(default=None, description="Name of the newest AssetEvent.")
    last_event_time: datetime | None = None
    events: int = Field(default=0, description="AssetEvents of this asset kept.")
    producing_dags: list[str] = Field(default_factory=list, description="DAGs with a task that outputs it.")
    consuming_dags: list[str] = Field(default_factory=list, description="DAGs scheduled on it.")
    producing: str | None = Field(default=None, description="producingDags joined by commas (kubectl).")
    consuming: str | None = Field(default=None, description="consumingDags joined by commas (kubectl).")
    aliases: list[str] = Field(
        default_factory=list,
        description="AssetAliases an event of this asset was ever emitted through: a DAG scheduled on one "
        "of them is also triggered by this asset's later events (Airflow's alias resolution).",
    )
    watchers: list[str] = Field(
        default_factory=list, description="AssetWatchers the schedules of its consuming DAGs give it."
    )
    held_events: int = Field(
        default=0,
        description="Events kept past eventsHistoryLimit because a consuming DAG has not consumed them "
        "(at most 10 x the limit in all).",
    )
    unconsumed_deleted: str | None = Field(
        default=None,
        description="The last time the ceiling (10 x eventsHistoryLimit) deleted events a consuming DAG "
        "had not consumed: which DAG, how many.",
    )


class AssetEventSpec(CrdModel):
    """One update of an asset: Airflow's `AssetEvent` (`DatasetEvent`)."""

    uri: str = Field(min_length=1, description="The asset's URI.")
    extra: JsonObject = Field(default_factory=dict)
    timestamp: datetime | None = Field(
        default=None, description="When the asset was updated; unset: the object's creation time."
    )
    source_dag: str | None = None
    source_run: str | None = None
    source_task: str | None = None
    source_map_index: int = -1
    source_try: int | None = None
    source_watcher: str | None = Field(
        default=None, description="The AssetWatcher whose trigger fired the event (its Trigger's name)."
    )
    aliases: list[str] = Field(
        default_factory=list, description="AssetAliases (DatasetAliases) the event was emitted through."
    )
    partition_key: str | None = Field(
        default=None,
        max_length=250,
        description="The partition of the asset the event updates (Airflow 3.2+): its producing run's "
        "partitionKey, or one its task added (outlet_events[asset].add_partitions).",
    )

    @field_validator("uri")
    @classmethod
    def _valid_uri(cls, uri: str) -> str:
        return sanitize_uri(uri)


class TriggeringEvent(CrdModel):
    """An event an asset-triggered run consumed, as its tasks see it (`triggering_asset_events`)."""

    name: str = Field(description="The AssetEvent's name.")
    uri: str
    timestamp: datetime
    extra: JsonObject = Field(default_factory=dict)
    source_dag: str | None = None
    source_run: str | None = None
    source_task: str | None = None
    source_map_index: int = -1
    aliases: list[str] = Field(default_factory=list)
    partition_key: str | None = None
    recorded: datetime | None = Field(
        default=None,
        description="When the apiserver recorded the AssetEvent (its creationTimestamp): consumers take "
        "events in this order, whatever their timestamp says.",
    )


def event_from_body(body: dict[str, Any]) -> TriggeringEvent | None:
    """An AssetEvent resource as a consumer sees it; None when its spec is invalid (told elsewhere)."""
    try:
        spec = AssetEventSpec.model_validate(body.get("spec") or {})
    except ValueError:
        return None
    recorded = parse_time(body["metadata"].get("creationTimestamp"))
    timestamp = spec.timestamp or recorded
    if timestamp is None:
        return None
    return TriggeringEvent(
        name=body["metadata"]["name"],
        uri=spec.uri,
        timestamp=timestamp,
        extra=spec.extra,
        source_dag=spec.source_dag,
        source_run=spec.source_run,
        source_task=spec.source_task,
        source_map_index=spec.source_map_index,
        aliases=spec.aliases,
        partition_key=spec.partition_key,
        recorded=recorded,
    )


__all__ = [
    "ASSETEVENTS",
    "ASSETS",
    "DEFAULT_EVENTS_HISTORY_LIMIT",
    "LABEL_ASSET",
    "AssetEventSpec",
    "AssetRef",
    "AssetSpec",
    "AssetStatus",
    "AssetWatcherRef",
    "TriggeringEvent",
    "asset_event_name",
    "asset_name",
    "event_from_body",
    "sanitize_uri",
    "watcher_event_name",
    "watcher_trigger_name",
]
