"""CustomResourceDefinitions generated from the pydantic models (the single source of truth).

`python -m zonda.resources.crds crds/` (re)writes `crds/*.yaml`; a unit test fails when the committed files
differ from what the models generate, and another keeps the chart's copy identical.

Kubernetes wants *structural* schemas: no `$ref`, no `anyOf` for nullability, `type` on every node
except free-form JSON (`x-kubernetes-preserve-unknown-fields`). Defaults stay out of the schema on
purpose: the apiserver stores what the user applied, and the models apply defaults when they read.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from zonda.resources import asset_models, run_shards, xcom_chunks
from zonda.resources.backfill_models import BackfillSpec, BackfillStatus
from zonda.resources.dagrun_models import DagRunShardStatus, DagRunSpec, DagRunStatus
from zonda.resources.models import (
    BACKFILLS,
    DAGRUNS,
    DAGS,
    GROUP,
    POOLS,
    TRIGGERS,
    VERSION,
    DagSpec,
    DagStatus,
)
from zonda.resources.pool_models import PoolSpec, PoolStatus
from zonda.resources.trigger_models import TriggerSpec, TriggerStatus

Schema = dict[str, Any]
_DROP = {"title", "default", "format_", "examples"}


def _structural(node: Any, defs: dict[str, Schema]) -> Any:
    """Turn one pydantic JSON-schema node into a structural openAPIV3 node."""
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        target = defs[node["$ref"].rsplit("/", 1)[-1]]
        merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        return _structural(merged, defs)
    if "anyOf" in node:
        options = [o for o in node["anyOf"] if o.get("type") != "null"]
        nullable = len(options) < len(node["anyOf"])
        rest = {k: v for k, v in node.items() if k != "anyOf"}
        if len(options) == 1:
            result = _structural({**options[0], **rest}, defs)
            if nullable:
                result["nullable"] = True
            return result
        return {"x-kubernetes-preserve-unknown-fields": True, **_keep_doc(rest)}
    out: Schema = {}
    for key, value in node.items():
        if key in _DROP or (key == "additionalProperties" and value is False):
            continue
        if key == "format" and value not in ("date-time", "int32", "int64", "double", "float"):
            continue
        if key == "properties":
            out[key] = {name: _structural(prop, defs) for name, prop in value.items()}
        elif key == "items" or (key == "additionalProperties" and isinstance(value, dict)):
            out[key] = _structural(value, defs)
        elif key == "enum":
            out[key] = value
            out.setdefault("type", "string")
        elif key == "const":
            out["enum"] = [value]
        else:
            out[key] = value
    if (
        out.get("type") == "object"
        and "properties" not in out
        and ("additionalProperties" not in out or out["additionalProperties"] in ({}, True))
    ):
        out.pop("additionalProperties", None)
        out["x-kubernetes-preserve-unknown-fields"] = True
    if "type" not in out and "x-kubernetes-preserve-unknown-fields" not in out and not out.get("enum"):
        out["x-kubernetes-preserve-unknown-fields"] = True
    return out


def _keep_doc(node: Schema) -> Schema:
    return {k: v for k, v in node.items() if k == "description"}


def schema_for(model: type[BaseModel]) -> Schema:
    raw = model.model_json_schema(by_alias=True, mode="validation")
    defs = raw.pop("$defs", {})
    result: Schema = _structural(raw, defs)
    return result


def _with_lists_keyed_by_id(schema: Schema, *fields: str) -> Schema:
    """Lists of named items merge by `id` (server-side apply, GitOps) and reject duplicate ids."""
    for name in fields:
        prop = schema["properties"][name]
        prop["x-kubernetes-list-type"] = "map"
        prop["x-kubernetes-list-map-keys"] = ["id"]
    return schema


#: What `kubectl explain` says of a status's `taskInstances` (its schema is not walked: `_stored_whole`).
TASK_INSTANCES_DOC = (
    "Each task instance by task id (`task[i]` for a mapped one): state, tryNumber, podName, queuedAt, "
    "startDate, endDate, reason, xcom and the rest of zonda.resources.dagrun_models.TaskInstanceStatus. "
    "Written only by the controller, whose model validates it; stored as one value."
)


def _stored_whole(status: Schema, field: str, description: str) -> Schema:
    """A status map only the controller writes, stored by the apiserver as one opaque value: no
    per-field schema to walk (validation, pruning, ratcheting) and one managed field, not one per
    leaf. A 20-task run's status PUT cost the apiserver 22-29 ms of CPU with the typed map, 7-8 ms
    this way (docs/benchmarks.md, fourteenth round); the model still validates every read and write."""
    status["properties"][field] = {
        "description": description,
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": True,
        "x-kubernetes-map-type": "atomic",
    }
    return status


def _column(name: str, path: str, type_: str = "string", priority: int = 0, description: str = "") -> Schema:
    column: Schema = {"name": name, "type": type_, "jsonPath": path}
    if priority:
        column["priority"] = priority
    if description:
        column["description"] = description
    return column


def _crd(
    kind: str,
    plural: str,
    short: str,
    spec: Schema,
    status: Schema | None,
    columns: list[Schema],
    description: str,
) -> Schema:
    """A namespaced CRD in zonda.dev; without `status`, no status subresource (plain data)."""
    crd: Schema = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": kind.lower(),
                "shortNames": [short],
                "categories": ["zonda"],
            },
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [
                        *columns,
                        _column("Age", ".metadata.creationTimestamp", "date"),
                    ],
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "description": description,
                            "required": ["spec"],
                            "properties": {
                                "apiVersion": {"type": "string"},
                                "kind": {"type": "string"},
                                "metadata": {"type": "object"},
                                "spec": spec,
                                "status": status,
                            },
                        }
                    },
                }
            ],
        },
    }
    if status is None:
        version = crd["spec"]["versions"][0]
        del version["subresources"]
        del version["schema"]["openAPIV3Schema"]["properties"]["status"]
    return crd


def generate() -> dict[str, Schema]:
    """Every CRD, by file name."""
    dag_spec = _with_lists_keyed_by_id(schema_for(DagSpec), "tasks", "taskGroups")
    dag_spec["x-kubernetes-validations"] = [
        {
            "rule": "!(has(self.schedule) && has(self.timetable))",
            "message": "set either schedule or timetable, not both",
        }
    ]
    dag = _crd(
        "DAG",
        DAGS,
        "dag",
        dag_spec,
        schema_for(DagStatus),
        [
            _column("Display Name", ".spec.displayName", description="Airflow's dag_display_name"),
            _column("Schedule", ".status.schedule", description="Cron, preset, duration or timetable"),
            _column("Paused", ".status.paused", "boolean"),
            # a string, not a date: kubectl prints a future date as <invalid>; this reads 2026-01-01T00:00:00Z
            _column("Next Run", ".status.nextRunAfter", description="When the next run is due (UTC)"),
            _column("Active Runs", ".status.activeRuns", "integer"),
            _column("Last Run State", ".status.lastRunState"),
            _column("Last Run", ".status.lastRun", priority=1),
            _column("Next Logical Date", ".status.nextLogicalDate", priority=1),
            _column("Ready", '.status.conditions[?(@.type=="Ready")].reason', priority=1),
            _column("Valid", '.status.conditions[?(@.type=="Valid")].status', priority=1),
        ],
        "A DAG: tasks, their dependencies, and when to run them (Airflow's DAG).",
    )
    dagrun = _crd(
        "DagRun",
        DAGRUNS,
        "dr",
        schema_for(DagRunSpec),
        _stored_whole(schema_for(DagRunStatus), "taskInstances", TASK_INSTANCES_DOC),
        [
            _column("DAG", ".spec.dagName"),
            _column("State", ".status.state"),
            _column("Run Type", ".spec.runType"),
            _column("Logical Date", ".status.logicalDate", description="None in an Airflow 3 manual run"),
            _column("Run After", ".status.runAfter", description="When the run could start (UTC)"),
            _column("Started", ".status.startDate", "date"),
            # set for a run whose task instances are in DagRunShards (`zonda.resources.run_shards`)
            _column("Progress", ".status.progress", description="Finished task instances / all"),
            _column("Ended", ".status.endDate", "date", priority=1),
            _column("Shards", ".status.taskInstanceShards[*].name", priority=1),
            _column("Run ID", ".status.runId", priority=1),
            _column("Partition", ".spec.partitionKey", priority=1, description="The partition it is for"),
            _column("Message", ".status.message", priority=1),
        ],
        "One run of a DAG over a data interval, with the state of every task instance.",
    )
    trigger = _crd(
        "Trigger",
        TRIGGERS,
        "trig",
        schema_for(TriggerSpec),
        schema_for(TriggerStatus),
        [
            _column("Classpath", ".spec.classpath"),
            _column("DagRun", ".spec.dagRun"),
            _column("Task", ".spec.taskId"),
            _column("State", ".status.state"),
            _column("Shard", ".spec.shard", "integer", priority=1),
            _column("Holder", ".status.holder", priority=1),
            _column("Fired", ".status.firedAt", "date", priority=1),
        ],
        "An asynchronous wait a deferred task handed to the triggerer (Airflow's Trigger).",
    )
    backfill = _crd(
        "Backfill",
        BACKFILLS,
        "bf",
        schema_for(BackfillSpec),
        schema_for(BackfillStatus),
        [
            _column("DAG", ".spec.dagName"),
            _column("From", ".spec.fromDate"),
            _column("To", ".spec.toDate"),
            _column("State", ".status.state"),
            _column("Progress", ".status.progress", description="Finished runs / dates to run"),
            _column("Running", ".status.running", "integer"),
            _column("Failed", ".status.failed", "integer"),
            _column("Reprocess", ".spec.reprocessBehavior", priority=1),
            _column("Max Active", ".spec.maxActiveRuns", "integer", priority=1),
            _column("Next", ".status.nextLogicalDate", priority=1),
            _column("Message", ".status.message", priority=1),
        ],
        "Runs of a DAG for every logical date in a range (Airflow's backfill).",
    )
    xcom_chunk = _crd(
        xcom_chunks.KIND,
        xcom_chunks.PLURAL,
        "xc",
        schema_for(xcom_chunks.XComChunkSpec),
        None,
        [
            _column("DagRun", ".spec.dagRun"),
            _column("Task", ".spec.taskId"),
            _column("Map Index", ".spec.mapIndex", "integer"),
            _column("Key", ".spec.key"),
            _column("Try", ".spec.tryNumber", "integer"),
            _column("Chunk", ".spec.index", "integer"),
            _column("Chunks", ".spec.count", "integer"),
            _column("Bytes", ".spec.size", "integer", priority=1, description="The whole value's JSON"),
        ],
        "A piece of an XCom value too large for its DagRun's status (the Kubernetes XCom backend).",
    )
    pool = _crd(
        "Pool",
        POOLS,
        "pl",
        schema_for(PoolSpec),
        schema_for(PoolStatus),
        [
            _column("Slots", ".spec.slots", "integer", description="-1: unlimited"),
            _column("Used", ".status.used", description="Occupied slots / total"),
            _column("Running", ".status.runningSlots", "integer"),
            _column("Queued", ".status.queuedSlots", "integer"),
            _column("Scheduled", ".status.scheduledSlots", "integer", description="Asked for, waiting"),
            _column("Open", ".status.openSlots", "integer"),
            _column("Deferred", ".status.deferredSlots", "integer", priority=1),
            _column("Include Deferred", ".spec.includeDeferred", "boolean", priority=1),
            _column("Description", ".spec.description", priority=1),
        ],
        "Airflow's pool: slots the task instances naming it share across every run (default_pool is "
        "default-pool).",
    )
    dagrun_shard = _crd(
        run_shards.KIND,
        run_shards.PLURAL,
        "drs",
        schema_for(run_shards.DagRunShardSpec),
        _stored_whole(schema_for(DagRunShardStatus), "taskInstances", TASK_INSTANCES_DOC),
        [_column("DagRun", ".spec.dagRun"), _column("Index", ".spec.index", "integer")],
        "Some of a big DagRun's task instances (past --inline-task-instances), owned by the run.",
    )
    asset = _crd(
        "Asset",
        asset_models.ASSETS,
        "as",
        schema_for(asset_models.AssetSpec),
        schema_for(asset_models.AssetStatus),
        [
            _column("URI", ".spec.uri"),
            _column("Last Event", ".status.lastEventTime", description="When it was last updated (UTC)"),
            _column("Events", ".status.events", "integer"),
            _column("Producing DAGs", ".status.producing"),
            _column("Consuming DAGs", ".status.consuming"),
            _column("Last Event Name", ".status.lastEvent", priority=1),
            _column("Watchers", ".status.watchers", priority=1),
        ],
        "Airflow's Asset (Dataset): data DAGs produce and are scheduled on; named from its URI.",
    )
    asset_event = _crd(
        "AssetEvent",
        asset_models.ASSETEVENTS,
        "ae",
        schema_for(asset_models.AssetEventSpec),
        None,
        [
            _column("URI", ".spec.uri"),
            _column("Source Run", ".spec.sourceRun"),
            _column("Source Task", ".spec.sourceTask"),
            _column("Time", ".spec.timestamp"),
            _column("Partition", ".spec.partitionKey", priority=1, description="The partition it updates"),
            _column("Extra", ".spec.extra", priority=1),
            _column("Source DAG", ".spec.sourceDag", priority=1),
            _column("Source Watcher", ".spec.sourceWatcher", priority=1),
        ],
        "One update of an asset (Airflow's AssetEvent): recorded by a producing task's success, or "
        "created by hand or by another system (Airflow 3's POST /assets/events).",
    )
    return {
        "assets.zonda.dev.yaml": asset,
        "assetevents.zonda.dev.yaml": asset_event,
        "xcomchunks.zonda.dev.yaml": xcom_chunk,
        "dagrunshards.zonda.dev.yaml": dagrun_shard,
        "pools.zonda.dev.yaml": pool,
        "dags.zonda.dev.yaml": dag,
        "dagruns.zonda.dev.yaml": dagrun,
        "triggers.zonda.dev.yaml": trigger,
        "backfills.zonda.dev.yaml": backfill,
    }


def render(crd: Schema) -> str:
    header = "# Generated from zonda/resources by `python -m zonda.resources.crds crds/`: do not edit.\n"
    return header + yaml.safe_dump(crd, sort_keys=False, width=120)


def main(argv: list[str]) -> int:
    target = Path(argv[0] if argv else "crds")
    target.mkdir(parents=True, exist_ok=True)
    for name, crd in generate().items():
        (target / name).write_text(render(crd))
        print(f"wrote {target / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
