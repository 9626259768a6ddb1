"""The UI's copy of the DAGs, DagRuns, Pools and Assets, kept current by list+watch, and the changes
fanned out to pages.

One list+watch per resource and namespace serves every viewer (pages never hit the API for these
kinds), and each change is pushed to the open pages' queues; a page then re-renders what it shows.
A watch that expires (410 Gone) or fails is re-listed, and the objects that vanished meanwhile are
reported as deleted, so nothing stays stale after a disconnect.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from controller.kube import DAGRUNS, DAGS, POOLS, Kube, KubeError
from zonda.resources import run_shards
from zonda.resources.asset_models import ASSETS
from zonda.resources.wire import LABEL_DAGRUN_UID

log = logging.getLogger(__name__)

Body = dict[str, Any]
Key = tuple[str, str]  # (namespace, name)
KINDS = {DAGS: "DAG", DAGRUNS: "DagRun", POOLS: "Pool", ASSETS: "Asset", run_shards.PLURAL: "DagRunShard"}


@dataclass(frozen=True)
class Change:
    """What a page needs to decide whether to refresh: which object of which DAG changed, and when."""

    kind: str  # "DAG", "DagRun", "Pool" or "Asset"
    type: str  # ADDED, MODIFIED, DELETED
    namespace: str
    name: str
    dag: str  # the DAG's name (for a DagRun: spec.dagName; "" for a Pool or an Asset)
    seen_at: float  # time.time() when the UI saw it (for the live-update delay measurement)

    def as_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "type": self.type,
            "namespace": self.namespace,
            "name": self.name,
            "dag": self.dag,
            "seenAt": self.seen_at,
        }


def _key(body: Mapping[str, Any]) -> Key:
    return body["metadata"]["namespace"], body["metadata"]["name"]


class Store:
    """DAG, DagRun, Pool and Asset bodies by (namespace, name), runs indexed by their DAG, and subscribers."""

    def __init__(self) -> None:
        self.dags: dict[Key, Body] = {}
        self.runs: dict[Key, Body] = {}
        self.pools: dict[Key, Body] = {}
        self.assets: dict[Key, Body] = {}
        self._runs_by_dag: dict[Key, dict[str, Body]] = {}
        #: A big run's DagRunShards by run uid, and each run as its watch delivered it (a summary):
        #: `runs` holds it whole, merged again when it or one of its shards changes.
        self._shards: dict[str, dict[str, Body]] = {}
        self._summaries: dict[Key, Body] = {}
        self._run_of_uid: dict[str, Key] = {}
        self._subscribers: set[asyncio.Queue[Change]] = set()
        self.synced: set[tuple[str, str | None]] = set()  # (plural, namespace) listed at least once

    # ---- reading

    def runs_of(self, namespace: str, dag: str) -> list[Body]:
        return list(self._runs_by_dag.get((namespace, dag), {}).values())

    def listed(self, plural: str, namespace: str) -> bool:
        """Whether `plural` in `namespace` was listed (by a namespaced or a cluster-wide follower)."""
        return (plural, namespace) in self.synced or (plural, None) in self.synced

    def pools_in(self, namespace: str) -> list[Body]:
        return [body for (ns, _), body in self.pools.items() if ns == namespace]

    def assets_in(self, namespace: str) -> list[Body]:
        return [body for (ns, _), body in sorted(self.assets.items()) if ns == namespace]

    def dags_in(self, namespaces: set[str] | None) -> Iterator[Body]:
        for (namespace, _), body in sorted(self.dags.items()):
            if namespaces is None or namespace in namespaces:
                yield body

    # ---- writing (from the watch)

    def _whole(self, run: Body) -> Body:
        """The run with its shards' task instances (its summary while one of them is not seen yet)."""
        status = run.get("status") or {}
        if not run_shards.is_summary(status):
            return run
        held = self._shards.get(run["metadata"].get("uid", ""), {})
        try:
            merged = run_shards.merge(
                status,
                {name: (s.get("status") or {}).get("taskInstances") or {} for name, s in held.items()},
                {name: s["metadata"].get("resourceVersion", "") for name, s in held.items()},
            )
        except run_shards.MissingShard:
            return run
        return {**run, "status": merged}

    def _apply_shard(self, event_type: str, body: Body) -> Change | None:
        """A shard changed: its run is merged again (and that is the change pages see)."""
        uid = (body["metadata"].get("labels") or {}).get(LABEL_DAGRUN_UID, "")
        held = self._shards.setdefault(uid, {})
        if event_type == "DELETED":
            held.pop(body["metadata"]["name"], None)
        else:
            held[body["metadata"]["name"]] = body
        key = self._run_of_uid.get(uid)
        if key is None or key not in self._summaries:
            return None
        return self.apply(DAGRUNS, "MODIFIED", self._summaries[key])

    def apply(self, plural: str, event_type: str, body: Body) -> Change | None:
        if plural == run_shards.PLURAL:
            return self._apply_shard(event_type, body)
        key = _key(body)
        if plural in (POOLS, ASSETS):
            table = self.pools if plural == POOLS else self.assets
            if event_type == "DELETED":
                table.pop(key, None)
            else:
                table[key] = body
            dag = ""
        elif plural == DAGS:
            if event_type == "DELETED":
                self.dags.pop(key, None)
            else:
                self.dags[key] = body
            dag = key[1]
        else:
            old = self.runs.get(key)
            if old is not None:
                self._runs_by_dag.get((key[0], old["spec"]["dagName"]), {}).pop(key[1], None)
            dag = (body.get("spec") or {}).get("dagName", "")
            uid = body["metadata"].get("uid", "")
            if event_type == "DELETED":
                self.runs.pop(key, None)
                self._summaries.pop(key, None)
                self._run_of_uid.pop(uid, None)
                self._shards.pop(uid, None)
            else:
                self._summaries[key] = body
                self._run_of_uid[uid] = key
                body = self.runs[key] = self._whole(body)
                self._runs_by_dag.setdefault((key[0], dag), {})[key[1]] = body
        change = Change(
            kind=KINDS[plural],
            type=event_type,
            namespace=key[0],
            name=key[1],
            dag=dag,
            seen_at=time.time(),
        )
        self._publish(change)
        return change

    def replace(self, plural: str, namespace: str | None, items: list[Body]) -> None:
        """A fresh list: apply every item, and delete what the store had there that the list lacks."""
        if plural == run_shards.PLURAL:
            for held in self._shards.values():
                for name, shard in list(held.items()):
                    if namespace is None or shard["metadata"].get("namespace") == namespace:
                        del held[name]
            for item in items:
                self._apply_shard("ADDED", item)
            self.synced.add((plural, namespace))
            return
        table = {DAGS: self.dags, DAGRUNS: self.runs, POOLS: self.pools, ASSETS: self.assets}[plural]
        listed = {_key(item) for item in items}
        for key, body in list(table.items()):
            if (namespace is None or key[0] == namespace) and key not in listed:
                self.apply(plural, "DELETED", body)
        for item in items:
            self.apply(plural, "MODIFIED" if _key(item) in table else "ADDED", item)
        self.synced.add((plural, namespace))

    # ---- subscribers (open pages)

    @contextlib.contextmanager
    def subscription(self, size: int = 1000) -> Iterator[asyncio.Queue[Change]]:
        queue: asyncio.Queue[Change] = asyncio.Queue(maxsize=size)
        self._subscribers.add(queue)
        try:
            yield queue
        finally:
            self._subscribers.discard(queue)

    def _publish(self, change: Change) -> None:
        for queue in self._subscribers:
            with contextlib.suppress(asyncio.QueueFull):  # a stalled page refreshes on its next change
                queue.put_nowait(change)


async def follow(kube: Kube, store: Store, plural: str, namespace: str | None, *, retry: float = 2.0) -> None:
    """List then watch `plural` in `namespace` (None: all) into `store`, forever; re-list on expiry."""
    while True:
        try:
            items, version = await kube.list_custom_with_version(plural, namespace)
            for item in items:  # list items lack kind/apiVersion; the templates do not need them
                item.setdefault("kind", KINDS[plural])
            store.replace(plural, namespace, items)
            async for event_type, body in kube.watch_objects(plural, namespace, resource_version=version):
                if event_type == "ERROR":  # 410 Gone as an event: the version is too old; list again
                    break
                if event_type in ("ADDED", "MODIFIED", "DELETED"):
                    store.apply(plural, event_type, body)
        except asyncio.CancelledError:
            raise
        except KubeError as exc:
            if exc.status != 410:
                log.warning("watching %s in %s failed: %s; retrying", plural, namespace or "all", exc)
                # An account without the Pools or Assets grant (a chart older than their pages): retry slowly.
                slow = exc.status == 403 and plural in (POOLS, ASSETS, run_shards.PLURAL)
                await asyncio.sleep(max(retry, 60.0) if slow else retry)
        except Exception as exc:  # a dropped connection: list again after a pause
            log.warning("watching %s in %s failed: %r; retrying", plural, namespace or "all", exc)
            await asyncio.sleep(retry)


def start_following(kube: Kube, store: Store, namespaces: list[str] | None) -> list[asyncio.Task[None]]:
    """One follower per resource and namespace (or one cluster-wide each when `namespaces` is None)."""
    targets: list[str | None] = list(namespaces) if namespaces else [None]
    return [
        asyncio.create_task(follow(kube, store, plural, namespace), name=f"ui-watch-{plural}-{namespace}")
        for plural in (DAGS, DAGRUNS, run_shards.PLURAL, POOLS, ASSETS)
        for namespace in targets
    ]
