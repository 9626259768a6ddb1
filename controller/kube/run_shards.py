"""A big run read and written whole: its `DagRunShard` objects behind the client's DagRun calls.

`zonda.resources.run_shards` says what is stored where (a pure split and merge); this is where both
clients (`client.Kube`, `fake.FakeKube`) apply it, so every reader above them (the reconciler, the
CLI, the UI's reads, the operations) gets a DagRun with all its task instances and every status
write stores them split when the run is big:

- a GET of a DagRun whose status names shards lists them (one list by the run's uid label, from the
  apiserver, never from memory) and merges them in; a list of DagRuns lists the namespace's shards
  once when one of its runs is split;
- a status write of a run past the inline limit (or split already) first writes each shard whose
  task instances changed, replacing it on the resourceVersion it was read at (a conflict is the
  caller's conflict: it reads again and decides again) or creating it, then the DagRun's status, the
  summary naming every shard's new resourceVersion. A shard that already exists though this reader
  never saw it is a conflict too (another writer made it first).

What is kept in memory is the shards as last read or written, only to know what changed and on
which version to replace it: a write after a restart reads first, as every write does.
"""

from __future__ import annotations

import contextlib
import copy
import logging
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from controller.kube.errors import AlreadyExists, Conflict
from zonda.resources import run_shards
from zonda.resources.models import API_VERSION
from zonda.resources.wire import LABEL_DAG, LABEL_DAGRUN, LABEL_DAGRUN_UID, label_value

Body = dict[str, Any]
SHARDS = run_shards.PLURAL
log = logging.getLogger(__name__)


class ShardApi(Protocol):
    """The raw calls the store makes (on DagRunShards only: no DagRun call comes back here)."""

    async def list_custom(
        self, plural: str, namespace: str | None, label_selector: str | None = None
    ) -> list[Body]: ...

    async def create_custom(self, plural: str, namespace: str, body: Body) -> Body: ...

    async def replace_custom_status(self, plural: str, namespace: str, body: Body) -> Body: ...

    async def delete_custom(
        self,
        plural: str,
        namespace: str,
        name: str,
        *,
        resource_version: str | None = None,
        uid: str | None = None,
    ) -> bool: ...


def _tis(shard: Mapping[str, Any]) -> dict[str, Any]:
    return dict((shard.get("status") or {}).get("taskInstances") or {})


def shard_body(run: Mapping[str, Any], name: str, index: int) -> Body:
    """A new shard of `run`: owned by it (the garbage collector deletes it with the run), labelled
    with its uid (what readers list by), named `<run>-<index>`."""
    meta = run["metadata"]
    labels = {LABEL_DAGRUN_UID: meta["uid"], LABEL_DAGRUN: label_value(meta["name"])}
    if dag := (run.get("spec") or {}).get("dagName"):
        labels[LABEL_DAG] = label_value(dag)
    return {
        "apiVersion": API_VERSION,
        "kind": run_shards.KIND,
        "metadata": {
            "name": name,
            "namespace": meta["namespace"],
            "labels": labels,
            "ownerReferences": [
                {
                    "apiVersion": API_VERSION,
                    "kind": "DagRun",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": run_shards.DagRunShardSpec(dag_run=meta["name"], index=index).to_wire(),
    }


@dataclass
class RunShards:
    """The split and merge of big runs for one client (`inline_limit`: the controller's
    `--inline-task-instances`; other clients never add task instances, so they keep a run's layout)."""

    inline_limit: int = run_shards.DEFAULT_INLINE_TASK_INSTANCES
    #: The runs whose shards are remembered (the most recent): a run forgotten has each of its shards
    #: written at its next write, on the version read, as if all had changed.
    remembered: int = 64
    #: (namespace, run uid) -> its shards by name, as last read or written.
    _seen: OrderedDict[tuple[str, str], dict[str, Body]] = field(default_factory=OrderedDict)

    def _remember(self, key: tuple[str, str], shards: dict[str, Body]) -> None:
        self._seen[key] = shards
        self._seen.move_to_end(key)
        while len(self._seen) > self.remembered:
            self._seen.popitem(last=False)

    async def whole(self, api: ShardApi, run: Body) -> Body:
        """The run with every task instance (itself when it is not split). Raises `MissingShard`."""
        status = run.get("status") or {}
        meta = run["metadata"]
        key = (meta["namespace"], meta.get("uid", ""))
        if not run_shards.is_summary(status):
            self._seen.pop(key, None)
            return run
        held = await self._listed(api, run)
        merged = run_shards.merge(
            status,
            {name: _tis(shard) for name, shard in held.items()},
            {name: shard["metadata"]["resourceVersion"] for name, shard in held.items()},
        )
        return {**run, "status": merged}

    async def _listed(self, api: ShardApi, run: Mapping[str, Any]) -> dict[str, Body]:
        meta = run["metadata"]
        listed = await api.list_custom(SHARDS, meta["namespace"], f"{LABEL_DAGRUN_UID}={meta['uid']}")
        held = {shard["metadata"]["name"]: shard for shard in listed}
        self._remember((meta["namespace"], meta.get("uid", "")), held)
        return held

    async def whole_list(self, api: ShardApi, namespace: str | None, runs: list[Body]) -> list[Body]:
        """Runs listed, every split one whole (one list of the shards; a run whose shards are not all
        there yet, being written, is left as its summary)."""
        if not any(run_shards.is_summary(run.get("status") or {}) for run in runs):
            return runs
        by_uid: dict[str, dict[str, Body]] = {}
        for shard in await api.list_custom(SHARDS, namespace, LABEL_DAGRUN_UID):
            uid = (shard["metadata"].get("labels") or {}).get(LABEL_DAGRUN_UID, "")
            by_uid.setdefault(uid, {})[shard["metadata"]["name"]] = shard
        whole: list[Body] = []
        for run in runs:
            status = run.get("status") or {}
            held = by_uid.get(run["metadata"].get("uid", ""), {})
            try:
                merged = run_shards.merge(
                    status,
                    {name: _tis(shard) for name, shard in held.items()},
                    {name: shard["metadata"]["resourceVersion"] for name, shard in held.items()},
                )
            except run_shards.MissingShard as exc:
                log.info("run %s listed as its summary: %s", run["metadata"]["name"], exc)
                merged = dict(status)
            whole.append({**run, "status": merged})
        return whole

    async def stored_form(self, api: ShardApi, namespace: str, run: Body) -> Body:
        """Before the DagRun's status write: write the shards that changed, each on the version the
        writer read (`taskInstanceShards` of the whole status), and return the body to write (the
        summary, naming every shard's new resourceVersion). Raises `Conflict`."""
        status = run.get("status") or {}
        split = run_shards.split(status, run["metadata"]["name"], inline_limit=self.inline_limit)
        if not split.shards:
            return run
        run = {**run, "metadata": {**run["metadata"], "namespace": namespace}}
        key = (namespace, run["metadata"].get("uid", ""))
        read = run_shards.versions_read(status)
        seen = dict(self._seen.get(key) or {})
        versions: dict[str, str] = {}
        for index, (shard_name, tis) in enumerate(split.shards.items()):
            version, old = read.get(shard_name), seen.get(shard_name)
            if old is not None and old["metadata"]["resourceVersion"] == version and _tis(old) == tis:
                versions[shard_name] = old["metadata"]["resourceVersion"]
                continue
            body = shard_body(run, shard_name, index)
            if version is None:
                body = await self._created(api, run, body)
            else:
                body["metadata"]["resourceVersion"] = version
            try:
                written = await api.replace_custom_status(
                    SHARDS, namespace, {**body, "status": {"taskInstances": tis}}
                )
            except Conflict:
                self._seen.pop(key, None)
                raise
            seen[shard_name] = copy.deepcopy(written)
            versions[shard_name] = written["metadata"]["resourceVersion"]
        self._remember(key, seen)
        return {**run, "status": run_shards.with_versions(split.summary, versions)}

    async def _created(self, api: ShardApi, run: Body, body: Body) -> Body:
        """A shard the status read does not name: created, or, left by a write that stopped before
        its DagRun's (the run's own uid label), taken over at its version."""
        try:
            created: Body = await api.create_custom(SHARDS, run["metadata"]["namespace"], body)
            return created
        except AlreadyExists:
            left = (await self._listed(api, run)).get(body["metadata"]["name"])
            if left is None:  # another run's of the same name, not collected yet
                raise Conflict(409, f"DagRunShard {body['metadata']['name']} exists already") from None
            return left

    async def after_write(self, api: ShardApi, written: Body, whole_status: Mapping[str, Any]) -> Body:
        """The written DagRun as a reader sees it (whole, naming the shards' new versions); shards it
        no longer names are deleted."""
        meta = written["metadata"]
        status = written.get("status") or {}
        key = (meta["namespace"], meta.get("uid", ""))
        if not run_shards.is_sharded(status):
            return written
        named = {ref["name"]: ref.get("resourceVersion") for ref in status["taskInstanceShards"]}
        seen = self._seen.get(key, {})
        for stale in sorted(set(seen) - set(named)):
            uid = (seen[stale].get("metadata") or {}).get("uid")
            with contextlib.suppress(Conflict):  # one of that name made again since: not the one dropped
                await api.delete_custom(SHARDS, meta["namespace"], stale, uid=uid)
            seen.pop(stale, None)
        whole = {**whole_status, "taskInstanceShards": status["taskInstanceShards"]}
        whole.pop("taskCounts", None)
        whole.pop("progress", None)
        return {**written, "status": whole}
