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

from controller.kube import TRIGGERS, Conflict, Kube, NotFound
from zonda.resources.trigger_models import TriggerState

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
