"""Trigger resources as the run reconciler writes and reads them: the body of a deferred try's Trigger,
and what a Trigger's status reports back.

The wire shape of the Trigger CRD on the controller's side (the triggerer's side is
`controller.triggerer`): pure, so the reconciler's `_create_trigger` and `_gather` only create
and list.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller.coordination.shards import shard_for
from zonda.passes import decisions
from zonda.passes.decisions import ObservedTrigger
from zonda.resources.asset_models import LABEL_ASSET, AssetWatcherRef, watcher_trigger_name
from zonda.resources.models import API_VERSION
from zonda.resources.trigger_models import TriggerSpec, WatchedAsset
from zonda.resources.wire import LABEL_DAGRUN, LABEL_DAGRUN_UID, LABEL_SHARD, label_value


def trigger_body(meta: Mapping[str, Any], request: decisions.TriggerRequest, shards: int) -> dict[str, Any]:
    """The Trigger for a deferred try of the DagRun with metadata `meta`, in its shard, owned by the run."""
    shard = shard_for(request.name, shards)
    spec = TriggerSpec(
        classpath=request.deferral.trigger_classpath,
        kwargs=dict(request.deferral.trigger_kwargs),
        dag_run=meta["name"],
        task_id=request.task_id,
        try_number=request.try_number,
        deferral_count=request.deferral_count,
        timeout_at=request.timeout_at,
        shard=shard,
    )
    return {
        "apiVersion": API_VERSION,
        "kind": "Trigger",
        "metadata": {
            "name": request.name,
            "namespace": meta["namespace"],
            "labels": {
                LABEL_SHARD: str(shard),
                LABEL_DAGRUN_UID: meta["uid"],
                LABEL_DAGRUN: label_value(meta["name"]),
            },
            "ownerReferences": [
                {
                    "apiVersion": API_VERSION,
                    "kind": "DagRun",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                }
            ],
        },
        "spec": spec.to_wire(),
    }


def watcher_trigger_body(
    asset: Mapping[str, Any], uri: str, watcher: AssetWatcherRef, shards: int
) -> dict[str, Any]:
    """The Trigger that runs an asset's watcher, in its shard, owned by the Asset (labelled with it)."""
    meta = asset["metadata"]
    name = watcher_trigger_name(uri, watcher)
    shard = shard_for(name, shards)
    spec = TriggerSpec(
        classpath=watcher.classpath,
        kwargs=dict(watcher.kwargs),
        asset=WatchedAsset(uri=uri, watcher=watcher.name),
        shard=shard,
    )
    return {
        "apiVersion": API_VERSION,
        "kind": "Trigger",
        "metadata": {
            "name": name,
            "namespace": meta["namespace"],
            "labels": {LABEL_SHARD: str(shard), LABEL_ASSET: meta["name"]},
            "ownerReferences": [
                {"apiVersion": API_VERSION, "kind": "Asset", "name": meta["name"], "uid": meta["uid"]}
            ],
        },
        "spec": spec.to_wire(),
    }


def trigger_report(trigger: Mapping[str, Any]) -> ObservedTrigger:
    """What a Trigger resource says of its deferred try."""
    spec, status = trigger.get("spec") or {}, trigger.get("status") or {}
    return ObservedTrigger(
        task_id=spec.get("taskId", ""),
        try_number=spec.get("tryNumber", 0),
        deferral_count=spec.get("deferralCount", 1),
        name=trigger["metadata"]["name"],
        fired=status.get("state") == "fired",
        failed=status.get("state") == "failed",
        event=status.get("event"),
        message=status.get("message"),
        uid=trigger["metadata"].get("uid"),
    )
