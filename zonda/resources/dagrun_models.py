"""The `DagRun` resource's shape: its spec, and the status the controller writes (task instances,
callbacks launched, SLA misses).

Its own module because a run's status is the largest model and the one most code reads; the shared
base (`CrdModel`, the states, `Condition`) is in `zonda.resources.models`.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from pydantic import Field

from zonda.resources import wire
from zonda.resources.asset_models import TriggeringEvent
from zonda.resources.models import (
    API_VERSION,
    Condition,
    CrdModel,
    DagRunState,
    JsonObject,
    TaskInstanceState,
)
from zonda.resources.run_shards import ShardRef
from zonda.resources.run_types import RunType


class DataIntervalSpec(CrdModel):
    start: datetime
    end: datetime


class DagRunSpec(CrdModel):
    dag_name: str = Field(min_length=1)
    run_type: RunType = RunType.MANUAL
    logical_date: datetime | None = Field(
        default=None,
        description=(
            "Defaults to the run's creation time for manual runs; a manual run of an Airflow 3 DAG "
            "(airflowVersion 3) has none unless given, as in Airflow 3."
        ),
    )
    run_after: datetime | None = Field(
        default=None,
        description="When the run may start (Airflow 3's run_after); defaults to its creation time.",
    )
    data_interval: DataIntervalSpec | None = Field(
        default=None, description="Defaults to the timetable's infer_manual_data_interval."
    )
    conf: JsonObject = Field(default_factory=dict)
    partition_key: str | None = Field(
        default=None,
        max_length=250,
        description="The partition the run is for (Airflow 3.2+'s dag_run.partition_key): set by a "
        "CronPartitionTimetable, a PartitionedAssetTimetable, or whoever triggers a PartitionedAtRuntime "
        "DAG; the asset events its tasks emit carry it.",
    )
    partition_date: datetime | None = Field(
        default=None,
        description="The start of the run's partition when its key is a time (Airflow's "
        "dag_run.partition_date): a CronPartitionTimetable's firing, a temporal mapper's period.",
    )
    triggering_asset_events: list[TriggeringEvent] | None = Field(
        default=None,
        description="An asset-triggered run's consumed AssetEvents (its tasks' triggering_asset_events).",
    )


def manual_dagrun(
    name: str,
    namespace: str,
    dag: str,
    logical_date: datetime | None,
    conf: JsonObject,
    *,
    run_after: datetime | None = None,
    partition_key: str | None = None,
) -> JsonObject:
    """The DagRun `zonda trigger` creates (`name` from `zonda.schedules.scheduling.dagrun_name`, so the same
    trigger twice is refused as a duplicate rather than run twice). No `logical_date`: an Airflow 3
    manual run, due at `run_after`."""
    spec = DagRunSpec(
        dag_name=dag,
        run_type=RunType.MANUAL,
        logical_date=logical_date,
        run_after=run_after,
        conf=conf,
        partition_key=partition_key,
    )
    return {
        "apiVersion": API_VERSION,
        "kind": "DagRun",
        "metadata": {"name": name, "namespace": namespace, "labels": dagrun_labels(dag, RunType.MANUAL)},
        "spec": spec.to_wire(),
    }


def dagrun_labels(dag: str, run_type: RunType) -> dict[str, str]:
    """The labels every DagRun Zonda creates carries: its DAG (so a DAG's runs are listed by label
    selector, as `include_prior_dates` does, not by reading the namespace's) and its run type."""
    return {wire.LABEL_DAG: wire.label_value(dag), wire.LABEL_RUN_TYPE: run_type.value}


def dag_label_problem(metadata: Mapping[str, Any], dag: str) -> str | None:
    """What a run (made by hand, say) without the DAG label of `dagrun_labels` misses, or None."""
    label = f"{wire.LABEL_DAG}={wire.label_value(dag)}"
    if (metadata.get("labels") or {}).get(wire.LABEL_DAG) == wire.label_value(dag):
        return None
    return (
        f"this DagRun lacks the label {label}: the DAG's later runs find their earlier runs by it, so "
        "their xcom_pull(include_prior_dates=True) will not see this run's XComs (add the label; "
        "zonda trigger and the UI set it)"
    )


class Deferral(CrdModel):
    """What a deferred task handed to the triggerer, and how it resumes (Airflow's TaskDeferred)."""

    trigger_classpath: str
    trigger_kwargs: JsonObject = Field(default_factory=dict)
    method_name: str = "execute_complete"
    kwargs: JsonObject = Field(default_factory=dict)
    timeout_seconds: float | None = None


class TaskInstanceStatus(CrdModel):
    state: TaskInstanceState = TaskInstanceState.NONE
    try_number: int = Field(default=0, ge=0, description="Tries started so far; the current try's number.")
    max_tries: int | None = Field(default=None, description="Retries allowed (Airflow's max_tries).")
    pod_name: str | None = None
    executor: str | None = None
    queued_at: datetime | None = None
    start_date: datetime | None = None
    end_date: datetime | None = None
    duration_seconds: float | None = None
    running_seconds: float = Field(
        default=0.0, description="Runtime of the current try across deferrals (for executionTimeout)."
    )
    exit_code: int | None = None
    message: str | None = None
    reason: str | None = Field(default=None, description="Why the task is in this state.")
    xcom: Any = Field(default=None, description="The task's return value (XCom return_value).")
    xcoms: JsonObject | None = Field(
        default=None, description="The task's other XComs (xcom_push, multiple_outputs keys), by key."
    )
    follow_task_ids: list[str] | None = Field(
        default=None, description="A branch task's chosen downstream ids."
    )
    next_try_at: datetime | None = Field(
        default=None, description="When an up_for_retry/reschedule task runs."
    )
    first_try_start: datetime | None = Field(default=None, description="Start of a sensor's first poke.")
    deferral: Deferral | None = None
    deferral_count: int = 0
    deferred_at: datetime | None = None
    trigger_timeout_at: datetime | None = None
    trigger_name: str | None = None
    next_method: str | None = None
    next_kwargs: JsonObject | None = None
    xcom_lengths: dict[str, int] | None = Field(
        default=None, description="Lengths of its list or dict XComs, by key: what mapped tasks expand over."
    )


class CallbackRecord(CrdModel):
    """A callback try the controller launched (zonda.passes.callbacks): kept so no restart launches it
    again."""

    name: str = Field(description="The callback try's pod (or local process) name, deterministic.")
    kind: str = Field(
        description="on_failure_callback, on_retry_callback, dag_success, dag_failure or sla_miss."
    )
    task_id: str | None = None
    try_number: int | None = None
    reason: str | None = None
    launched_at: datetime
    state: str = Field(default="launched", description="launched, succeeded or failed.")


class SlaMissRecord(CrdModel):
    """Airflow's SlaMiss: a task not done by its data interval end plus its sla (recorded once)."""

    task_id: str
    deadline: datetime
    detected_at: datetime


class DagRunStatus(CrdModel):
    observed_generation: int | None = None
    state: DagRunState | None = None
    run_id: str | None = None
    queued_at: datetime | None = None
    start_date: datetime | None = None
    end_date: datetime | None = None
    #: None for an Airflow 3 manual run given none (and then no data interval either).
    logical_date: datetime | None = None
    data_interval_start: datetime | None = None
    data_interval_end: datetime | None = None
    run_after: datetime | None = Field(
        default=None, description="When the run could start (Airflow 3's run_after), set when it starts."
    )
    dag_generation: int | None = None
    dag_spec: JsonObject | None = Field(default=None, description="The DAG spec this run started with.")
    task_instances: dict[str, TaskInstanceStatus] = Field(default_factory=dict)
    conditions: list[Condition] = Field(default_factory=list)
    message: str | None = None
    callbacks: list[CallbackRecord] = Field(
        default_factory=list, description="Callback tries launched by the controller, each once."
    )
    sla_misses: list[SlaMissRecord] = Field(
        default_factory=list, description="SLA misses, each recorded once."
    )
    # A big run's stored form (`zonda.resources.run_shards`): its task instances are in these shards,
    # and a summary of them is here. Only in what the API stores: a run read whole has none of them.
    task_instance_shards: list[ShardRef] | None = Field(
        default=None, description="The DagRunShard objects holding this run's task instances."
    )
    task_counts: dict[str, int] | None = Field(
        default=None, description="Task instances by state (a run whose instances are in shards)."
    )
    progress: str | None = Field(
        default=None, description="Finished task instances / all (a run whose instances are in shards)."
    )

    def to_wire(self) -> dict[str, Any]:
        """As every model, and without the task instances' zero counters (a mapped task has up to
        1,024 instances; a reader parsing the status gets the defaults back)."""
        wire = super().to_wire()
        for ti in (wire.get("taskInstances") or {}).values():
            for name, default in _DROPPED_TI_DEFAULTS.items():
                if ti.get(name) == default:
                    del ti[name]
        return wire


class DagRunShardStatus(CrdModel):
    """Some of a big run's task instances (`zonda.resources.run_shards`)."""

    task_instances: dict[str, TaskInstanceStatus] = Field(default_factory=dict)


#: Task-instance fields left out of the wire when they hold these defaults (`DagRunStatus.to_wire`).
_DROPPED_TI_DEFAULTS = {"deferralCount": 0, "runningSeconds": 0.0}
