"""Airflow's callbacks, called by the task runner with the try's context.

A try calls its task's own callbacks where Airflow's task process does
(`TaskInstance._run_finished_callback`): `on_execute_callback` before `execute`, then one of
`on_success_callback`, `on_retry_callback` (a failure with tries left), `on_failure_callback` or
`on_skipped_callback` once the outcome is known and before the result is written, so a written
failure result means the callback ran. A callback's exception is logged and changes nothing, as in
Airflow.

A *callback try* (`TaskInvocation.callback`, launched by the controller: see `zonda.passes.callbacks`) calls
only the callbacks it names: a failure the task's process could not report (`context["exception"]`
is then the reason, as Airflow's zombie callbacks get a message), a DAG's `on_success_callback` /
`on_failure_callback` (`context["reason"]`), or `sla_miss_callback(dag, task_list,
blocking_task_list, slas, blocking_tis)`.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from zonda.exceptions import AirflowException
from zonda.passes.retries import is_eligible_to_retry
from zonda.resources.invocations import TaskInvocation, TaskOutcome, TaskResult
from zonda.specs.imports import import_string
from zonda.tries import asset_events, task_context

log = logging.getLogger("zonda.task")

DAG_FILE_SCHEME = "dagfile:"


def load_callable(path: str) -> Callable[..., Any]:
    """A callback by its manifest reference: `pkg.mod:function`, or `dagfile:` into the DAG file."""
    if path.startswith(DAG_FILE_SCHEME):
        from zonda.authoring.dag_files import load_callback  # imports the user's DAG file

        function: Callable[..., Any] = load_callback(path)
        return function
    imported = import_string(path)
    if not callable(imported):
        raise ImportError(f"{path!r} is not callable")
    return imported  # type: ignore[no-any-return]


def call_all(kind: str, paths: list[str], *args: Any) -> list[str]:
    """Call each callback in order; an error is logged and the next one still runs. Returns the errors."""
    errors: list[str] = []
    for path in paths:
        try:
            load_callable(path)(*args)
        except Exception as error:
            log.exception("Error when executing %s callback %s", kind, path)
            errors.append(f"{kind} {path}: {type(error).__name__}: {error}")
    return errors


def run_execute_callbacks(invocation: TaskInvocation, context: Mapping[str, Any]) -> None:
    """Airflow's `on_execute_callback`: just before the operator executes (or resumes)."""
    if paths := invocation.callbacks.get("on_execute_callback"):
        call_all("on_execute_callback", paths, context)


def run_hooks(kind: str, invocation: TaskInvocation, *args: Any) -> None:
    """Airflow's `pre_execute(context)` / `post_execute(context, result)` operator arguments: called in
    the try (an error fails it, unlike a callback's), a generator's `Metadata` into `outlet_events`, as
    Airflow's task runner calls them through `create_executable_runner`."""
    for path in invocation.callbacks.get(kind) or ():
        returned = load_callable(path)(*args)
        if inspect.isgenerator(returned):
            asset_events.drain_metadata(returned, args[0].get("outlet_events"))


def finished_kind(invocation: TaskInvocation, outcome: TaskOutcome) -> str | None:
    """Which callback a try's outcome calls (None: the try has not ended: deferred or rescheduled)."""
    if outcome is TaskOutcome.SUCCESS:
        return "on_success_callback"
    if outcome is TaskOutcome.SKIPPED:
        return "on_skipped_callback"
    if outcome is TaskOutcome.FAILED and is_eligible_to_retry(
        try_number=invocation.try_number, max_tries=invocation.max_tries
    ):
        return "on_retry_callback"
    if outcome in (TaskOutcome.FAILED, TaskOutcome.FAILED_NO_RETRY):
        return "on_failure_callback"
    return None


def run_finished_callbacks(
    invocation: TaskInvocation,
    result: TaskResult,
    context: MutableMapping[str, Any] | None,
    error: BaseException | None,
) -> None:
    """The try ended with `result`: call its callback with the context (`exception` set on failure)."""
    kind = finished_kind(invocation, result.outcome)
    paths = invocation.callbacks.get(kind) if kind is not None else None
    if not paths or kind is None:
        return
    context = context if context is not None else task_context.build_context(invocation)
    if kind in ("on_failure_callback", "on_retry_callback"):
        context["exception"] = error if error is not None else AirflowException(result.message or "failed")
    call_all(kind, paths, context)


# ---------------------------------------------------------------------------------- callback tries


@dataclass(frozen=True)
class SlaMiss:
    """Airflow's `SlaMiss` row, as `sla_miss_callback` receives it in `slas`."""

    task_id: str
    dag_id: str
    execution_date: datetime
    timestamp: datetime
    email_sent: bool = False
    notification_sent: bool = False
    description: str | None = None


@dataclass(frozen=True)
class BlockingTaskInstance:
    """A task instance not in success when the SLA callback runs (`blocking_tis`)."""

    dag_id: str
    task_id: str
    run_id: str
    state: str
    execution_date: datetime

    @property
    def logical_date(self) -> datetime:
        return self.execution_date


def run_callback_try(invocation: TaskInvocation, context: MutableMapping[str, Any]) -> TaskResult:
    """A callback try: call the callbacks it names; it fails (and says which) if one raised."""
    request = invocation.callback
    assert request is not None
    log.info(
        "Running %s callback(s) for %s (task %s try %s)",
        request.kind,
        invocation.run_name,
        invocation.task_id,
        invocation.try_number,
    )
    if request.kind == "sla_miss":
        errors = call_all(request.kind, request.callables, *sla_miss_arguments(invocation, context))
    else:
        if request.reason is not None:
            context["reason"] = request.reason
        if request.kind in ("on_failure_callback", "on_retry_callback"):
            context["exception"] = request.message or "the task's process ended without reporting"
        errors = call_all(request.kind, request.callables, context)
    if errors:
        return TaskResult(outcome=TaskOutcome.FAILED_NO_RETRY, message="; ".join(errors)[:1000])
    return TaskResult(outcome=TaskOutcome.SUCCESS)


def sla_miss_arguments(invocation: TaskInvocation, context: Mapping[str, Any]) -> tuple[Any, ...]:
    """`(dag, task_list, blocking_task_list, slas, blocking_tis)` as Airflow's `manage_slas` passes them."""
    request = invocation.callback
    assert request is not None
    # no SLA is missed without a data interval (`zonda.passes.callbacks.sla_deadline`), nor in Airflow 3
    logical_date = invocation.logical_date or invocation.run_after
    assert logical_date is not None
    slas = [
        SlaMiss(
            task_id=miss.task_id,
            dag_id=invocation.dag_name,
            execution_date=logical_date,
            timestamp=miss.detected_at,
        )
        for miss in request.sla_misses
    ]
    blocking = [
        BlockingTaskInstance(
            invocation.dag_name, task_id, invocation.run_id or invocation.run_name, state, logical_date
        )
        for task_id, state in request.task_states.items()
        if state != "success"
    ]
    task_list = "\n".join(f"{sla.task_id} on {logical_date.isoformat()}" for sla in slas)
    blocking_task_list = "\n".join(f"{ti.task_id} on {logical_date.isoformat()}" for ti in blocking)
    return context["dag"], task_list, blocking_task_list, slas, blocking
