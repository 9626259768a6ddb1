"""The AssetEvents by asset, and the DAGs by the assets they name, kept from the watches.

A consumer DAG's pass and an asset's pass listed every AssetEvent of the namespace (and the asset's
every DAG): with 1,000 assets and 10,000 events each pass read all 10,000, and an event woke one
asset pass and its consumers' passes, so the cost of an event grew with all events kept. Here a
namespace is listed once (`seed`), the watch keeps it current (`observed`, `deleted`), and a pass
reads only the events of the keys it asks for (a URI, or `alias:<name>` for the events emitted
through an alias).

As `controller.reconcilers.dags.DagRunRefs`: an entry is never replaced by an older body
(resourceVersion), and a deletion leaves a tombstone so a list answered before it cannot bring the
object back. An event someone creates is seen when the watch delivers it, as a list made a moment
earlier would have missed it too; the watch handler updates the index before it wakes the passes the
event concerns, so those passes see it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from controller.kube import DAGS, KubeApi
from zonda.resources.asset_models import ASSETEVENTS, ASSETS, TriggeringEvent, event_from_body, sanitize_uri
from zonda.schedules import assets

Key = tuple[str, str]  # namespace, name


def _version(body: Mapping[str, Any]) -> int:
    value = (body.get("metadata") or {}).get("resourceVersion")
    return int(value) if isinstance(value, str) and value.isdigit() else 0


def _key(body: Mapping[str, Any]) -> Key:
    meta = body.get("metadata") or {}
    return meta.get("namespace", ""), meta.get("name", "")


def asset_keys_of(spec: Mapping[str, Any]) -> frozenset[str]:
    """The assets a DAG spec names (schedule and outlets), as keys; an invalid schedule names none."""
    return schedule_keys_of(spec) | outlet_keys_of(spec)


def schedule_keys_of(spec: Mapping[str, Any]) -> frozenset[str]:
    """The keys (URIs, `alias:<name>`) of a DAG's asset schedule; none when it has none or it is invalid."""
    raw = spec.get("assetSchedule")
    if raw is None:
        return frozenset()
    with contextlib.suppress(assets.AssetConditionInvalid):
        return assets.condition_keys(assets.parse_condition(raw))
    return frozenset()


def outlet_keys_of(spec: Mapping[str, Any]) -> frozenset[str]:
    """The URIs and `alias:<name>` keys of the outlets of a DAG's tasks."""
    keys: set[str] = set()
    for task in spec.get("tasks") or []:
        for outlet in (task.get("outlets") if isinstance(task, Mapping) else None) or []:
            if isinstance(outlet, Mapping) and isinstance(outlet.get("alias"), str):
                keys.add(f"alias:{outlet['alias']}")
                continue
            with contextlib.suppress(ValueError, TypeError, KeyError):
                keys.add(sanitize_uri(outlet["uri"]))
    return frozenset(keys)


@dataclass
class _Indexed:
    """Objects by (namespace, name), each filed under some keys, never replaced by an older body."""

    objects: dict[Key, tuple[int, Any, frozenset[str]]] = field(default_factory=dict)
    by_key: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    gone: dict[Key, int] = field(default_factory=dict)
    seeded: set[str] = field(default_factory=set)

    def put(self, key: Key, version: int, value: Any, keys: frozenset[str]) -> None:
        if version <= self.gone.get(key, -1):
            return
        kept = self.objects.get(key)
        if kept is not None and version < kept[0]:
            return
        self.gone.pop(key, None)
        self._drop(key)
        self.objects[key] = (version, value, keys)
        for k in keys:
            self.by_key.setdefault((key[0], k), set()).add(key[1])

    def remove(self, key: Key, version: int | None) -> None:
        kept = self.objects.get(key)
        self.gone[key] = max(version or 0, kept[0] if kept else 0, self.gone.get(key, 0))
        self._drop(key)

    def _drop(self, key: Key) -> None:
        kept = self.objects.pop(key, None)
        if kept is None:
            return
        for k in kept[2]:
            names = self.by_key.get((key[0], k))
            if names is not None:
                names.discard(key[1])
                if not names:
                    del self.by_key[(key[0], k)]

    def names(self, namespace: str, keys: Iterable[str]) -> list[str]:
        found: set[str] = set()
        for k in keys:
            found |= self.by_key.get((namespace, k), set())
        return sorted(found)

    def value(self, namespace: str, name: str) -> Any:
        return self.objects[(namespace, name)][1]


@dataclass
class AssetEventIndex:
    """AssetEvents by the keys they satisfy (`zonda.schedules.assets.event_keys`: URI and aliases)."""

    index: _Indexed = field(default_factory=_Indexed)

    def observed(self, body: Mapping[str, Any]) -> None:
        event = event_from_body(dict(body))
        keys = assets.event_keys(event) if event is not None else frozenset()
        self.index.put(_key(body), _version(body), event, keys)

    def deleted(self, body: Mapping[str, Any]) -> None:
        self.index.remove(_key(body), _version(body))

    def forget(self, namespace: str, name: str) -> None:
        """We deleted it: no pass counts it again, even before the watch reports the deletion."""
        self.index.remove((namespace, name), None)

    def of_keys(self, namespace: str, keys: Iterable[str]) -> list[TriggeringEvent]:
        """The events of these keys, by name (the order the apiserver lists them in)."""
        return [self.index.value(namespace, name) for name in self.index.names(namespace, keys)]

    def relist(self) -> None:
        """List each namespace again at its next use (what is kept stays, never replaced by older)."""
        self.index.seeded.clear()

    async def seed(self, kube: KubeApi, namespace: str) -> None:
        if namespace in self.index.seeded:
            return
        for body in await kube.list_custom(ASSETEVENTS, namespace):
            body.setdefault("metadata", {}).setdefault("namespace", namespace)
            self.observed(body)
        self.index.seeded.add(namespace)


@dataclass
class AssetDagIndex:
    """The DAGs' specs as far as assets go (schedule, outlets), by the asset keys they name."""

    index: _Indexed = field(default_factory=_Indexed)

    def observed(self, body: Mapping[str, Any]) -> None:
        spec = body.get("spec") or {}
        keys = asset_keys_of(spec)
        kept = {
            "assetSchedule": spec.get("assetSchedule"),
            "tasks": [
                {"outlets": t.get("outlets")}
                for t in spec.get("tasks") or []
                if isinstance(t, Mapping) and t.get("outlets")
            ],
        }
        self.index.put(_key(body), _version(body), kept, keys)

    def deleted(self, body: Mapping[str, Any]) -> None:
        self.index.remove(_key(body), _version(body))

    def relist(self) -> None:
        self.index.seeded.clear()

    def naming(self, namespace: str, key: str) -> dict[str, Mapping[str, Any]]:
        """DAG name -> its asset-relevant spec, for the DAGs that name `key` (a URI, `alias:<name>`)."""
        return {name: self.index.value(namespace, name) for name in self.index.names(namespace, [key])}

    async def seed(self, kube: KubeApi, namespace: str) -> None:
        if namespace in self.index.seeded:
            return
        for body in await kube.list_custom(DAGS, namespace):
            body.setdefault("metadata", {}).setdefault("namespace", namespace)
            self.observed(body)
        self.index.seeded.add(namespace)


def alias_outlets(specs: Iterable[Mapping[str, Any]]) -> frozenset[str]:
    """The alias names some task of these DAG specs has as an outlet."""
    return frozenset(
        k.removeprefix("alias:") for spec in specs for k in outlet_keys_of(spec) if k.startswith("alias:")
    )


@dataclass
class AliasResolutions:
    """Which assets each AssetAlias resolved to (`Asset.status.aliases`, from the Asset watch).

    Only ever grows, as Airflow's alias -> dataset association rows: the union of what the watch and
    our own asset passes reported, so no resourceVersion ordering is needed.
    """

    uris: dict[tuple[str, str], set[str]] = field(default_factory=dict)  # (namespace, alias) -> URIs
    aliases: dict[tuple[str, str], set[str]] = field(default_factory=dict)  # (namespace, URI) -> aliases
    seeded: set[str] = field(default_factory=set)

    def resolved(self, namespace: str, uri: str, aliases: Iterable[str]) -> None:
        for alias in aliases:
            self.uris.setdefault((namespace, alias), set()).add(uri)
            self.aliases.setdefault((namespace, uri), set()).add(alias)

    def observed(self, body: Mapping[str, Any]) -> None:
        uri = (body.get("spec") or {}).get("uri")
        names = (body.get("status") or {}).get("aliases") or []
        if isinstance(uri, str) and names:
            with contextlib.suppress(ValueError):
                self.resolved(_key(body)[0], sanitize_uri(uri), [str(n) for n in names])

    def of_aliases(self, namespace: str, aliases: Iterable[str]) -> dict[str, frozenset[str]]:
        """Alias name -> the URIs it resolved to, for those that resolved."""
        found = {a: frozenset(self.uris.get((namespace, a), ())) for a in aliases}
        return {a: uris for a, uris in found.items() if uris}

    def aliases_of(self, namespace: str, uri: str) -> frozenset[str]:
        return frozenset(self.aliases.get((namespace, uri), ()))

    def relist(self) -> None:
        self.seeded.clear()

    async def seed(self, kube: KubeApi, namespace: str) -> None:
        if namespace in self.seeded:
            return
        for body in await kube.list_custom(ASSETS, namespace):
            body.setdefault("metadata", {}).setdefault("namespace", namespace)
            self.observed(body)
        self.seeded.add(namespace)
