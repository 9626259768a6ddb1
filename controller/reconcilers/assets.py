"""Assets: record a producing try's events, keep each `Asset`'s status and history bounded.

`record_events` creates the events a run's pass decided (`zonda.passes.produced_assets`), in the
run reconciler before it writes the status that says a task succeeded, so a crash in between leaves
events the next pass finds by name (409), never a success without its events.
`AssetReconciler` gathers an asset's DAGs and events, asks
`zonda.schedules.assets` for its producers, consumers and the events past its history limit, deletes
those and writes the status. The consumer side is the DAG reconciler's (`controller.reconcilers.dags`).

`ZONDA_FAULT_EXIT_AT=asset-event-recorded` makes the process SIGKILL itself right after it created an
event (with `asset-run-due`, the DAG reconciler's "about to create the consumer run", before anything
consumes it): the cluster tests' deterministic "controller killed here".
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from controller.kube import DAGS, TRIGGERS, AlreadyExists, Conflict, KubeApi
from controller.processes.faults import fault_point
from controller.reconcilers.asset_index import AliasResolutions, AssetDagIndex, AssetEventIndex
from controller.reconcilers.common import StatusWriter, parse_status
from controller.reconcilers.trigger_resources import watcher_trigger_body
from zonda.passes.produced_assets import ProducedAssetEvent
from zonda.resources.asset_models import (
    ASSETEVENTS,
    ASSETS,
    DEFAULT_EVENTS_HISTORY_LIMIT,
    LABEL_ASSET,
    AssetSpec,
    AssetStatus,
    AssetWatcherRef,
    TriggeringEvent,
    asset_name,
    event_from_body,
)
from zonda.resources.models import API_VERSION, DagStatus
from zonda.resources.wire import LABEL_DAG, label_value, parse_time
from zonda.schedules import assets

logger = logging.getLogger(__name__)


async def ensure_asset(kube: KubeApi, namespace: str, uri: str) -> Mapping[str, Any]:
    """The Asset named from the URI, created when missing."""
    name = asset_name(uri)
    found = await kube.get_custom(ASSETS, namespace, name)
    if found is not None:
        return found
    body = {
        "apiVersion": API_VERSION,
        "kind": "Asset",
        "metadata": {"name": name, "namespace": namespace},
        "spec": AssetSpec(uri=uri).to_wire(),
    }
    try:
        return await kube.create_custom(ASSETS, namespace, body)
    except AlreadyExists:
        return await kube.get_custom(ASSETS, namespace, name) or body


async def record_events(
    kube: KubeApi, run: Mapping[str, Any], produced: Iterable[ProducedAssetEvent]
) -> None:
    """Create the AssetEvents a pass decided (`zonda.passes.produced_assets`), each owned by its Asset."""
    namespace = run["metadata"]["namespace"]
    for event in produced:
        owner = await ensure_asset(kube, namespace, event.spec.uri)
        body = {
            "apiVersion": API_VERSION,
            "kind": "AssetEvent",
            "metadata": {
                "name": event.name,
                "namespace": namespace,
                "labels": {
                    LABEL_ASSET: owner["metadata"]["name"],
                    LABEL_DAG: label_value(event.spec.source_dag or ""),
                },
                "ownerReferences": [
                    {
                        "apiVersion": API_VERSION,
                        "kind": "Asset",
                        "name": owner["metadata"]["name"],
                        "uid": owner["metadata"]["uid"],
                    }
                ],
            },
            "spec": event.spec.to_wire(),
        }
        try:
            await kube.create_custom(ASSETEVENTS, namespace, body)
        except AlreadyExists:
            continue  # recorded by an earlier pass (a restart, another controller)
        fault_point("asset-event-recorded")


@dataclass
class AssetReconciler:
    """An Asset's status (producing and consuming DAGs, last event) and its bounded event history.

    Keyed by URI: an event created with kubectl for an asset nobody declared creates the Asset.
    """

    kube: KubeApi
    writer: StatusWriter
    #: The AssetEvents and the DAGs by asset, from the watches (the controller's); None: list each pass.
    events: AssetEventIndex | None = None
    dags: AssetDagIndex | None = None
    aliases: AliasResolutions | None = None
    trigger_shards: int = 16

    async def reconcile(self, namespace: str, uri: str) -> datetime | None:
        asset = await ensure_asset(self.kube, namespace, uri)
        try:
            spec = AssetSpec.model_validate(asset.get("spec") or {})
        except ValidationError as exc:
            await self.kube.emit_event(asset, reason="InvalidSpec", message=str(exc), warning=True)
            return None
        old = parse_status(AssetStatus, asset.get("status"))
        events = [e for e in await self._events(namespace, spec.uri) if e.uri == spec.uri]
        # an alias, once resolved to this asset, stays resolved (Airflow's alias -> dataset rows)
        aliases = sorted({*old.aliases, *(a for e in events for a in e.aliases)})
        dags = await self._dags(namespace, [spec.uri, *(f"alias:{a}" for a in aliases)])
        producing, consuming = assets.asset_dags(spec.uri, dags)
        watchers = assets.asset_watchers(spec.uri, dags)
        if watchers or old.watchers:
            await self._sync_watchers(asset, spec.uri, watchers)
        limit = spec.events_history_limit or DEFAULT_EVENTS_HISTORY_LIMIT
        holders = assets.event_holders(spec.uri, aliases, dags) if len(events) > limit else []
        consumers = await self._cursors(namespace, holders)
        pruning = assets.events_to_prune(events, limit, consumers)
        doomed = pruning.doomed
        unconsumed_deleted = old.unconsumed_deleted
        if pruning.lost:
            unconsumed_deleted = "; ".join(
                f"{len(names)} events DAG {dag} had not consumed ({', '.join(names)})"
                for dag, names in sorted(pruning.lost.items())
            )
            await self.kube.emit_event(
                asset,
                reason="UnconsumedEventsDeleted",
                message=f"the history ceiling ({limit * assets.HELD_EVENTS_CEILING_FACTOR} events, "
                f"10 x eventsHistoryLimit) deleted {unconsumed_deleted}: their runs will not name them",
                warning=True,
            )
        for name in doomed:
            await self.kube.delete_custom(ASSETEVENTS, namespace, name)
            if self.events is not None:
                self.events.forget(namespace, name)
        kept = sorted((e for e in events if e.name not in set(doomed)), key=lambda e: (e.timestamp, e.name))
        if self.aliases is not None:
            self.aliases.resolved(namespace, spec.uri, aliases)
        new = AssetStatus(
            aliases=aliases,
            last_event=kept[-1].name if kept else None,
            last_event_time=kept[-1].timestamp if kept else None,
            events=len(kept),
            producing_dags=producing,
            consuming_dags=consuming,
            producing=",".join(producing) or None,
            consuming=",".join(consuming) or None,
            watchers=sorted(w.name for w in watchers.values()),
            held_events=pruning.held,
            unconsumed_deleted=unconsumed_deleted,
        )
        new_wire = AssetStatus.model_validate(new.model_dump()).to_wire()
        await self.writer.write_status(ASSETS, asset, old.to_wire(), new_wire)
        return None

    async def _sync_watchers(
        self, asset: Mapping[str, Any], uri: str, wanted: Mapping[str, AssetWatcherRef]
    ) -> None:
        """One Trigger per watcher the consuming DAGs give the asset (Airflow's asset-trigger rows),
        owned by the Asset; a watcher no schedule names any more has its Trigger deleted (cancelled)."""
        meta = asset["metadata"]
        namespace = meta["namespace"]
        selector = f"{LABEL_ASSET}={meta['name']}"
        have = {t["metadata"]["name"]: t for t in await self.kube.list_custom(TRIGGERS, namespace, selector)}
        for name, watcher in sorted(wanted.items()):
            if name in have:
                continue
            try:
                await self.kube.create_custom(
                    TRIGGERS, namespace, watcher_trigger_body(asset, uri, watcher, self.trigger_shards)
                )
            except AlreadyExists:
                continue
            logger.info("asset %s: watcher %s runs as Trigger %s", uri, watcher.name, name)
        for name in sorted(set(have) - set(wanted)):
            # the Trigger listed, not one of that name created since (by a newer leader: 409, not ours)
            try:
                await self.kube.delete_custom(
                    TRIGGERS, namespace, name, uid=have[name]["metadata"].get("uid")
                )
            except Conflict:
                logger.info("asset %s: Trigger %s was created again since listed: left", uri, name)

    async def _cursors(self, namespace: str, consuming: Iterable[str]) -> dict[str, assets.Cursor]:
        """The holding DAGs' asset cursors (what each consumed), from their status as the DAG
        reconciler wrote it (`zonda.schedules.dag_plans`); a DAG gone holds nothing."""
        cursors: dict[str, assets.Cursor] = {}
        for name in consuming:
            body = await self.kube.get_custom(DAGS, namespace, name)
            if body is None:
                continue
            status = parse_status(DagStatus, body.get("status"))
            created = parse_time(body["metadata"].get("creationTimestamp"))
            cursors[name] = assets.Cursor(
                status.asset_cursor_time or created, frozenset(status.asset_cursor_events or ())
            )
        return cursors

    async def _dags(self, namespace: str, keys: Iterable[str]) -> Mapping[str, Mapping[str, Any]]:
        """The DAGs naming these keys (the asset's URI, its aliases), by name."""
        if self.dags is None:
            bodies = await self.kube.list_custom(DAGS, namespace)
            return {d["metadata"]["name"]: d.get("spec") or {} for d in bodies}
        await self.dags.seed(self.kube, namespace)
        return {name: spec for key in keys for name, spec in self.dags.naming(namespace, key).items()}

    async def _events(self, namespace: str, uri: str) -> list[TriggeringEvent]:
        if self.events is None:
            bodies = await self.kube.list_custom(ASSETEVENTS, namespace)
            return [e for e in map(event_from_body, bodies) if e is not None]
        await self.events.seed(self.kube, namespace)
        return self.events.of_keys(namespace, [uri])
