"""The protocol between the controller and the task runner, which may run in a Pod or a subprocess.

The controller hands the runner a `TaskInvocation` (JSON in the `ZONDA_TASK_INVOCATION` environment
variable); the runner answers with a `TaskResult` (JSON in the container's termination message, or a
file for the local executor). Kubernetes caps a termination message at 4096 bytes, so results are
capped at `RESULT_LIMIT_BYTES` and an oversized XCom fails the task with a clear message.
"""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Any

from pydantic import Field

from zonda.models import CrdModel, Deferral, ExpandSpec, JsonObject, RunType, SlaMissRecord

INVOCATION_ENV = "ZONDA_TASK_INVOCATION"
RESULT_PATH_ENV = "ZONDA_RESULT_PATH"
DEFAULT_RESULT_PATH = "/dev/termination-log"
RESULT_LIMIT_BYTES = 4096
#: Airflow's BashOperator convention: this exit code means "skipped", for any container task too.
SKIP_EXIT_CODE = 99


class CallbackRequest(CrdModel):
    """A callback try the controller launched: the runner calls `callables` instead of the task.

    For failures the task's own process could not report (zombie, timeout, pod lost), for DAG
    callbacks and for SLA misses (`zonda.callbacks`).
    """

    kind: str = Field(
        description="on_failure_callback, on_retry_callback, dag_success, dag_failure, sla_miss."
    )
    callables: list[str] = Field(description="Import paths (pkg.mod:function) or dagfile: references.")
    reason: str | None = Field(default=None, description="A DAG callback's context['reason'].")
    message: str | None = Field(default=None, description="Why the try failed: context['exception'].")
    task_states: dict[str, str] = Field(default_factory=dict, description="Every task instance's state.")
    sla_misses: list[SlaMissRecord] = Field(default_factory=list)


class TaskInvocation(CrdModel):
    """Everything the runner needs to execute one try of one task instance, with Airflow's context."""

    dag_name: str
    run_name: str
    run_uid: str | None = Field(default=None, description="The DagRun's uid: the owner of stored XComs.")
    namespace: str | None = None
    run_type: RunType
    task_id: str
    map_index: int = Field(default=-1, description="A mapped task's instance (Airflow's ti.map_index).")
    expand: ExpandSpec | None = Field(default=None, description="How a mapped instance picks its arguments.")
    mapped_counts: dict[str, int] = Field(
        default_factory=dict, description="Mapped upstreams' instance counts: `xcoms` holds `task[i]` keys."
    )
    try_number: int
    max_tries: int = 0
    operator: str | None = None
    args: JsonObject = Field(default_factory=dict)
    logical_date: datetime
    data_interval_start: datetime
    data_interval_end: datetime
    timezone: str = "UTC"
    conf: JsonObject = Field(default_factory=dict)
    params: JsonObject = Field(default_factory=dict)
    user_defined_macros: dict[str, str] = Field(default_factory=dict, description="Name -> import path.")
    user_defined_filters: dict[str, str] = Field(default_factory=dict, description="Name -> import path.")
    render_template_as_native_obj: bool = False
    xcoms: dict[str, Any] = Field(default_factory=dict, description="Return values of finished tasks.")
    keyed_xcoms: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="Other XComs of finished tasks (xcom_push), by task id and key."
    )
    prev_data_interval_start_success: datetime | None = None
    prev_data_interval_end_success: datetime | None = None
    first_try_start: datetime | None = None  # a rescheduled sensor's first poke (for its timeout)
    next_method: str | None = None  # set when resuming after a deferral
    next_kwargs: JsonObject | None = None  # includes `event` when resuming after a deferral
    callbacks: dict[str, list[str]] = Field(
        default_factory=dict,
        description="The task's callbacks by kind (on_success_callback...), run by the runner.",
    )
    callback: CallbackRequest | None = Field(
        default=None, description="Set for a callback try: run these callbacks, not the task."
    )


class TaskOutcome(enum.StrEnum):
    SUCCESS = "success"
    FAILED = "failed"  # retried while tries remain
    FAILED_NO_RETRY = "failed_no_retry"  # AirflowFailException, sensor timeout
    SKIPPED = "skipped"  # AirflowSkipException, Bash exit 99
    DEFERRED = "deferred"  # TaskDeferred: `deferral` says how to wait and resume
    RESCHEDULE = "reschedule"  # a sensor in reschedule mode: poke again at `reschedule_at`


class TaskResult(CrdModel):
    outcome: TaskOutcome
    xcom: Any = None
    xcoms: dict[str, Any] = Field(
        default_factory=dict, description="Values pushed with xcom_push (and multiple_outputs keys), by key."
    )
    xcom_lengths: dict[str, int] = Field(
        default_factory=dict, description="Lengths of the list and dict XComs (what mapped tasks count)."
    )
    follow_task_ids: list[str] | None = Field(
        default=None, description="Branch decision: direct downstream ids to follow; the rest are skipped."
    )
    skip_all_downstream: bool = Field(
        default=False, description="ShortCircuit ignoring trigger rules: skip every downstream task."
    )
    deferral: Deferral | None = None
    reschedule_at: datetime | None = None
    message: str | None = None
    started_at: datetime | None = Field(
        default=None, description="When the runner began the try (sub-second; a pod's status has seconds)."
    )
    ended_at: datetime | None = Field(default=None, description="When the runner finished the try.")
    terminated: bool = Field(
        default=False,
        description="Stopped by SIGTERM (a kill, a deleted pod): no callback ran; the controller runs it.",
    )

    def attempt_times(
        self, started: datetime | None, finished: datetime | None
    ) -> tuple[datetime | None, datetime | None]:
        """The try's start and end: the runner's own clock where it said, else what the executor saw."""
        return self.started_at or started, self.ended_at or finished
