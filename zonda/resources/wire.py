"""How Zonda's facts look on the Kubernetes wire: the one definition of each label, annotation and
timestamp format that the controller, the executors, the triggerer and the CLI share.

Pure values and parsers only (no Kubernetes client), so every layer may import it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

# ------------------------------------------------------------------------------------------ labels

#: On task pods and Triggers: the DagRun's uid, how an executor finds the attempts of one run.
LABEL_DAGRUN_UID = "zonda.dev/dagrun-uid"
#: On task pods: a pod deleted before a run's status recorded its try's outcome stays (Terminating)
#: until a pass has recorded it (`zonda.passes.try_tracking`; Kubernetes' Job tracking does the same).
FINALIZER_TRY_TRACKING = "zonda.dev/try-tracking"
#: On task pods, Triggers and scheduled DagRuns: the DAG / DagRun name as a label value.
LABEL_DAG = "zonda.dev/dag"
LABEL_DAGRUN = "zonda.dev/dagrun"
#: On task pods: the task id (as a label value) and the try number.
LABEL_TASK = "zonda.dev/task"
LABEL_TRY = "zonda.dev/try"
#: On a mapped task instance's pods: its map index (Airflow's ti.map_index).
LABEL_MAP_INDEX = "zonda.dev/map-index"
#: On scheduled DagRuns: their run type, so `kubectl get dagruns -l` can tell them from manual ones.
LABEL_RUN_TYPE = "zonda.dev/run-type"
#: On a DagRun created by a `TriggerDagRunOperator`: the DAG and the run that triggered it, so
#: `kubectl get dagruns -l zonda.dev/triggered-by-run=RUN` lists a run's children.
LABEL_TRIGGERED_BY_DAG = "zonda.dev/triggered-by-dag"
LABEL_TRIGGERED_BY_RUN = "zonda.dev/triggered-by-run"
#: On Triggers and the triggerer's shard Leases: the shard number, so a replica watches only its shards.
LABEL_SHARD = "zonda.dev/shard"
#: On the triggerer's Leases: which component and which kind of Lease (shard or member).
LABEL_COMPONENT = "zonda.dev/component"
LABEL_LEASE_KIND = "zonda.dev/lease-kind"

# ------------------------------------------------------------------------------------- annotations

#: On task pods: the full task id (labels cannot hold every task id) and the run's logical date.
ANNOTATION_TASK_ID = "zonda.dev/task-id"
ANNOTATION_LOGICAL_DATE = "zonda.dev/logical-date"
#: On a DAG, "true" makes its scheduled runs owned by it, so deleting the DAG deletes them.
ANNOTATION_DELETE_RUNS = "zonda.dev/delete-runs-with-dag"
#: On the triggerer's member Leases: how many triggers the replica can run.
ANNOTATION_CAPACITY = "zonda.dev/capacity"
#: On DAGs rendered from Python: the Airflow dag_id (object names cannot hold every dag_id).
ANNOTATION_DAG_ID = "zonda.dev/dag-id"
#: On a triggered DagRun: the full parent run name and task id (labels may have had to cut them).
ANNOTATION_TRIGGERED_BY_RUN = "zonda.dev/triggered-by-run"
ANNOTATION_TRIGGERED_BY_TASK = "zonda.dev/triggered-by-task"
#: The kubeconfig context extension naming a local executor's state dir (written by `zonda up`).
KUBECONFIG_STATE_DIR_EXTENSION = "zonda.dev/local-state-dir"


def label_value(text: str) -> str:
    """A valid label value (≤ 63 chars, alphanumeric ends) for ids that may be longer or odd."""
    cleaned = "".join(c if c.isalnum() or c in "-_." else "_" for c in text)[:63]
    return cleaned.strip("-_.") or "x"


# -------------------------------------------------------------------------------------- timestamps


def parse_time(value: Any) -> datetime | None:
    """A timestamp as the API (RFC 3339, `Z` or an offset) or Zonda's own files write it, in UTC.

    None or "" is None; a `datetime` passes through (naive ones are taken as UTC, as the API means
    them); anything else unreadable raises ValueError naming the value.
    """
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        moment = value
    else:
        try:
            moment = datetime.fromisoformat(str(value).strip().replace("Z", "+00:00"))
        except ValueError as exc:
            raise ValueError(f"not a timestamp: {value!r}") from exc
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def format_micro_time(moment: datetime) -> str:
    """Kubernetes MicroTime (RFC 3339 with exactly six fractional digits): Lease times, Event times."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


__all__ = [
    "ANNOTATION_CAPACITY",
    "ANNOTATION_DAG_ID",
    "ANNOTATION_DELETE_RUNS",
    "ANNOTATION_LOGICAL_DATE",
    "ANNOTATION_TASK_ID",
    "ANNOTATION_TRIGGERED_BY_RUN",
    "ANNOTATION_TRIGGERED_BY_TASK",
    "KUBECONFIG_STATE_DIR_EXTENSION",
    "LABEL_COMPONENT",
    "LABEL_DAG",
    "LABEL_DAGRUN",
    "LABEL_DAGRUN_UID",
    "LABEL_LEASE_KIND",
    "LABEL_MAP_INDEX",
    "LABEL_RUN_TYPE",
    "LABEL_SHARD",
    "LABEL_TASK",
    "LABEL_TRIGGERED_BY_DAG",
    "LABEL_TRIGGERED_BY_RUN",
    "LABEL_TRY",
    "format_micro_time",
    "label_value",
    "parse_time",
]
