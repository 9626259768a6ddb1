"""The manual DagRun a user triggers (`zonda dags trigger`, the UI's trigger button), in each dialect.

An Airflow 2 DAG's manual run is at a logical date: the one given, else the moment of the request (2.10's
`dags trigger`). An Airflow 3 DAG's has none unless given (3.1's `TriggerDAGRunPostBody` and
`trigger_dag._trigger_dag`) and is due at the request's moment, its `run_after`. Either way the object's
name is computed once per request from that moment (`scheduling.dagrun_name`), so a retried create of
the same request is an AlreadyExists, never a second run; the controller then starts it
(`zonda.passes.plans.run_dates`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from zonda.resources.dagrun_models import manual_dagrun
from zonda.resources.models import JsonObject
from zonda.resources.run_types import RunType
from zonda.schedules.scheduling import dagrun_name
from zonda.timetables import load_timetable
from zonda.tries.asset_events import PARTITION_KEY_MAX_LENGTH


@dataclass(frozen=True)
class ManualRun:
    """The run to create: its name, body, and the logical date it has (None: an Airflow 3 run without)."""

    name: str
    body: JsonObject
    logical_date: datetime | None
    run_after: datetime

    def describe(self) -> str:
        """How the CLI names it in a refusal: `at <logical date>`, or `due <run_after>` without one."""
        if self.logical_date is not None:
            return f"at {self.logical_date.isoformat()}"
        return f"due {self.run_after.isoformat()} (no logical date)"


def manual_run(
    dag_name: str,
    dag_spec: Mapping[str, Any],
    namespace: str,
    *,
    logical_date: datetime | None,
    conf: JsonObject,
    now: datetime,
    partition_key: str | None = None,
) -> ManualRun:
    """The manual run of `dag_name` (its stored `spec`) requested at `now`, at `logical_date` if given,
    for `partition_key` if given (Airflow 3.2+'s trigger `partition_key`: a PartitionedAtRuntime DAG's
    run is for the partition its trigger names)."""
    airflow3 = dag_spec.get("airflowVersion") == "3"
    when = logical_date if logical_date is not None else (None if airflow3 else now)
    name = dagrun_name(dag_name, when or now, RunType.MANUAL)
    body = manual_dagrun(
        name,
        namespace,
        dag_name,
        when,
        conf,
        run_after=now if airflow3 else None,
        partition_key=partition_key,
    )
    return ManualRun(name=name, body=body, logical_date=when, run_after=now)


def partition_key_problem(
    dag_name: str, dag_spec: Mapping[str, Any], partition_key: str | None
) -> str | None:
    """Why a trigger's `partition_key` is refused (Airflow's `validate_partition_key`), or None: only a
    partitioned DAG (a CronPartitionTimetable, a PartitionedAssetTimetable, PartitionedAtRuntime) takes
    one, of 1 to 250 characters, not blank."""
    if partition_key is None:
        return None
    if not partition_key.strip() or len(partition_key) > PARTITION_KEY_MAX_LENGTH:
        return f"partition_key must be 1 to {PARTITION_KEY_MAX_LENGTH} characters, not blank"
    partitioned = bool(dag_spec.get("partitionedAtRuntime")) or dag_spec.get("assetPartitions") is not None
    timetable = dag_spec.get("timetable")
    if not partitioned and isinstance(timetable, Mapping):
        try:
            loaded = load_timetable(str(timetable.get("class")), dict(timetable.get("params") or {}))
        except Exception:  # an invalid timetable: the DAG's status says why
            loaded = None
        partitioned = bool(getattr(loaded, "partitioned", False))
    if not partitioned:
        return f"Dag {dag_name!r} is not a partitioned Dag and does not accept a partition_key."
    return None
