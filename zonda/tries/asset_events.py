"""A try's view of assets: `outlet_events` (what its success records), `triggering_asset_events`
(`triggering_dataset_events`: what an asset-triggered run consumed), `outlets`.

Plain objects, not the authoring classes: a key is anything with a `uri` (an `Asset`, a `Dataset`),
an alias (anything with a `name` and no `uri`), or a URI string. What the try set is reported with
its XComs under `zonda.schedules.assets.OUTLET_EVENTS_KEY` (`OutletEventAccessors.to_wire`), and the
controller turns it into AssetEvents when the try succeeds.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Generator, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from zonda.resources.asset_refs import sanitize_uri

#: The XCom key under which a try reports its `outlet_events` (extras, alias additions).
OUTLET_EVENTS_KEY = "__zonda_outlet_events"
#: Airflow's `OutletEventAccessor._PARTITION_KEY_MAX_LENGTH`.
PARTITION_KEY_MAX_LENGTH = 250


def _key(target: Any) -> tuple[str, str]:
    """("uri", uri), ("alias", name), or ("str", text): as in Airflow 2.10, a string key is a URI for
    `.extra` and an alias name for `.add`."""
    if isinstance(target, str):
        return "str", target
    uri = getattr(target, "uri", None)
    if uri is not None:
        return "uri", sanitize_uri(str(uri))
    name = getattr(target, "name", None)
    if name is not None:
        return "alias", str(name)
    raise KeyError(f"{target!r} is neither an asset nor an asset alias")


@dataclass
class OutletEventAccessor:
    """Airflow's `OutletEventAccessor`: set `extra` for the event of an outlet asset, or `add` assets to
    an alias outlet."""

    key: Any
    extra: dict[str, Any] = field(default_factory=dict)
    added: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    #: Airflow 3.2+'s: the partitions the try updated (`add_partitions`), one event each.
    partition_keys: set[str] = field(default_factory=set)

    def add_partitions(self, keys: str | list[str]) -> None:
        """Airflow's `OutletEventAccessor.add_partitions`: one event per key instead of one with the
        run's partition key (duplicates are one)."""
        if _key(self.key)[0] == "alias" or isinstance(self.key, _Alias):
            raise TypeError(
                "add_partitions() is not supported on asset alias outlet events; partition keys can only "
                "be attached to a concrete asset."
            )
        keys = [keys] if isinstance(keys, str) else list(keys)
        for key in keys:
            if not isinstance(key, str) or not key.strip():
                raise ValueError(f"partition_key must not be empty or whitespace-only; got {key!r}.")
            if len(key) > PARTITION_KEY_MAX_LENGTH:
                raise ValueError(
                    f"partition_key must be at most {PARTITION_KEY_MAX_LENGTH} characters; got {len(key)}."
                )
        self.partition_keys.update(keys)

    def add(self, asset: Any, extra: Mapping[str, Any] | None = None) -> None:
        self.added.append((_key(asset)[1], dict(extra or {})))


class OutletEventAccessors(Mapping[Any, OutletEventAccessor]):
    """`context["outlet_events"][asset]`: one accessor per asset or alias, created on first use."""

    def __init__(self) -> None:
        self._accessors: dict[tuple[str, str], OutletEventAccessor] = {}

    def __getitem__(self, target: Any) -> OutletEventAccessor:
        key = _key(target)
        if key not in self._accessors:
            self._accessors[key] = OutletEventAccessor(key=target)
        return self._accessors[key]

    def __iter__(self) -> Any:
        return iter(self._accessors)

    def __len__(self) -> int:
        return len(self._accessors)

    def to_wire(self) -> dict[str, Any]:
        """What the controller reads: extras by URI, and the assets added to aliases."""
        extras: dict[str, Any] = {}
        for (kind, value), accessor in self._accessors.items():
            if kind != "alias" and accessor.extra:
                extras[sanitize_uri(value) if kind == "str" else value] = accessor.extra
        aliases = [
            {"alias": k[1], "uri": uri, "extra": extra}
            for k, a in self._accessors.items()
            if k[0] != "uri"
            for uri, extra in a.added
        ]
        partitions = {
            (sanitize_uri(value) if kind == "str" else value): sorted(accessor.partition_keys)
            for (kind, value), accessor in self._accessors.items()
            if kind != "alias" and accessor.partition_keys
        }
        found: dict[str, Any] = {"extras": extras, "aliases": aliases} if extras or aliases else {}
        if partitions:
            found = {"extras": extras, "aliases": aliases, "partitions": partitions}
        return found


def drain_metadata(generator: Generator[Any, Any, Any], accessors: Any) -> Any:
    """Airflow's `yield Metadata(asset, extra)` from a task: each one sets that asset's event extra (or
    adds it to an alias); the generator's return value is the task's."""
    while True:
        try:
            item = next(generator)
        except StopIteration as stop:
            return stop.value
        target, extra = getattr(item, "target", None), getattr(item, "extra", None)
        if target is None or not isinstance(extra, dict) or accessors is None:
            continue
        alias = getattr(item, "alias", None)
        if alias:
            accessors[_Alias(alias)].add(target, extra)
        else:
            accessors[target].extra.update(extra)


@dataclass(frozen=True)
class _Alias:
    name: str


@dataclass(frozen=True)
class AssetRecord:
    """An asset as the context shows it (`event.asset.uri`, `event.dataset.uri`)."""

    uri: str
    name: str
    group: str = "asset"
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class AssetEventRecord:
    """Airflow's `AssetEvent` (`DatasetEvent`) as a task reads it."""

    id: str
    asset: AssetRecord
    extra: Mapping[str, Any]
    timestamp: dt.datetime
    source_dag_id: str | None
    source_run_id: str | None
    source_task_id: str | None
    source_map_index: int
    source_aliases: tuple[str, ...] = ()
    #: Airflow 3.2+'s `AssetEvent.partition_key`: the partition of the asset the event updated.
    partition_key: str | None = None

    @property
    def dataset(self) -> AssetRecord:
        return self.asset

    @property
    def uri(self) -> str:
        return self.asset.uri


class TriggeringEvents(dict[str, list[AssetEventRecord]]):
    """URI -> events; looked up by URI or by an `Asset`/`Dataset` (Airflow 3 keys by the asset)."""

    def __getitem__(self, key: Any) -> list[AssetEventRecord]:
        return super().__getitem__(_uri_of(key))

    def __contains__(self, key: object) -> bool:
        try:
            return super().__contains__(_uri_of(key))
        except (KeyError, ValueError):
            return False


def _uri_of(key: Any) -> str:
    kind, value = _key(key)
    return sanitize_uri(value) if kind == "str" else value


#: The namespace's AssetEvent resources (their bodies), read once and only when a task asks
#: `inlet_events` for an asset (the runner reads them from the apiserver).
AssetEventLister = Callable[[], Iterable[Mapping[str, Any]]]


class InletEventsAccessor(Mapping[Any, list[AssetEventRecord]]):
    """`context["inlet_events"][asset_or_alias]`: every event of the asset (or emitted through the
    alias), oldest first, as Airflow 3's `InletEventsAccessor` asks its API server for them (ascending
    by timestamp: `[-1]` is the most recent). With `lister` (a try the runner runs on a cluster) they
    are the namespace's AssetEvents that still exist (each asset keeps its newest
    `eventsHistoryLimit`), read at the first access; the events this run consumed are always among them
    (the run keeps its copies). Without (`zonda dags test`, a callback) only those. `for_asset(uri=)`,
    `for_asset(name=)` and `for_asset_alias(name=)` are Airflow 3's spellings."""

    def __init__(self, events: TriggeringEvents, lister: AssetEventLister | None = None) -> None:
        self._events = events
        self._lister = lister
        self._listed: list[AssetEventRecord] | None = None

    def _all(self) -> list[AssetEventRecord]:
        own = [e for events in self._events.values() for e in events]
        if self._lister is None:
            return own
        if self._listed is None:
            self._listed = [r for r in map(record_from_body, self._lister()) if r is not None]
        seen = {e.id for e in self._listed}
        return [*self._listed, *(e for e in own if e.id not in seen)]

    def __getitem__(self, key: Any) -> AssetEventsQuery:
        kind, value = _key(key)
        found = self._all()
        if kind == "alias":
            found = [e for e in found if value in e.source_aliases]
        else:
            uri = sanitize_uri(value) if kind == "str" else value
            found = [e for e in found if e.uri == uri]
        return AssetEventsQuery(found)

    def for_asset(self, *, name: str | None = None, uri: str | None = None) -> AssetEventsQuery:
        """Airflow 3's `inlet_events.for_asset(name=..., uri=...)` (a name is this URI's asset here)."""
        if uri is None and name is None:
            raise ValueError("Either name or uri must be provided")
        return self[uri if uri is not None else name]

    def for_asset_alias(self, *, name: str) -> AssetEventsQuery:
        """Airflow 3's `inlet_events.for_asset_alias(name=...)`."""
        return self[_Alias(name)]

    def __iter__(self) -> Any:
        return iter(self._events)

    def __len__(self) -> int:
        return len(self._events)


class AssetEventsQuery(list[AssetEventRecord]):
    """One asset's (or alias's) events as `inlet_events[...]` gives them: a list, oldest first, with
    Airflow 3's query methods (`airflow.sdk.execution_time.context.InletEventsAccessor`), each narrowing
    this same object and returning it, so they chain: `inlet_events[a].after("2026-03-01T00:00:00Z")
    .ascending(False).limit(5)`. As Airflow's API server (`routes/asset_events.py`): `after` and `before`
    bound the event's timestamp inclusively, `ascending(False)` is newest first, `limit(n)` keeps the
    first n of that order (0 or None: all). A bound without a timezone is refused with Airflow's
    reason (pydantic's `AwareDatetime`), here at the call rather than at the first read."""

    def __init__(self, events: Iterable[AssetEventRecord]) -> None:
        self._every = list(events)
        self._after: dt.datetime | None = None
        self._before: dt.datetime | None = None
        self._ascending = True
        self._limit: int | None = None
        super().__init__(self._select())

    def after(self, after: str | dt.datetime) -> AssetEventsQuery:
        self._after = _aware(after, "after")
        return self._refresh()

    def before(self, before: str | dt.datetime) -> AssetEventsQuery:
        self._before = _aware(before, "before")
        return self._refresh()

    def ascending(self, ascending: bool = True) -> AssetEventsQuery:
        self._ascending = bool(ascending)
        return self._refresh()

    def limit(self, limit: int | None) -> AssetEventsQuery:
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            raise ValueError(f"limit: a non-negative int or None, not {limit!r}")
        self._limit = limit
        return self._refresh()

    def _select(self) -> list[AssetEventRecord]:
        found = [
            e
            for e in self._every
            if (self._after is None or e.timestamp >= self._after)
            and (self._before is None or e.timestamp <= self._before)
        ]
        found.sort(key=lambda e: (e.timestamp, e.id), reverse=not self._ascending)
        return found[: self._limit] if self._limit else found

    def _refresh(self) -> AssetEventsQuery:
        self[:] = self._select()
        return self


def _aware(moment: str | dt.datetime, field_name: str) -> dt.datetime:
    """An aware datetime from a datetime or an ISO 8601 string, as Airflow's `AwareDatetime` field."""
    if isinstance(moment, str):
        try:
            moment = dt.datetime.fromisoformat(moment.replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(f"{field_name}: {moment!r} is not an ISO 8601 date-time") from None
    if not isinstance(moment, dt.datetime):
        raise TypeError(f"{field_name}: a datetime or an ISO 8601 string, not {type(moment).__name__}")
    if moment.tzinfo is None:
        raise ValueError(f"{field_name}: Input should have timezone info ({moment.isoformat()})")
    return moment


def record_from_body(body: Mapping[str, Any]) -> AssetEventRecord | None:
    """An AssetEvent resource as a task reads it; None when it has no URI."""
    spec, meta = body.get("spec") or {}, body.get("metadata") or {}
    if not spec.get("uri"):
        return None
    moment = spec.get("timestamp") or meta.get("creationTimestamp")
    if moment is None:
        return None
    return _record(
        {
            "name": meta.get("name"),
            "uri": sanitize_uri(str(spec["uri"])),
            "timestamp": moment,
            **{k: spec[k] for k in ("extra", "sourceDag", "sourceRun", "sourceTask", "sourceMapIndex",
                                     "aliases", "partitionKey") if k in spec},
        }
    )  # fmt: skip


def _record(event: Mapping[str, Any]) -> AssetEventRecord:
    uri = str(event.get("uri"))
    moment = dt.datetime.fromisoformat(str(event["timestamp"]).replace("Z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return AssetEventRecord(
        id=str(event.get("name")),
        asset=AssetRecord(uri=uri, name=uri),
        extra=dict(event.get("extra") or {}),
        timestamp=moment,
        source_dag_id=event.get("sourceDag"),
        source_run_id=event.get("sourceRun"),
        source_task_id=event.get("sourceTask"),
        source_map_index=int(event.get("sourceMapIndex", -1)),
        source_aliases=tuple(event.get("aliases") or ()),
        partition_key=event.get("partitionKey"),
    )


def triggering_events(wire: Iterable[Mapping[str, Any]]) -> TriggeringEvents:
    """The run's consumed events (`DagRunSpec.triggeringAssetEvents`, camelCase) grouped by URI."""
    grouped = TriggeringEvents()
    for event in wire:
        record = _record(event)  # a run's copy always has its timestamp
        dict.setdefault(grouped, record.uri, []).append(record)
    return grouped


def outlet_records(wire: Iterable[Mapping[str, Any]]) -> list[AssetRecord]:
    """The task's `outlets` (assets only; aliases are resolved by the task)."""
    return [
        AssetRecord(uri=str(o["uri"]), name=str(o.get("name") or o["uri"]), extra=dict(o.get("extra") or {}))
        for o in wire
        if o.get("uri")
    ]
