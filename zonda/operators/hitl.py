"""Airflow 3.1+'s human-in-the-loop operators (the standard provider's `operators.hitl`).

`execute` calls the `notifiers` with the context, then defers to `HITLTrigger`, the request in its
kwargs: the Trigger resource is the stored request, the task instance's reason and the pass's Event
say what is asked and how to answer (`zonda tasks respond RUN TASK --option ... --param k=v`), and
the answer, written into the Trigger's status, resumes the task in `execute_complete` with
Airflow's payload. Kubernetes RBAC on `triggers/status` decides who may answer (`assigned_users`
is shown with the request, not enforced: see docs/authoring.md). Airflow 3.3 parks the task in its
own `awaiting_input` state; Zonda keeps it `deferred` (Airflow 3.1 and 3.2's way), the wait being
the triggerer's, and no Pod runs while it waits.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any
from urllib.parse import urlencode, urlparse, urlunparse

from zonda.context import Context
from zonda.exceptions import AirflowException, HITLRejectException, HITLTimeoutError, HITLTriggerEventError
from zonda.operators.base import BaseOperator, SkipMixin
from zonda.resources import hitl
from zonda.resources.durations import parse_duration
from zonda.specs.imports import import_string
from zonda.triggers import timezone
from zonda.triggers.hitl import HITLTrigger
from zonda.utils.notifiers import BaseNotifier

#: A notifier written in the manifest as a reference into the DAG file (or an import path).
DAG_FILE_SCHEME = "dagfile:"


def _notifier(value: Any) -> Any:
    """A notifier object, or the one a manifest reference names (the runner's operators get those)."""
    if not isinstance(value, str):
        return value
    if value.startswith(DAG_FILE_SCHEME):
        from zonda.authoring.dag_files import load_callback  # imports the user's DAG file

        try:
            return load_callback(value)
        except ImportError as error:
            raise AirflowException(f"cannot load notifier {value!r}: {error}") from error
    try:
        return import_string(value)
    except ImportError as error:
        raise AirflowException(f"cannot import notifier {value!r}: {error}") from error


class HITLOperator(BaseOperator):
    """Ask a human to choose among `options` (and fill `params`), and return the answer.

    :param subject: the headline shown with the request (templated).
    :param options: what the human may choose.
    :param body: details (templated).
    :param defaults: the options taken when `response_timeout` passes unanswered.
    :param multiple: whether several options may be chosen.
    :param params: a form to fill, as a DAG's params; the answer's values come back in `params_input`.
    :param notifiers: `BaseNotifier`s called with the context when the request is made.
    :param assigned_users: who should answer (`{"id", "name"}`), shown with the request.
    :param response_timeout: how long to wait; then the defaults, or a failure without them.
    """

    template_fields: Sequence[str] = ("subject", "body")
    #: Arguments the manifest writes as callback references (objects of the DAG file), not JSON.
    callback_arguments: Sequence[str] = ("notifiers",)

    def __init__(
        self,
        *,
        subject: str,
        options: list[str],
        body: str | None = None,
        defaults: str | list[str] | None = None,
        multiple: bool = False,
        params: Mapping[str, Any] | None = None,
        notifiers: Sequence[BaseNotifier | str] | BaseNotifier | None = None,
        assigned_users: dict[str, str] | list[dict[str, str]] | None = None,
        response_timeout: timedelta | float | str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(params=params, **kwargs)
        # `execution_timeout` is the controller's (a scheduler argument): it still bounds the wait and
        # fails the task, where Airflow 3.1+ moves it to `response_timeout` (docs/authoring.md)
        if isinstance(response_timeout, str):  # the manifest's duration ("5m")
            response_timeout = parse_duration(response_timeout)
        elif isinstance(response_timeout, int | float):
            response_timeout = timedelta(seconds=response_timeout)
        self.response_timeout: timedelta | None = response_timeout
        self.subject = subject
        self.body = body
        self.options = list(options)
        self.defaults = [defaults] if isinstance(defaults, str) else defaults
        self.multiple = multiple
        self.notifiers: list[Any] = (
            [notifiers] if isinstance(notifiers, BaseNotifier | str) else list(notifiers or [])
        )
        self.assigned_users = [assigned_users] if isinstance(assigned_users, dict) else assigned_users
        if "_options" in (self.params or {}):
            raise ValueError('"_options" is not allowed in params')
        hitl.check_defaults(self.options, self.defaults, self.multiple)

    @property
    def request_params(self) -> dict[str, Any]:
        """The form's fields and their current values (the task's own params)."""
        return {name: self.params[name] for name in (self.params or {})}

    def execute(self, context: Context) -> Any:
        timeout_datetime = timezone.utcnow() + self.response_timeout if self.response_timeout else None
        self.log.info("Waiting for response")
        for notifier in self.notifiers:
            _notifier(notifier)(context)
        self.defer(
            trigger=HITLTrigger(
                subject=self.subject,
                body=self.body,
                options=self.options,
                defaults=self.defaults,
                multiple=self.multiple,
                params=self.request_params,
                assigned_users=self.assigned_users,
                timeout_datetime=timeout_datetime,
            ),
            method_name="execute_complete",
        )

    def execute_complete(self, context: Context, event: dict[str, Any]) -> Any:
        if "error" in event:
            self.process_trigger_event_error(event)
        chosen_options = event["chosen_options"]
        params_input = event.get("params_input") or {}
        self.validate_chosen_options(chosen_options)
        self.validate_params_input(params_input)
        return {
            "chosen_options": chosen_options,
            "params_input": params_input,
            "responded_at": event.get("responded_at"),
            "responded_by_user": event.get("responded_by_user"),
        }

    def process_trigger_event_error(self, event: dict[str, Any]) -> None:
        if event.get("error_type") == "timeout":
            raise HITLTimeoutError(event)
        raise HITLTriggerEventError(event)

    def validate_chosen_options(self, chosen_options: list[str]) -> None:
        if diff := set(chosen_options) - set(self.options):
            raise ValueError(f"Responses {diff} not in {self.options}")

    def validate_params_input(self, params_input: Mapping[str, Any]) -> None:
        if self.params and params_input and set(self.params) ^ set(params_input):
            raise ValueError(f"params_input {params_input} does not match params {dict(self.params)}")
        for key, value in params_input.items():
            self.params[key] = value

    def generate_link_to_ui(
        self,
        *,
        task_instance: Any,
        base_url: str | None = None,
        options: str | list[str] | None = None,
        params_input: dict[str, Any] | None = None,
        namespace: str | None = None,
    ) -> str:
        """A link to the task instance's page in Zonda's UI (`zonda ui`), which shows the request and
        its answer form; the query carries Airflow's prefill (`_options`, params, `map_index`)."""
        query: dict[str, Any] = {}
        options = [options] if isinstance(options, str) else options
        if options:
            if diff := set(options) - set(self.options):
                raise ValueError(f"options {diff} are not valid options")
            query["_options"] = options
        if params_input:
            if diff := set(params_input) - set(self.params or {}):
                raise ValueError(f"params {diff} are not valid params")
            query.update(params_input)
        if not base_url:
            raise ValueError("Not able to retrieve base_url")
        query["map_index"] = getattr(task_instance, "map_index", -1)
        parsed = urlparse(base_url)
        run = getattr(task_instance, "run_name", None) or task_instance.run_id  # the DagRun object's name
        path = f"/runs/{namespace or 'default'}/{run}/tasks/{task_instance.task_id}"
        return urlunparse((parsed.scheme, parsed.netloc, path, "", urlencode(query, doseq=True), ""))

    @staticmethod
    def generate_link_to_ui_from_context(
        *,
        context: Context,
        base_url: str | None = None,
        options: list[str] | None = None,
        params_input: dict[str, Any] | None = None,
    ) -> str:
        task = context["task"]
        if not isinstance(task, HITLOperator):
            raise ValueError("This method only supports HITLOperator")
        return task.generate_link_to_ui(
            task_instance=context["task_instance"],
            base_url=base_url,
            options=options,
            params_input=params_input,
            namespace=getattr(context.get("dag_run"), "namespace", None),
        )


class ApprovalOperator(HITLOperator, SkipMixin):
    """ "Approve" or "Reject": a rejection skips the direct downstream tasks (all downstream with
    `ignore_downstream_trigger_rules=True`), or fails the task with `fail_on_reject=True`."""

    FIXED_ARGS = ("options", "multiple")
    APPROVE = "Approve"
    REJECT = "Reject"

    def __init__(
        self,
        *,
        ignore_downstream_trigger_rules: bool = False,
        fail_on_reject: bool = False,
        options: None = None,  # fixed: named here so that DAG validation does not ask for them
        multiple: None = None,
        **kwargs: Any,
    ) -> None:
        for arg, value in (("options", options), ("multiple", multiple)):
            if value is not None:
                raise ValueError(f"Passing {arg} to ApprovalOperator is not allowed.")
        self.ignore_downstream_trigger_rules = ignore_downstream_trigger_rules
        self.fail_on_reject = fail_on_reject
        super().__init__(options=[self.APPROVE, self.REJECT], multiple=False, **kwargs)

    def execute_complete(self, context: Context, event: dict[str, Any]) -> Any:
        ret = super().execute_complete(context, event)
        if ret["chosen_options"][0] == self.APPROVE:
            self.log.info("Approved. Proceeding with downstream tasks...")
            return ret
        if self.fail_on_reject:
            raise HITLRejectException('Receive "Reject"')
        self.log.info("Skipping downstream tasks")
        self.skip_downstream(ignore_downstream_trigger_rules=self.ignore_downstream_trigger_rules)
        return ret


class HITLBranchOperator(HITLOperator, SkipMixin):
    """The chosen options are the downstream task ids to follow (through `options_mapping` when an
    option is a label); the other direct downstream tasks are skipped."""

    def __init__(self, *, options_mapping: dict[str, str] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.options_mapping = options_mapping or {}
        if invalid := set(self.options_mapping) - set(self.options):
            raise ValueError(f"`options_mapping` contains keys that are not in `options`: {sorted(invalid)}")
        wrong = {k: (v, type(v).__name__) for k, v in self.options_mapping.items() if not isinstance(v, str)}
        if wrong:
            raise ValueError(
                f"`options_mapping` values must be strings (task_ids).\nInvalid entries: {wrong}"
            )

    def execute_complete(self, context: Context, event: dict[str, Any]) -> Any:
        ret = super().execute_complete(context, event)
        branches = [self.options_mapping.get(option, option) for option in ret["chosen_options"]]
        self.log.info("Branch into %s", branches)
        self.skip_all_except(context.get("ti"), branches)
        return branches


class HITLEntryOperator(HITLOperator):
    """A form to fill (`params`), confirmed with "OK"."""

    OK = "OK"

    def __init__(self, *, options: list[str] | None = None, **kwargs: Any) -> None:
        if options is None:
            options = [self.OK]
            kwargs.setdefault("defaults", [self.OK])
        super().__init__(options=options, **kwargs)
