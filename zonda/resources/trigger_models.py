"""The `Trigger` resource's shape: what a deferred task instance waits on, and the event that fired.

Its own module as each resource's models are (see `zonda.resources.models`); the triggerer and the DagRun
reconciler both read it.
"""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Any

from pydantic import Field

from zonda.resources.models import CrdModel, JsonObject


class WatchedAsset(CrdModel):
    """The asset a watcher Trigger updates: each event it fires is recorded as an AssetEvent."""

    uri: str = Field(min_length=1)
    watcher: str = Field(min_length=1, description="The AssetWatcher's name.")


class TriggerSpec(CrdModel):
    """A deferred task instance's trigger (`dagRun`, `taskId`, `tryNumber`), run to its first event, or
    an asset's watcher (`asset`), run for good: every event is an AssetEvent."""

    classpath: str
    kwargs: JsonObject = Field(default_factory=dict)
    dag_run: str | None = Field(default=None, description="Name of the DagRun whose task instance deferred.")
    task_id: str | None = None
    try_number: int | None = Field(default=None, ge=1)
    asset: WatchedAsset | None = Field(default=None, description="The asset this watcher's events update.")
    deferral_count: int = Field(default=1, ge=1)
    timeout_at: datetime | None = None
    shard: int = Field(ge=0, description="Which triggerer shard (and Lease) owns this trigger.")


class TriggerState(enum.StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    FIRED = "fired"
    FAILED = "failed"


class TriggerStatus(CrdModel):
    state: TriggerState = TriggerState.PENDING
    event: Any = Field(default=None, description="Payload of the first TriggerEvent (written once).")
    fired_at: datetime | None = None
    holder: str | None = Field(default=None, description="Triggerer replica that wrote the event.")
    fencing_token: str | None = Field(default=None, description="Lease holder/transitions at write time.")
    message: str | None = None
