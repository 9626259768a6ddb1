"""The resources' shared base and the `DAG` resource's shape: pydantic models (group `zonda.dev`).

Every resource's model derives from `CrdModel` (here, with the group, version and common field
types); each resource's models live in their own module of this package: `DAG` here, `DagRun` in
`dagrun_models`, `Trigger` in `trigger_models`, `Backfill` in `backfill_models`, `Pool` in
`pool_models`, `XComChunk` in `xcom_chunks`. The task-instance and run states live here because both
the DAG's status and the DagRun's use them.

These models are the single source of truth: `zonda.resources.crds` generates the CRDs' openAPIV3Schema from
them and a test keeps `crds/` equal to the generated files. Python attributes are snake_case; the
Kubernetes wire format is camelCase (aliases), as every Kubernetes API is.

Invariants:
- `spec` belongs to the user (or GitOps); the controller only ever writes `status`.
- `DagRun.status.dag_spec` is the DAG spec the run started with, so editing a DAG never changes a
  run in flight.
"""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

from zonda.resources.asset_refs import AssetRef
from zonda.resources.durations import DURATION_PATTERN

GROUP = "zonda.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
#: The resources' plurals (their path in the API): the one definition, for the CRDs and every client.
DAGS = "dags"
DAGRUNS = "dagruns"
TRIGGERS = "triggers"
POOLS = "pools"
BACKFILLS = "backfills"

#: A duration string such as ``30s``, ``5m`` or ``1h30m`` (see `zonda.resources.durations.parse_duration`).
Duration = Annotated[str, Field(pattern=DURATION_PATTERN, json_schema_extra={"format": "duration"})]
#: Airflow task ids: letters, digits, ``_``, ``-`` and ``.`` (``.`` joins task-group prefixes).
TASK_ID_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,249}$"
TaskId = Annotated[str, Field(pattern=TASK_ID_PATTERN)]

#: Free-form JSON (operator args, conf, XCom values): kept as-is by the apiserver.
JsonObject = dict[str, Any]


class CrdModel(BaseModel):
    """camelCase on the wire, snake_case in Python; unknown fields are errors, not silently dropped."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
        use_enum_values=False,
    )

    def to_wire(self) -> dict[str, Any]:
        """The JSON the Kubernetes API stores (camelCase, no unset/None fields)."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class TriggerRule(enum.StrEnum):
    """Airflow's trigger rules, with Airflow's names and values."""

    ALL_SUCCESS = "all_success"
    ALL_FAILED = "all_failed"
    ALL_DONE = "all_done"
    ALL_DONE_SETUP_SUCCESS = "all_done_setup_success"
    ALL_SKIPPED = "all_skipped"
    ONE_FAILED = "one_failed"
    ONE_SUCCESS = "one_success"
    ONE_DONE = "one_done"
    NONE_FAILED = "none_failed"
    NONE_FAILED_MIN_ONE_SUCCESS = "none_failed_min_one_success"
    NONE_SKIPPED = "none_skipped"
    ALWAYS = "always"


class WeightRule(enum.StrEnum):
    """How a task's effective priority weight is computed (Airflow's `weight_rule`)."""

    DOWNSTREAM = "downstream"
    UPSTREAM = "upstream"
    ABSOLUTE = "absolute"


class TaskInstanceState(enum.StrEnum):
    """Airflow's task-instance states. `NONE` is Airflow's ``None`` (not yet considered)."""

    NONE = "none"
    SCHEDULED = "scheduled"
    QUEUED = "queued"
    RUNNING = "running"
    SUCCESS = "success"
    FAILED = "failed"
    SKIPPED = "skipped"
    UPSTREAM_FAILED = "upstream_failed"
    UP_FOR_RETRY = "up_for_retry"
    UP_FOR_RESCHEDULE = "up_for_reschedule"
    DEFERRED = "deferred"
    REMOVED = "removed"
    RESTARTING = "restarting"


FINISHED_TI_STATES = frozenset(
    {
        TaskInstanceState.SUCCESS,
        TaskInstanceState.FAILED,
        TaskInstanceState.SKIPPED,
        TaskInstanceState.UPSTREAM_FAILED,
        TaskInstanceState.REMOVED,
    }
)


class DagRunState(enum.StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCESS = "success"
    FAILED = "failed"


# --------------------------------------------------------------------------------------------- DAG


class TimetableRef(CrdModel):
    """A custom timetable: a `zonda.timetables.Timetable` subclass imported by path."""

    class_: str = Field(alias="class", description="Import path, `pkg.mod.Class` or `pkg.mod:Class`.")
    params: JsonObject = Field(default_factory=dict, description="Passed to the class's `deserialize`.")


class PriorityStrategyRef(CrdModel):
    """A custom priority weight strategy (Airflow's `weight_rule=` a `PriorityWeightStrategy`)."""

    class_: str = Field(alias="class", description="Import path of the strategy class, `pkg.mod.Class`.")
    params: JsonObject = Field(default_factory=dict, description="Its `serialize()`, given to `deserialize`.")


class RetryPolicyRef(CrdModel):
    """Airflow 3.3's `retry_policy`: a `RetryPolicy` the task runner evaluates when a try raises."""

    class_: str = Field(alias="class", description="Import path of the policy class, `pkg.mod.Class`.")
    params: JsonObject = Field(default_factory=dict, description="Its `serialize()`, given to `deserialize`.")


class TaskDefaults(CrdModel):
    """Airflow's `default_args`: what a DAG or a task group gives every task that does not say."""

    owner: str | None = None
    args: JsonObject | None = Field(default=None, description="Operator keyword arguments (snake_case).")
    trigger_rule: TriggerRule | None = None
    retries: int | None = Field(default=None, ge=0)
    retry_delay: Duration | None = None
    retry_exponential_backoff: bool | None = None
    max_retry_delay: Duration | None = None
    execution_timeout: Duration | None = None
    depends_on_past: bool | None = None
    wait_for_past_depends_before_skipping: bool | None = Field(
        default=None,
        description="With dependsOnPast: a task its trigger rule skips waits for the past first.",
    )
    priority_weight: int | None = None
    weight_rule: WeightRule | None = None
    weight_strategy: PriorityStrategyRef | None = Field(
        default=None, description="A custom weight rule: the task instance's weight is its get_weight(ti)."
    )
    retry_policy: RetryPolicyRef | None = Field(
        default=None, description="Decides, from a failed try's exception, to retry (after a delay) or fail."
    )
    pool: str | None = Field(
        default=None, description="Airflow's pool: the Pool named so (`_` as `-`); unset: default_pool."
    )
    pool_slots: int | None = Field(default=None, ge=1, description="Pool slots the task holds while it runs.")
    max_active_tis_per_dag: int | None = Field(
        default=None, ge=1, description="This task's instances running at once across the DAG's runs."
    )
    max_active_tis_per_dagrun: int | None = Field(
        default=None, ge=1, description="This task's instances (mapped ones) running at once in one run."
    )
    queue: str | None = None
    container: JsonObject | None = Field(default=None, description="Kubernetes container fields.")
    pod_override: JsonObject | None = Field(default=None, description="Pod fields merged over the default.")
    connections: list[str] | None = Field(
        default=None,
        description="Connection ids the task reads (Secrets labelled zonda.dev/connections); "
        "`*conn_id` arguments and `conn.ID` in templates are added without saying.",
    )
    variables: list[str] | None = Field(
        default=None,
        description="Variables the task reads from Secrets labelled zonda.dev/variables "
        "(ConfigMap variables reach every task); `var.value.KEY` in templates is added without saying.",
    )
    # Airflow's task callbacks, each a list of import paths (pkg.mod:function) or `dagfile:` references.
    on_execute_callback: list[str] | None = Field(default=None, description="Called before the task runs.")
    on_success_callback: list[str] | None = Field(default=None, description="Called when the task succeeds.")
    on_failure_callback: list[str] | None = Field(
        default=None, description="Called when the task fails for good (also zombies and timeouts)."
    )
    on_retry_callback: list[str] | None = Field(
        default=None, description="Called when a try fails and retries."
    )
    on_skipped_callback: list[str] | None = Field(
        default=None, description="Called when the task skips itself."
    )
    # Airflow's `pre_execute`/`post_execute` operator arguments: run in the try, an error fails it.
    pre_execute: list[str] | None = Field(
        default=None, description="Called with the context just before the task executes (Airflow's)."
    )
    post_execute: list[str] | None = Field(
        default=None, description="Called with the context and the result once the task executed."
    )
    sla: Duration | None = Field(
        default=None,
        description="Airflow's sla: the task should succeed this long after the data interval end.",
    )


class ExpandSpec(CrdModel):
    """Airflow's dynamic task mapping: one task instance per item, counted when the upstreams finish.

    A *source* is a literal list (or dict: its items as ``[key, value]`` pairs), an XCom reference
    (`zonda.resources.xcom_refs`) or a zip or map of sources (`zonda.specs.mapping` says how they are
    written).
    """

    kwargs: JsonObject | None = Field(
        default=None, description="`.expand(name=source)`: an instance per combination of the sources' items."
    )
    kwargs_list: Any = Field(
        default=None, description="`.expand_kwargs(source)`: one instance per dict of arguments."
    )
    into: str | None = Field(
        default=None, description="The argument the mapped values go in (TaskFlow: `op_kwargs`); unset: args."
    )


class TaskSpec(TaskDefaults):
    """One task. Fields left unset come from its group's, then the DAG's, `defaultArgs`."""

    id: TaskId
    operator: str | None = Field(
        default=None,
        description="Built-in operator name (e.g. BashOperator) or import path pkg.mod.Class; "
        "absent: run `container` as-is.",
    )
    depends_on: list[str] = Field(default_factory=list, description="Upstream task or task-group ids.")
    edge_labels: dict[str, str] = Field(
        default_factory=dict, description="Labels of the edges from upstream ids (display only)."
    )
    group: str | None = Field(default=None, description="Id of the task group this task belongs to.")
    display_name: str | None = Field(
        default=None,
        description="Airflow's task_display_name: shown instead of the task id where people read (the UI).",
    )
    doc_md: str | None = None
    is_setup: bool | None = Field(default=None, description="Airflow's as_setup(): prepares resources.")
    is_teardown: bool | None = Field(
        default=None, description="Airflow's as_teardown(): cleans up; its failure does not fail the run."
    )
    on_failure_fail_dagrun: bool | None = Field(
        default=None, description="A teardown whose failure fails the run (Airflow's on_failure_fail_dagrun)."
    )
    params_schema: JsonObject | None = Field(
        default=None,
        description="JSON schema of the task's own params (Airflow's task-level Param; values in "
        "args.params): the run's params merged with the task's must satisfy it.",
    )
    expand: ExpandSpec | None = Field(default=None, description="Dynamic task mapping (Airflow's .expand()).")
    outlets: list[AssetRef] | None = Field(
        default=None, description="Assets the task updates: each success records an AssetEvent."
    )
    inlets: list[AssetRef] | None = Field(default=None, description="Assets the task reads (lineage).")


class TaskGroupSpec(CrdModel):
    """Airflow's TaskGroup: a named set of tasks with shared defaults and a shared id prefix."""

    id: TaskId
    parent: str | None = Field(default=None, description="Enclosing task group id.")
    prefix_group_id: bool = True
    default_args: TaskDefaults | None = None
    depends_on: list[str] = Field(default_factory=list, description="Upstreams of the group's roots.")
    edge_labels: dict[str, str] = Field(
        default_factory=dict,
        description="Labels of the edges from upstream ids into the group's roots (display only).",
    )
    tooltip: str | None = None
    expand: ExpandSpec | None = Field(
        default=None,
        description="A mapped task group (`@task_group` `.expand`/`.expand_kwargs`): each map index runs "
        "the group's tasks, which read its arguments through markers (`zonda.specs.mapped_groups`).",
    )


#: The most template-file text (`DagSpec.template_files`, all files together) one DAG carries.
MAX_TEMPLATE_FILES_BYTES = 256 * 1024


class DagSpec(CrdModel):
    airflow_version: Literal["2", "3"] | None = Field(
        default=None,
        description="The Airflow whose semantics the DAG's file was written for (set by `zonda dags render "
        '--airflow-compat`): "3" drops the context keys Airflow 3 removed (execution_date, conf) and adds '
        'its own (try_number, dag_run.run_after); "2" adds Airflow 2\'s deprecated ones (next_ds, '
        "tomorrow_ds...).",
    )
    schedule: str | None = Field(
        default=None,
        description="Cron expression, preset (@once @hourly @daily @weekly @monthly @quarterly @yearly) "
        "or a duration (1h30m); absent or null: manual runs only.",
    )
    timetable: TimetableRef | None = None
    asset_schedule: JsonObject | None = Field(
        default=None,
        description="Run when assets are updated (Airflow's schedule=[Dataset(...)]): {uri: ...}, "
        "{alias: ...}, {all: [...]} or {any: [...]}; with a schedule or timetable too, either starts a "
        "run (DatasetOrTimeSchedule).",
    )
    asset_run_type: str | None = Field(
        default=None,
        pattern="^(asset_triggered|dataset_triggered)$",
        description="The run type of asset runs: asset_triggered (Airflow 3, the default) or "
        "dataset_triggered (Airflow 2 files).",
    )
    asset_partitions: JsonObject | None = Field(
        default=None,
        description="Airflow's PartitionedAssetTimetable: with assetSchedule, a run per partition key of "
        "the assets' events once the condition holds for that key. {defaultMapper: {kind: ...}, mappers: "
        "[{uri, mapper}]}; each event's key goes through its asset's mapper (IdentityMapper, "
        "StartOfHourMapper..., RollupMapper, FanOutMapper).",
    )
    partitioned_at_runtime: bool = Field(
        default=False,
        description="Airflow's PartitionedAtRuntime: no scheduled runs; a run's partition key is given "
        "when it is triggered (DagRun spec.partitionKey) or its tasks add partitions to their events.",
    )
    timezone: str = "UTC"
    start_date: datetime | None = None
    end_date: datetime | None = None
    catchup: bool = True
    paused: bool = False
    max_active_runs: int = Field(default=16, ge=1)
    max_active_tasks: int = Field(default=16, ge=1)
    dagrun_timeout: Duration | None = None
    successful_runs_history_limit: int | None = Field(
        default=None, ge=0, description="Keep this many newest successful runs (and their pods); unset: all."
    )
    failed_runs_history_limit: int | None = Field(
        default=None, ge=0, description="Keep this many newest failed runs (and their pods); unset: all."
    )
    delete_worker_pods: bool = Field(
        default=False,
        description="Delete a finished run's succeeded task pods, and their logs with them (Airflow's "
        "delete_worker_pods); failed pods stay unless deleteWorkerPodsOnFailure.",
    )
    delete_worker_pods_on_failure: bool = Field(
        default=False,
        description="With deleteWorkerPods: delete failed task pods too (Airflow's "
        "delete_worker_pods_on_failure); unset keeps them for debugging.",
    )
    default_args: TaskDefaults | None = None
    params: JsonObject = Field(default_factory=dict, description="Default values, seen as `params.x`.")
    params_schema: JsonObject | None = Field(
        default=None,
        description="JSON schema (type object, a property per param) that params merged with a run's "
        "conf must satisfy; Airflow's Param(default, type=..., ...).",
    )
    tags: list[str] = Field(default_factory=list)
    display_name: str | None = Field(
        default=None, description="Airflow's dag_display_name: shown instead of the DAG id where people read."
    )
    doc_md: str | None = None
    user_defined_macros: dict[str, str] = Field(
        default_factory=dict,
        description="Airflow's user_defined_macros: template globals, name -> import path (pkg.mod:obj).",
    )
    user_defined_filters: dict[str, str] = Field(
        default_factory=dict,
        description="Airflow's user_defined_filters: Jinja filters, name -> import path (pkg.mod:function).",
    )
    render_template_as_native_obj: bool = Field(
        default=False, description="Render templates to Python objects (Jinja's NativeEnvironment), not text."
    )
    template_files: dict[str, str] = Field(
        default_factory=dict,
        description="Template files (Airflow's template_ext, templates_exts) the DAG's templated fields "
        "name, read from the DAG file's folder and template_searchpath when it was rendered: name -> text.",
    )
    on_success_callback: list[str] = Field(
        default_factory=list,
        description="Airflow's DAG on_success_callback: import paths, called once per run.",
    )
    on_failure_callback: list[str] = Field(
        default_factory=list,
        description="Airflow's DAG on_failure_callback: import paths, called once per run.",
    )
    sla_miss_callback: list[str] = Field(
        default_factory=list,
        description="Called once per SLA miss with (dag, task_list, blocking_task_list, slas, blocking_tis).",
    )
    task_groups: list[TaskGroupSpec] = Field(default_factory=list)
    tasks: list[TaskSpec] = Field(min_length=1)

    @field_validator("template_files")
    @classmethod
    def _template_files_fit(cls, files: dict[str, str]) -> dict[str, str]:
        """A hand-written manifest is held to what `zonda dags render` carries: the spec is copied into
        every run's status, and etcd keeps an object of at most 1.5 MiB."""
        total = sum(len(text.encode()) for text in files.values())
        if total > MAX_TEMPLATE_FILES_BYTES:
            raise ValueError(
                f"templateFiles total {total} bytes, more than {MAX_TEMPLATE_FILES_BYTES}: keep large "
                "scripts in the task image"
            )
        return files


class Condition(CrdModel):
    """A Kubernetes-style condition; `last_transition_time` changes only when `status` changes."""

    type: str
    status: str = Field(description="True, False or Unknown.")
    reason: str
    message: str = ""
    last_transition_time: datetime
    observed_generation: int | None = None


class DagStatus(CrdModel):
    observed_generation: int | None = None
    conditions: list[Condition] = Field(default_factory=list)
    schedule: str | None = Field(
        default=None, description="spec.schedule as written, else the timetable's summary (None: manual)."
    )
    paused: bool | None = Field(
        default=None, description="spec.paused as the controller last saw it: true or false, never unset."
    )
    timetable_summary: str | None = None
    next_logical_date: datetime | None = None
    next_run_after: datetime | None = None
    next_data_interval_start: datetime | None = None
    next_data_interval_end: datetime | None = None
    last_automated_data_interval_start: datetime | None = None
    last_automated_data_interval_end: datetime | None = None
    asset_cursor_time: datetime | None = Field(
        default=None,
        description="Asset events recorded (creationTimestamp) before this are not pending: those "
        "before the DAG, and those older than the newest 1,000 consumed.",
    )
    asset_cursor_events: list[str] | None = Field(
        default=None, description="The consumed asset events that still exist (the newest 1,000)."
    )
    awaited_assets: list[str] | None = Field(
        default=None, description="Assets of the asset schedule with no event since the last asset run."
    )
    last_run: str | None = Field(default=None, description="Name of the newest DagRun.")
    last_run_state: DagRunState | None = None
    active_runs: int = 0


def dag_display_fields(spec: DagSpec, timetable_summary: str) -> dict[str, Any]:
    """What `kubectl get dags` shows that the spec alone cannot (an unset field prints empty).

    Pure: the controller merges it into every DAG status it writes, so it changes only with the spec.
    """
    schedule = spec.schedule or timetable_summary
    if spec.asset_schedule is not None:
        schedule = "Asset" if spec.schedule is None and spec.timetable is None else f"Asset or {schedule}"
    return {"schedule": schedule, "paused": spec.paused}
