"""The task runner: executes one try of one task instance, in its Pod or as a local process.

`run_task` builds the operator from the `TaskInvocation`'s task args, renders its template fields
against the context, calls `execute` — or `resume_execution` after a deferral — and returns a
`TaskResult`. The outcome maps Airflow's exceptions: a skip, a failure without retry, a deferral, a
reschedule. What the task prints on stdout is its log; tracebacks go to stderr. The process around
it (reading the invocation from `$ZONDA_TASK_INVOCATION` or `--invocation-file`, writing the result
to `$ZONDA_RESULT_PATH` within `RESULT_LIMIT_BYTES`, the exit code) is `controller.runner.process`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import signal
import sys
import threading
import traceback
from collections.abc import Iterator
from types import FrameType
from typing import Any

from controller.runner import callbacks
from controller.xcom.backends import XComStore
from zonda.context import Context, set_current_context
from zonda.exceptions import (
    AirflowFailException,
    AirflowRescheduleException,
    AirflowSensorTimeout,
    AirflowSkipException,
    AirflowTaskTerminated,
    TaskDeferred,
)
from zonda.operators.base import BaseOperator, SkipMixin
from zonda.operators.python import resolve_python_callable
from zonda.resources import json_values
from zonda.resources.invocations import (
    DeferralRequest,
    TaskInvocation,
    TaskOutcome,
    TaskResult,
)
from zonda.specs import mapped_groups, mapping, operator_registry
from zonda.specs.imports import import_string
from zonda.tries import retry_policies, task_context, templating, xcoms
from zonda.tries.asset_events import OUTLET_EVENTS_KEY, AssetEventLister

#: Longest `message` kept in a result, so that an exception's text never crowds out the XCom.
MESSAGE_LIMIT_CHARS = 1024
FAILED_OUTCOMES = frozenset({TaskOutcome.FAILED, TaskOutcome.FAILED_NO_RETRY})

log = logging.getLogger("zonda.task")


class OperatorNotCreated(Exception):
    """The task's operator could not be imported or built from its args: a retry would fail the same."""


def build_operator(invocation: TaskInvocation) -> BaseOperator:
    """Import the task's operator class and instantiate it with the task's args (not yet rendered)."""
    if invocation.operator is None:
        raise OperatorNotCreated(
            f"task {invocation.task_id!r} has no operator: a container task runs its container, "
            "not the task runner"
        )
    try:
        classpath = operator_registry.operator_classpath(invocation.operator)
        operator_class = import_string(classpath)
    except (ImportError, ValueError) as error:
        raise OperatorNotCreated(f"cannot import operator {invocation.operator!r}: {error}") from error
    if not (isinstance(operator_class, type) and issubclass(operator_class, BaseOperator)):
        raise OperatorNotCreated(f"{classpath} is not a subclass of zonda.operators.base.BaseOperator")
    try:
        operator = operator_class(task_id=invocation.task_id, **invocation.args)
    except Exception as error:
        raise OperatorNotCreated(
            f"cannot create {operator_class.__name__} for task {invocation.task_id!r}: {_describe(error)}"
        ) from error
    sensors = sys.modules.get("zonda.sensors.base")  # imported by any sensor's class; others skip it
    if sensors is not None and isinstance(operator, sensors.BaseSensorOperator):
        operator.first_try_start = invocation.first_try_start
    return operator


def build_operator_context(
    invocation: TaskInvocation, operator: BaseOperator, store: XComStore | None = None
) -> Context:
    """Airflow's context for this try, with the task's own params; the operator gets its `dag` from it.

    XCom pulls read values stored by the XCom backend (`store`) back from it, and earlier runs' XComs
    (`include_prior_dates`) from the cluster.
    """
    store = store or XComStore()
    reader = store.loading(task_context.read_invocation_xcoms(invocation))
    context: Context = task_context.build_context(
        invocation,
        task_params=operator.params,
        xcom_reader=reader,
        earlier_reader=store.earlier_reader(invocation),
        asset_event_lister=_asset_event_lister(invocation, store),
    )
    context["task"] = operator
    operator.dag = context["dag"]
    return context


def _asset_event_lister(invocation: TaskInvocation, store: XComStore) -> AssetEventLister | None:
    """`inlet_events`: the namespace's AssetEvents, listed with the try's own identity (the chart lets
    the task ServiceAccount list them) at the first access; a try of no DagRun resource (`zonda dags
    test`: no `run_uid`) reads only its run's events."""
    namespace = invocation.namespace
    if not namespace or not invocation.run_uid:
        return None

    def listed() -> list[dict[str, Any]]:
        from controller.kube.rest import KubeRestError
        from zonda.resources.models import GROUP, VERSION

        try:
            return store.kube().list_custom(GROUP, VERSION, namespace, "assetevents")
        except KubeRestError as error:
            raise RuntimeError(
                f"inlet_events: cannot list the AssetEvents of {namespace}: {error}"
            ) from error

    return listed


def unmap(invocation: TaskInvocation, store: XComStore) -> TaskInvocation:
    """A mapped instance's invocation with its own arguments (Airflow's `MappedOperator.unmap`): the
    items at its map index, read from the XComs (and `.map()` functions) it expands over."""
    if invocation.expand is None or invocation.map_index < 0:
        return invocation
    reader = task_context.folding_mapped(
        store.loading(task_context.read_invocation_xcoms(invocation)), invocation.mapped_counts
    )
    try:
        chosen = mapping.expanded_arguments(invocation.expand, invocation.map_index, reader, _load_callable)
    except (mapping.MappingError, IndexError, KeyError, ImportError, xcoms.XComError) as error:
        raise OperatorNotCreated(
            f"cannot pick the arguments of map index {invocation.map_index}: {_describe(error)}"
        ) from error
    args = dict(invocation.args)
    if mapped_groups.is_group_expansion(invocation.expand):
        try:
            return invocation.replace(args=mapped_groups.substitute(args, chosen))
        except mapping.MappingError as error:
            raise OperatorNotCreated(f"map index {invocation.map_index}: {error}") from error
    if invocation.expand.into is not None:
        args[invocation.expand.into] = {**(args.get(invocation.expand.into) or {}), **chosen}
    else:
        args.update(chosen)
    return invocation.replace(args=args)


def _load_callable(path: str) -> Any:
    """A `.map()` function: `pkg.mod:fn`, or a `dagfile:` reference into the user's DAG file."""
    return resolve_python_callable(path)


@dataclasses.dataclass
class _Try:
    """What a try's callbacks need from it: its context and the error it ended with."""

    context: Context | None = None
    error: BaseException | None = None


def run_task(invocation: TaskInvocation) -> TaskResult:
    """Execute (or resume) the try, then call its callbacks, and say how it ended; never raises for the
    task's own errors. A callback try (`invocation.callback`) calls only its callbacks."""
    if invocation.callback is not None:
        return _run_callback_try(invocation)
    tried = _Try()
    result = _execute(invocation, tried)
    if isinstance(tried.error, AirflowTaskTerminated):  # killed: the controller runs the callback
        return result.replace(terminated=True)
    callbacks.run_finished_callbacks(invocation, result, tried.context, tried.error)
    return result


def _run_callback_try(invocation: TaskInvocation) -> TaskResult:
    try:
        context = build_operator_context(invocation, build_operator(invocation))
    except OperatorNotCreated:  # a container task: its context without an operator
        context = task_context.build_context(invocation)
    return callbacks.run_callback_try(invocation, context)


def _execute(invocation: TaskInvocation, tried: _Try) -> TaskResult:
    """Build and run the operator; the result says how the try ended."""
    store = XComStore.from_environment()
    try:
        invocation = unmap(invocation, store)
        operator = build_operator(invocation)
    except OperatorNotCreated as error:
        print_traceback(error)
        tried.error = error
        return TaskResult(outcome=TaskOutcome.FAILED_NO_RETRY, message=shorten(str(error)))
    try:
        with _terminate_on_sigterm(operator):
            context = tried.context = build_operator_context(invocation, operator, store)
            operator.render_template_fields(
                context,
                templating.invocation_environment(invocation),
                templating.TemplateLimits.from_environ(os.environ),
            )
            with set_current_context(context):
                callbacks.run_hooks("pre_execute", invocation, context)  # Airflow's order: the hook first
            callbacks.run_execute_callbacks(invocation, context)
            if invocation.next_method:
                # The event crossed the API as JSON: give the method back its datetimes.
                next_kwargs = json_values.from_json_safe(dict(invocation.next_kwargs or {}))
                with set_current_context(context):
                    value = operator.resume_execution(invocation.next_method, next_kwargs, context)
            else:
                with set_current_context(context):
                    value = operator.execute(context)
            with set_current_context(context):
                callbacks.run_hooks("post_execute", invocation, context, value)
    except TaskDeferred as deferred:
        return _with_pushes(_deferred_result(deferred), operator, invocation, store, tried.context)
    except AirflowRescheduleException as reschedule:
        log.info("Rescheduling the sensor: next poke at %s", reschedule.reschedule_date.isoformat())
        result = TaskResult(outcome=TaskOutcome.RESCHEDULE, reschedule_at=reschedule.reschedule_date)
        return _with_pushes(result, operator, invocation, store, tried.context)
    except AirflowSkipException as skip:
        log.info("Skipping the task: %s", skip)
        return TaskResult(outcome=TaskOutcome.SKIPPED, message=shorten(str(skip)) or None)
    except (AirflowFailException, AirflowSensorTimeout) as error:
        print_traceback(error)
        tried.error = error
        return TaskResult(outcome=TaskOutcome.FAILED_NO_RETRY, message=shorten(_describe(error)))
    except (Exception, SystemExit, AirflowTaskTerminated) as error:
        print_traceback(error)
        tried.error = error
        return _failed_result(invocation, error, tried.context)
    pushed = dict(context["ti"].pushed)
    if reported := context["outlet_events"].to_wire():  # outlet_events[...].extra, yield Metadata
        pushed[OUTLET_EVENTS_KEY] = reported
    return _success_result(operator, value, invocation, store, pushed)


def _failed_result(invocation: TaskInvocation, error: BaseException, context: Context | None) -> TaskResult:
    """A failed try, as the task's `retry_policy` decides (Airflow's `_handle_current_task_failed`): FAIL
    skips the remaining retries, RETRY may set this retry's delay; a kill is never the policy's."""
    message = shorten(_describe(error))
    if invocation.retry_policy is None or isinstance(error, AirflowTaskTerminated):
        return TaskResult(outcome=TaskOutcome.FAILED, message=message)
    try:
        policy = retry_policies.load_retry_policy(invocation.retry_policy)
        decision = policy.evaluate(
            exception=error, try_number=invocation.try_number, max_tries=invocation.max_tries, context=context
        )
    except Exception:  # Airflow: "Retry policy evaluation failed, falling back to default behaviour"
        log.exception("Retry policy evaluation failed, falling back to default behaviour")
        return TaskResult(outcome=TaskOutcome.FAILED, message=message)
    if decision.reason:
        log.info("Retry policy decision: %s (%s)", decision.action.value, decision.reason)
    why = f"{message} (retry policy: {decision.reason})" if decision.reason else message
    if decision.action is retry_policies.RetryAction.FAIL:
        return TaskResult(outcome=TaskOutcome.FAILED_NO_RETRY, message=why)
    if decision.action is retry_policies.RetryAction.RETRY:
        delay = decision.retry_delay.total_seconds() if decision.retry_delay is not None else None
        return TaskResult(outcome=TaskOutcome.FAILED, message=why, retry_delay_seconds=delay)
    return TaskResult(outcome=TaskOutcome.FAILED, message=message)


def _success_result(
    operator: BaseOperator, value: Any, invocation: TaskInvocation, store: XComStore, pushed: dict[str, Any]
) -> TaskResult:
    """Success with the XComs as the result carries them (large ones written to the backend first)."""
    try:
        xcom = store.prepare(invocation, xcoms.RETURN_KEY, value) if operator.do_xcom_push else None
        if operator.multiple_outputs and operator.do_xcom_push and value is not None:
            # After the callable's own pushes, as Airflow's decorated operator pushes each key.
            pushed = {**pushed, **xcoms.multiple_outputs(value)}
        keyed = {key: store.prepare(invocation, key, item) for key, item in pushed.items()}
    except (xcoms.XComError, OSError) as error:
        return _xcom_failure(operator, error)
    follow_task_ids, skip_all_downstream = None, False
    if isinstance(operator, SkipMixin):
        follow_task_ids, skip_all_downstream = operator.follow_task_ids, operator.skip_all_downstream
    lengths = mapping.value_lengths({**pushed, xcoms.RETURN_KEY: value}) if operator.do_xcom_push else {}
    return TaskResult(
        outcome=TaskOutcome.SUCCESS,
        xcom=xcom,
        xcoms=keyed,
        xcom_lengths=lengths,
        follow_task_ids=follow_task_ids,
        skip_all_downstream=skip_all_downstream,
    )


def _with_pushes(
    result: TaskResult,
    operator: BaseOperator,
    invocation: TaskInvocation,
    store: XComStore,
    context: Context | None,
) -> TaskResult:
    """A deferral's or a reschedule's result with what the try pushed: Airflow writes a push at once, so
    the resumed try and downstream tasks pull what was pushed before deferring."""
    pushed: dict[str, Any] = context["ti"].pushed if context is not None else {}
    if result.outcome in FAILED_OUTCOMES or not pushed:
        return result
    try:
        keyed = {key: store.prepare(invocation, key, item) for key, item in pushed.items()}
    except (xcoms.XComError, OSError) as error:
        return _xcom_failure(operator, error)
    lengths = mapping.value_lengths(pushed) if operator.do_xcom_push else {}
    return result.replace(xcoms=keyed, xcom_lengths=lengths)


def _xcom_failure(operator: BaseOperator, error: xcoms.XComError | OSError) -> TaskResult:
    """The try fails: a value cannot be an XCom, or the XCom backend could not store it."""
    if isinstance(error, xcoms.XComError):
        log.error("%s", error)
        return TaskResult(outcome=TaskOutcome.FAILED, message=shorten(f"{operator.task_type}: {error}"))
    print_traceback(error)
    return TaskResult(
        outcome=TaskOutcome.FAILED, message=shorten(f"cannot write to the XCom backend: {_describe(error)}")
    )


def _deferred_result(deferred: TaskDeferred) -> TaskResult:
    from zonda import triggers  # a deferring task has imported them to build its trigger

    try:
        trigger_classpath, trigger_kwargs = triggers.serialize_trigger(deferred.trigger)
        deferral = DeferralRequest(
            trigger_classpath=trigger_classpath,
            trigger_kwargs=trigger_kwargs,
            method_name=deferred.method_name,
            kwargs=json_values.to_json_safe(deferred.kwargs or {}, path="kwargs"),
            timeout_seconds=deferred.timeout.total_seconds() if deferred.timeout is not None else None,
        )
    except Exception as error:
        print_traceback(error)
        return TaskResult(
            outcome=TaskOutcome.FAILED,
            message=shorten(f"cannot serialize the deferral to {deferred.trigger!r}: {_describe(error)}"),
        )
    log.info("Deferring the task to %s, resuming in %s", trigger_classpath, deferred.method_name)
    return TaskResult(outcome=TaskOutcome.DEFERRED, deferral=deferral)


@contextlib.contextmanager
def _terminate_on_sigterm(operator: BaseOperator) -> Iterator[None]:
    """On SIGTERM, let the operator stop its children (`on_kill`), then end the try as failed."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminate(signum: int, frame: FrameType | None) -> None:
        log.error("Received SIGTERM. Terminating subprocesses.")
        operator.on_kill()
        raise AirflowTaskTerminated("Task received SIGTERM signal")

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _describe(error: BaseException) -> str:
    """The traceback's last line(s): the exception's type and message."""
    return "".join(traceback.format_exception_only(error)).strip()


def print_traceback(error: BaseException) -> None:
    traceback.print_exception(error, file=sys.stderr)


def shorten(message: str) -> str:
    return message if len(message) <= MESSAGE_LIMIT_CHARS else message[: MESSAGE_LIMIT_CHARS - 1] + "…"
