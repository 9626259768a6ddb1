"""A big run's task instances kept in `DagRunShard` objects beside its DagRun: the split and the merge.

etcd keeps one object in one value of at most 1.5 MiB, about 3,800 task instances of a DagRun's
status. Past `DEFAULT_INLINE_TASK_INSTANCES` instances a run's status is stored split: the DagRun keeps
everything but the task instances, plus a summary (`taskInstanceShards`: which shard objects hold
them, `taskCounts` and `progress`: what `kubectl get` shows), and the instances go, in their natural
order (task id, then map index), `SHARD_INSTANCES` to a `DagRunShard` named `<run>-<k>` (its status
subresource holds them; the run owns it, so the garbage collector deletes it with the run).

Everything above the API client sees a run whole: `merge(summary, shards)` is the status as if it
were one object (still naming its shards, with the versions read), `split(status)` its stored form.
A run stays split once it was (`sharded`), so a writer that never adds instances (a user's clear or
mark) keeps the layout the controller chose. Writers replace each changed shard on the
resourceVersion they read, then the DagRun's status (which names every shard's new version, so its
watch sees every change); an unchanged shard is not written.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import Field

from zonda.resources.models import CrdModel

KIND = "DagRunShard"
PLURAL = "dagrunshards"
#: Task instances a run keeps in its own status; one more and they all move to shards.
DEFAULT_INLINE_TASK_INSTANCES = 1000
#: Task instances per shard object: about 100 KiB at the measured 404 bytes each (room for larger
#: instances, each shard far under etcd's 1.5 MiB), few enough that a pass's changes, which come in
#: waves of neighbouring map indexes, touch one or two shards.
SHARD_INSTANCES = 256
#: The task-instance states `progress` counts as done (the finished ones).
_DONE = frozenset(("success", "failed", "skipped", "upstream_failed", "removed"))
_NAME_PREFIX_CHARS = 240


class ShardRef(CrdModel):
    """One shard of a run's task instances, as its DagRun's status names it."""

    name: str
    instances: int = Field(ge=0)
    resource_version: str | None = Field(default=None, description="The shard as last written.")


class DagRunShardSpec(CrdModel):
    dag_run: str = Field(description="The DagRun whose task instances this shard holds (its owner).")
    index: int = Field(ge=0, description="This shard's position among the run's shards.")


class MissingShard(LookupError):
    """A shard the DagRun's status names is not there (deleted by hand, or not listed yet)."""


@dataclass(frozen=True)
class Split:
    """A status in its stored form: the DagRun's status and each shard's task instances, by name."""

    summary: dict[str, Any]
    shards: dict[str, dict[str, Any]]


def shard_name(run_name: str, index: int) -> str:
    """`<run>-<index>`; a run name too long for that keeps a digest of itself instead of its tail."""
    if len(run_name) <= _NAME_PREFIX_CHARS:
        return f"{run_name}-{index}"
    digest = hashlib.sha256(run_name.encode()).hexdigest()[:10]
    return f"{run_name[: _NAME_PREFIX_CHARS - 16].rstrip('-.')}-{digest}-{index}"


def is_sharded(status: Mapping[str, Any]) -> bool:
    """Whether a stored status names shards (its task instances are not all in it)."""
    return bool(status.get("taskInstanceShards"))


def order(key: str) -> tuple[str, int]:
    """A task-instance key's natural order: `t[10]` after `t[9]`; an unmapped task before its instances."""
    task, _, rest = key.partition("[")
    if rest.endswith("]") and rest[:-1].isdigit():
        return task, int(rest[:-1])
    return key, -1


def needs_shards(instances: int, inline_limit: int = DEFAULT_INLINE_TASK_INSTANCES) -> bool:
    return instances > inline_limit


def split(
    status: Mapping[str, Any],
    run_name: str,
    *,
    inline_limit: int = DEFAULT_INLINE_TASK_INSTANCES,
    sharded: bool = False,
) -> Split:
    """The stored form of a whole status: unchanged (no shards) while its task instances fit inline
    and it was not split before (it names shards, or `sharded`); else the summary and
    `SHARD_INSTANCES` instances per shard. Shard references carry no resourceVersion: the writer
    adds them (`with_versions`)."""
    tis: Mapping[str, Any] = status.get("taskInstances") or {}
    if not sharded and not is_sharded(status) and not needs_shards(len(tis), inline_limit):
        return Split(dict(status), {})
    keys = sorted(tis, key=order)
    shards: dict[str, dict[str, Any]] = {}
    for index, start in enumerate(range(0, len(keys), SHARD_INSTANCES)):
        shards[shard_name(run_name, index)] = {key: tis[key] for key in keys[start : start + SHARD_INSTANCES]}
    summary = {
        key: value for key, value in status.items() if key not in ("taskInstances", "taskInstanceShards")
    }
    summary["taskInstanceShards"] = [
        ShardRef(name=name, instances=len(held)).to_wire() for name, held in shards.items()
    ] or [ShardRef(name=shard_name(run_name, 0), instances=0).to_wire()]
    if not shards:  # sharded, but no instances at all: one empty shard keeps it sharded
        shards[shard_name(run_name, 0)] = {}
    counts = Counter(str(ti.get("state") or "none") for ti in tis.values())
    summary["taskCounts"] = dict(sorted(counts.items()))
    summary["progress"] = f"{sum(n for state, n in counts.items() if state in _DONE)}/{len(tis)}"
    return Split(summary, shards)


def with_versions(summary: Mapping[str, Any], versions: Mapping[str, str]) -> dict[str, Any]:
    """The summary naming each shard's resourceVersion as written."""
    refs = [
        {**ref, "resourceVersion": versions[ref["name"]]} if ref["name"] in versions else dict(ref)
        for ref in summary.get("taskInstanceShards") or []
    ]
    return {**summary, "taskInstanceShards": refs}


def merge(
    summary: Mapping[str, Any],
    shards: Mapping[str, Mapping[str, Any]],
    versions: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The whole status from its stored form: the summary's fields and the task instances of every
    shard it names, in key order (as the API returns one object's map). It keeps naming the shards,
    each with the resourceVersion it was read at (`versions`): a writer replaces each on that
    version, so a write decided on an older read conflicts. Shards it does not name (a write that
    stopped part way) are left out. Raises `MissingShard`."""
    if not is_sharded(summary):
        return dict(summary)
    tis: dict[str, Any] = dict(summary.get("taskInstances") or {})
    refs = []
    for ref in summary["taskInstanceShards"]:
        held = shards.get(ref["name"])
        if held is None:
            raise MissingShard(f"DagRunShard {ref['name']} (named by the run's status) is not there")
        tis.update(held)
        version = (versions or {}).get(ref["name"], ref.get("resourceVersion"))
        refs.append({**ref, "resourceVersion": version} if version is not None else dict(ref))
    whole = {key: value for key, value in summary.items() if key not in ("taskCounts", "progress")}
    whole["taskInstanceShards"] = refs
    whole["taskInstances"] = dict(sorted(tis.items()))
    return whole


def versions_read(status: Mapping[str, Any]) -> dict[str, str]:
    """The resourceVersion each shard was read at, as a whole status names them."""
    return {
        ref["name"]: ref["resourceVersion"]
        for ref in status.get("taskInstanceShards") or []
        if ref.get("resourceVersion")
    }


def is_summary(status: Mapping[str, Any]) -> bool:
    """A stored status without its task instances (what a watch delivers of a big run)."""
    return is_sharded(status) and "taskInstances" not in status
