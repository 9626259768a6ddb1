"""The protocol between the controller and the task runner, which may run in a Pod or a subprocess.

The controller hands the runner a `TaskInvocation` (JSON in the `ZONDA_TASK_INVOCATION` environment
variable); the runner answers with a `TaskResult` (JSON in the container's termination message, or a
file for the local executor). Kubernetes caps a termination message at 4096 bytes, so results are
capped at `RESULT_LIMIT_BYTES` and an oversized XCom fails the task with a clear message.

These are msgspec structs, not pydantic models like the resources in `zonda.resources.models`: every try of
every task decodes one and encodes the other in a fresh process, where importing pydantic and
building Zonda's models would cost more than a `true` task itself (docs/decisions.md). They keep the
resources' conventions: camelCase on the wire, unknown fields refused, frozen. `decode_*` validate
what they read and raise `ValueError` saying what is wrong and where.
"""

from __future__ import annotations

import enum
from collections.abc import MutableMapping
from datetime import date, datetime
from typing import TYPE_CHECKING, Any, Self

import msgspec

from zonda.resources.run_types import RunType

if TYPE_CHECKING:
    from zonda.resources import dagrun_models, models

INVOCATION_ENV = "ZONDA_TASK_INVOCATION"
#: An invocation past `MAX_ENV_STRING` goes in parts: this variable says how many, each part in
#: `ZONDA_TASK_INVOCATION_<i>` (see `invocation_env`).
INVOCATION_PARTS_ENV = "ZONDA_TASK_INVOCATION_PARTS"
#: Linux's MAX_ARG_STRLEN (128 KiB) less room for the name: no exec takes a longer environment string.
MAX_ENV_STRING = 128 * 1024 - 64
RESULT_PATH_ENV = "ZONDA_RESULT_PATH"
DEFAULT_RESULT_PATH = "/dev/termination-log"
RESULT_LIMIT_BYTES = 4096
#: Airflow's BashOperator convention: this exit code means "skipped", for any container task too.
SKIP_EXIT_CODE = 99


def invocation_env(text: str) -> dict[str, str]:
    """The environment variables that hand the invocation `text` to a runner it execs.

    One variable while it is shorter than `MAX_ENV_STRING`; past it, parts of at most that many
    bytes less one (cut between UTF-8 characters) and their count. Linux refuses to exec a process with one
    environment string past 128 KiB ("Argument list too long"), so a run's 1 MB conf in one variable
    stopped the container's entrypoint itself; in parts it needs only the environment's total room
    (a quarter of the stack limit: 2 MiB by default), more than a pod the apiserver accepts holds.
    """
    data = text.encode()
    if len(data) < MAX_ENV_STRING:
        return {INVOCATION_ENV: text}
    parts: list[str] = []
    start = 0
    while start < len(data):
        end = min(start + MAX_ENV_STRING - 1, len(data))
        while end < len(data) and data[end] & 0xC0 == 0x80:  # not inside a character
            end -= 1
        parts.append(data[start:end].decode())
        start = end
    return {INVOCATION_PARTS_ENV: str(len(parts))} | {
        f"{INVOCATION_ENV}_{i}": part for i, part in enumerate(parts)
    }


def pop_invocation_env(environ: MutableMapping[str, str]) -> str | None:
    """The invocation `invocation_env` put in `environ`, taken out of it (None: there is none).

    Taken out: it holds the run's whole conf, and a process the task starts (bash, a subprocess)
    would inherit it, where Linux refuses to exec with one string past 128 KiB.
    """
    whole = environ.pop(INVOCATION_ENV, None)
    count = environ.pop(INVOCATION_PARTS_ENV, None)
    if count is None:
        return whole
    parts = [environ.pop(f"{INVOCATION_ENV}_{i}", None) for i in range(int(count))]
    missing = [i for i, part in enumerate(parts) if part is None]
    if missing:
        raise ValueError(f"${INVOCATION_PARTS_ENV} says {count} parts; part(s) {missing} are not set")
    return "".join(part for part in parts if part is not None)


#: Free-form JSON (operator args, conf, XCom values).
JsonObject = dict[str, Any]


def _plain(value: Any) -> Any:
    """What msgspec cannot encode by itself: subclasses of `datetime` and `date` (pendulum's, which
    timetables and the run's start produce) become the standard types, at the same instant."""
    if isinstance(value, datetime):
        return datetime.fromisoformat(value.isoformat())
    if isinstance(value, date):
        return date.fromisoformat(value.isoformat())
    raise NotImplementedError(f"{type(value).__name__} is not JSON: {value!r}")


class WireStruct(msgspec.Struct, rename="camel", forbid_unknown_fields=True, frozen=True):
    """camelCase on the wire, snake_case in Python, unknown fields refused (as
    `zonda.resources.models.CrdModel`)."""

    def encode(self) -> bytes:
        """The compact JSON the other side decodes."""
        return msgspec.json.encode(self, enc_hook=_plain)

    def to_wire(self) -> dict[str, Any]:
        """The same JSON as Python values."""
        wire: dict[str, Any] = msgspec.to_builtins(self, enc_hook=_plain)
        return wire

    @classmethod
    def decode(cls, payload: bytes | str) -> Self:
        """Parse and validate JSON; a `ValueError` says what is wrong and where (`$.field`)."""
        try:
            return msgspec.json.decode(payload, type=cls)
        except msgspec.DecodeError as error:  # ValidationError is a DecodeError too
            raise ValueError(f"invalid {cls.__name__}: {error}") from error

    @classmethod
    def from_wire(cls, value: Any) -> Self:
        """Validate already-parsed JSON (a dict with camelCase keys)."""
        try:
            return msgspec.convert(value, type=cls)
        except msgspec.ValidationError as error:
            raise ValueError(f"invalid {cls.__name__}: {error}") from error

    def replace(self, **changes: Any) -> Self:
        return msgspec.structs.replace(self, **changes)


class MissedSla(WireStruct, frozen=True, kw_only=True):
    """A missed SLA as a callback try gets it: the wire form of
    `zonda.resources.dagrun_models.SlaMissRecord`."""

    task_id: str
    deadline: datetime
    detected_at: datetime


class MappedExpansion(WireStruct, frozen=True, kw_only=True):
    """How a mapped instance picks its arguments: the wire form of the task's
    `zonda.resources.models.ExpandSpec`
    (the same fields; `zonda.specs.mapping` reads either)."""

    kwargs: JsonObject | None = None
    kwargs_list: Any = None
    into: str | None = None

    @classmethod
    def of(cls, spec: models.ExpandSpec) -> MappedExpansion:
        return cls(kwargs=spec.kwargs, kwargs_list=spec.kwargs_list, into=spec.into)


class CallbackRequest(WireStruct, frozen=True, kw_only=True):
    """A callback try the controller launched: the runner calls `callables` instead of the task.

    For failures the task's own process could not report (zombie, timeout, pod lost), for DAG
    callbacks and for SLA misses (`zonda.passes.callbacks`).
    """

    #: on_failure_callback, on_retry_callback, dag_success, dag_failure, sla_miss.
    kind: str
    #: Import paths (pkg.mod:function) or dagfile: references.
    callables: list[str]
    #: A DAG callback's context['reason'].
    reason: str | None = None
    #: Why the try failed: context['exception'].
    message: str | None = None
    #: Every task instance's state.
    task_states: dict[str, str] = msgspec.field(default_factory=dict)
    sla_misses: list[MissedSla] = msgspec.field(default_factory=list)


class TaskInvocation(WireStruct, frozen=True, kw_only=True):
    """Everything the runner needs to execute one try of one task instance, with Airflow's context."""

    dag_name: str
    #: The DagRun's object name: what XComs, pods and links are keyed by.
    run_name: str
    #: Airflow's run id (`status.runId`: ``manual__<date>``...), what the try's `run_id` is; None from a
    #: controller older than it (the run's name then).
    run_id: str | None = None
    #: The DagRun's uid: the owner of stored XComs.
    run_uid: str | None = None
    namespace: str | None = None
    run_type: RunType
    task_id: str
    #: A mapped task's instance (Airflow's ti.map_index).
    map_index: int = -1
    #: How a mapped instance picks its arguments.
    expand: MappedExpansion | None = None
    #: Mapped upstreams' instance counts: `xcoms` holds `task[i]` keys.
    mapped_counts: dict[str, int] = msgspec.field(default_factory=dict)
    try_number: int
    max_tries: int = 0
    operator: str | None = None
    args: JsonObject = msgspec.field(default_factory=dict)
    #: None, with the interval, for an Airflow 3 manual run given no logical date.
    logical_date: datetime | None
    data_interval_start: datetime | None
    data_interval_end: datetime | None
    #: When the run could start (Airflow 3's `dag_run.run_after`); None from a controller older than it.
    run_after: datetime | None = None
    #: The run's partition (Airflow 3.2+'s `dag_run.partition_key`), if it has one.
    partition_key: str | None = None
    partition_date: datetime | None = None
    timezone: str = "UTC"
    conf: JsonObject = msgspec.field(default_factory=dict)
    params: JsonObject = msgspec.field(default_factory=dict)
    #: Name -> import path.
    user_defined_macros: dict[str, str] = msgspec.field(default_factory=dict)
    #: Name -> import path.
    user_defined_filters: dict[str, str] = msgspec.field(default_factory=dict)
    render_template_as_native_obj: bool = False
    #: The DAG's template files (`spec.templateFiles`: name -> text), read when it was rendered.
    template_files: dict[str, str] = msgspec.field(default_factory=dict)
    #: The DAG's `airflowVersion`: which Airflow's context keys the try gets ("2", "3"; None: Zonda's).
    airflow_version: str | None = None
    #: Return values of finished tasks.
    xcoms: dict[str, Any] = msgspec.field(default_factory=dict)
    #: Other XComs of finished tasks (xcom_push), by task id and key.
    keyed_xcoms: dict[str, dict[str, Any]] = msgspec.field(default_factory=dict)
    #: The task's outlet assets and aliases (`AssetRef` wire form), and the events an asset-triggered
    #: run consumed (`TriggeringEvent` wire form).
    outlets: list[JsonObject] = msgspec.field(default_factory=list)
    triggering_asset_events: list[JsonObject] = msgspec.field(default_factory=list)
    prev_data_interval_start_success: datetime | None = None
    prev_data_interval_end_success: datetime | None = None
    first_try_start: datetime | None = None  # a rescheduled sensor's first poke (for its timeout)
    next_method: str | None = None  # set when resuming after a deferral
    next_kwargs: JsonObject | None = None  # includes `event` when resuming after a deferral
    #: The task's callbacks by kind (on_success_callback...), run by the runner.
    callbacks: dict[str, list[str]] = msgspec.field(default_factory=dict)
    #: Set for a callback try: run these callbacks, not the task.
    callback: CallbackRequest | None = None
    #: The task's `retry_policy` as `{class, params}` (`zonda.tries.retry_policies`).
    retry_policy: JsonObject | None = None


class TaskOutcome(enum.StrEnum):
    SUCCESS = "success"
    FAILED = "failed"  # retried while tries remain
    FAILED_NO_RETRY = "failed_no_retry"  # AirflowFailException, sensor timeout
    SKIPPED = "skipped"  # AirflowSkipException, Bash exit 99
    DEFERRED = "deferred"  # TaskDeferred: `deferral` says how to wait and resume
    RESCHEDULE = "reschedule"  # a sensor in reschedule mode: poke again at `reschedule_at`


class DeferralRequest(WireStruct, frozen=True, kw_only=True, omit_defaults=True):
    """What a deferring try asks for: the wire form of the task instance's
    `zonda.resources.dagrun_models.Deferral`.

    The same fields as that model (a unit test keeps them equal), which the runner cannot import
    cheaply; `to_status` turns it into the model the DagRun's status keeps.
    """

    trigger_classpath: str
    trigger_kwargs: JsonObject = msgspec.field(default_factory=dict)
    method_name: str = "execute_complete"
    kwargs: JsonObject = msgspec.field(default_factory=dict)
    timeout_seconds: float | None = None

    def to_status(self) -> dagrun_models.Deferral:
        from zonda.resources.dagrun_models import (
            Deferral,  # the controller's side: pydantic is loaded there anyway
        )

        return Deferral.model_validate(self.to_wire())


class TaskResult(WireStruct, frozen=True, kw_only=True, omit_defaults=True):
    """How a try ended; fields left at their defaults are left out of the JSON (the 4096-byte cap)."""

    outcome: TaskOutcome
    xcom: Any = None
    #: Values pushed with xcom_push (and multiple_outputs keys), by key.
    xcoms: dict[str, Any] = msgspec.field(default_factory=dict)
    #: Lengths of the list and dict XComs (what mapped tasks count).
    xcom_lengths: dict[str, int] = msgspec.field(default_factory=dict)
    #: Branch decision: direct downstream ids to follow; the rest are skipped.
    follow_task_ids: list[str] | None = None
    #: ShortCircuit ignoring trigger rules: skip every downstream task.
    skip_all_downstream: bool = False
    deferral: DeferralRequest | None = None
    reschedule_at: datetime | None = None
    message: str | None = None
    #: When the runner began the try (sub-second; a pod's status has seconds).
    started_at: datetime | None = None
    #: When the runner finished the try.
    ended_at: datetime | None = None
    #: Stopped by SIGTERM (a kill, a deleted pod): no callback ran; the controller runs it.
    terminated: bool = False
    #: A retry policy's delay for this retry, from the try's end (Airflow's `retry_delay_override`).
    retry_delay_seconds: float | None = None

    def attempt_times(
        self, started: datetime | None, finished: datetime | None
    ) -> tuple[datetime | None, datetime | None]:
        """The try's start and end: the runner's own clock where it said, else what the executor saw."""
        return self.started_at or started, self.ended_at or finished
