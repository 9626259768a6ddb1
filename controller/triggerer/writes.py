"""A trigger's outcome written into its status exactly once: the triggerer's only write to a Trigger.

`write_outcome` applies the status with the resourceVersion last seen and stops when the Trigger
already fired or failed (a duplicate event from a second replica during a failover) or is gone (its
task instance stopped waiting). The shard Lease's fencing check happens before, in the runtime.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from typing import Any

from controller.kube import TRIGGERS, AlreadyExists, Conflict, Kube, NotFound
from zonda.resources.asset_models import ASSETEVENTS, LABEL_ASSET, AssetEventSpec, watcher_event_name
from zonda.resources.models import API_VERSION
from zonda.resources.trigger_models import TriggerState
from zonda.triggers import to_json_safe

FINISHED_STATES = frozenset({TriggerState.FIRED.value, TriggerState.FAILED.value})


class WriteResult(enum.StrEnum):
    WRITTEN = "written"
    ALREADY_FINISHED = "already_finished"  # another write (a duplicate event) got there first
    GONE = "gone"  # the Trigger was deleted: its task instance stopped waiting


@dataclasses.dataclass
class Outcome:
    """A trigger's result waiting to be written into its status."""

    name: str
    shard: int
    status: dict[str, Any]
    resource_version: str | None
    #: Monotonic time the event was yielded (for the fire-latency benchmark).
    produced_at: float
    #: An asset watcher's event: the AssetEvent to create (instead of a status to write).
    asset_event: dict[str, Any] | None = None
    #: The watcher consumed what the event reports (its trigger gave an `event_key`): no other replica
    #: can report it again, so it is recorded even when the shard's Lease lapsed meanwhile.
    consumed: bool = False


def asset_event_body(trigger: Mapping[str, Any], payload: Any, key: str | None = None) -> dict[str, Any]:
    """The AssetEvent an asset watcher's event records: named from the Trigger and the payload (the same
    event yielded again, by another replica after a failover or by this one restarted, has the same
    name and gets 409), owned by the Asset that owns the Trigger, extra as Airflow's
    `Trigger.submit_event` gives it (`{"from_trigger": true, "payload": ...}`); `key`, the trigger's
    `event_key`, is in the name too. Raises TypeError when the payload cannot be stored as JSON."""
    meta, spec = trigger["metadata"], trigger.get("spec") or {}
    safe = to_json_safe(payload, path="event")
    owners = [o for o in meta.get("ownerReferences") or [] if o.get("kind") == "Asset"]
    event_meta: dict[str, Any] = {
        "name": watcher_event_name(meta["name"], safe, key),
        "namespace": meta["namespace"],
    }
    if owners:
        event_meta["labels"] = {LABEL_ASSET: owners[0]["name"]}
        event_meta["ownerReferences"] = [{k: owners[0][k] for k in ("apiVersion", "kind", "name", "uid")}]
    event_spec = AssetEventSpec(
        uri=spec["asset"]["uri"],
        extra={"from_trigger": True, "payload": safe},
        source_watcher=meta["name"],
    )
    return {
        "apiVersion": API_VERSION,
        "kind": "AssetEvent",
        "metadata": event_meta,
        "spec": event_spec.to_wire(),
    }


async def record_asset_event(kube: Kube, namespace: str, body: dict[str, Any]) -> WriteResult:
    """Create a watcher's AssetEvent; ALREADY_FINISHED when it exists (recorded before: a duplicate)."""
    try:
        await kube.create_custom(ASSETEVENTS, namespace, dict(body))
    except AlreadyExists:
        return WriteResult.ALREADY_FINISHED
    return WriteResult.WRITTEN


async def write_outcome(
    kube: Kube, namespace: str, name: str, status: Mapping[str, Any], resource_version: str | None
) -> WriteResult:
    """Write `status` into Trigger `name` unless it already fired or failed.

    The merge patch carries `metadata.resourceVersion`, so it applies only to the version we last saw;
    on a conflict we re-read, and stop if someone else finished it meanwhile.
    """
    version = resource_version
    for _ in range(5):
        if version is None:
            current = await kube.get_custom(TRIGGERS, namespace, name)
            if current is None:
                return WriteResult.GONE
            if (current.get("status") or {}).get("state") in FINISHED_STATES:
                return WriteResult.ALREADY_FINISHED
            version = current["metadata"]["resourceVersion"]
        try:
            await kube.patch_custom_status(TRIGGERS, namespace, name, dict(status), resource_version=version)
        except NotFound:
            return WriteResult.GONE
        except Conflict:
            version = None
            continue
        return WriteResult.WRITTEN
    raise Conflict(409, f"Trigger {name} kept changing while its event was being written")
