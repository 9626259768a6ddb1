"""`BaseOperator`, the authoring API every operator derives from, with Airflow 2.x's names and semantics.

The task runner builds one operator per try from the task's `args` (snake_case keyword arguments, as in
Airflow) plus `task_id`, renders its `template_fields` against the context, then calls `execute` — or
`resume_execution` on a fresh instance when the try resumes after a deferral. Whatever `execute`
returns is the task's XCom `return_value`.

Arguments Airflow's `BaseOperator` takes for the scheduler (`retries`, `pool`, `trigger_rule`...) are
kept as attributes (`op.retries`) but never acted on here: Zonda's scheduler reads them from the task
spec, never from the operator. The same class is the authoring API: created inside a `DAG` (see
`zonda.authoring`) an operator takes the DAG's and task groups' `default_args`, joins the DAG and can be
put in order with `>>`; `zonda.authoring.manifests` compiles what it was given into the task spec.
"""

from __future__ import annotations

import difflib
import functools
import inspect
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import timedelta, tzinfo
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

from zonda.authoring import operator_hooks
from zonda.authoring.relations import Label, Node, chain, chain_linear, cross_downstream
from zonda.context import Context
from zonda.exceptions import (
    TRIGGER_FAIL_REPR,
    AirflowException,
    TaskDeferralError,
    TaskDeferralTimeout,
    TaskDeferred,
    TriggerFailureReason,
)
from zonda.resources import xcom_refs
from zonda.specs import operator_arguments
from zonda.tries import templating

if TYPE_CHECKING:
    import jinja2

#: Airflow `BaseOperator` arguments that steer the scheduler, the executor or the UI. Zonda takes these
#: from the task spec (`retries`, `triggerRule`...) or has no use for them; an operator accepts and
#: ignores them so that arguments copied from an Airflow DAG still work.
SCHEDULER_ARGUMENTS = frozenset(
    {
        "owner", "email", "email_on_retry", "email_on_failure",
        "retries", "retry_delay", "retry_exponential_backoff", "max_retry_delay",
        "start_date", "end_date", "depends_on_past", "ignore_first_depends_on_past",
        "wait_for_past_depends_before_skipping", "wait_for_downstream",
        "priority_weight", "weight_rule", "queue", "pool", "pool_slots", "sla", "execution_timeout",
        "retry_policy",
        "trigger_rule", "run_as_user", "task_concurrency", "max_active_tis_per_dag",
        "max_active_tis_per_dagrun", "executor", "executor_config", "resources", "inlets", "outlets",
        "doc", "doc_md", "doc_json", "doc_yaml", "doc_rst", "task_display_name",
        "dag", "task_group", "default_args",
        "on_execute_callback", "on_failure_callback", "on_success_callback", "on_retry_callback",
        "on_skipped_callback",
        "pre_execute", "post_execute",
        "connections", "variables",  # Zonda's: the Secret-held ones the task's pod may read
    }
)  # fmt: skip

#: Airflow's defaults of the scheduler arguments an Airflow user reads back (`print(op.retries)`).
SCHEDULER_ARGUMENT_DEFAULTS: dict[str, Any] = {
    "owner": "airflow", "retries": 0, "retry_delay": timedelta(seconds=300),
    "retry_exponential_backoff": False, "max_retry_delay": None, "execution_timeout": None,
    "trigger_rule": "all_success", "depends_on_past": False, "priority_weight": 1,
    "weight_rule": "downstream", "pool": None, "queue": None, "executor_config": None,
    "start_date": None, "end_date": None, "doc_md": None,
}  # fmt: skip


class DagInfo(Protocol):
    """What an operator knows of its DAG (Airflow's `self.dag`): the runner gives it the context's `dag`."""

    @property
    def dag_id(self) -> str: ...

    @property
    def timezone(self) -> tzinfo: ...


class BaseOperator(Node):
    """Airflow's `BaseOperator`: subclass it and override `execute(context)`.

    :param task_id: the task's id; the runner passes the task spec's id.
    :param do_xcom_push: when False, the return value of `execute` is not the task's XCom.
    :param params: task-level params, merged over the DAG's params in the context (as in Airflow).
    """

    #: Attribute names rendered as Jinja templates against the context before `execute`.
    template_fields: Sequence[str] = ()
    #: A template field's string ending with one of these names a template file (Airflow's), which
    #: `zonda dags render` reads from the DAG file's folder and `template_searchpath` into the manifest.
    template_ext: Sequence[str] = ()
    #: Keyword arguments accepted and dropped, so that arguments copied from an Airflow DAG still work.
    ignored_arguments: frozenset[str] = SCHEDULER_ARGUMENTS

    # Authoring state, set by `operator_hooks.before_init` around the outermost `__init__`.
    #: The keyword arguments the DAG file gave (plus the task's own `default_args`), for the manifest.
    authored_arguments: dict[str, Any]
    #: The id given, before task-group prefixes; `task_id` is the full id.
    label: str | None
    task_group: Any
    authoring_dag: Any
    #: TaskFlow: the function returns a dict whose keys other tasks read (`result["key"]`).
    multiple_outputs: bool = False
    #: Setup and teardown (`as_setup()`, `as_teardown()`).
    is_setup: bool = False
    is_teardown: bool = False
    on_failure_fail_dagrun: bool = False
    #: Container fields for the task's Pod (`@task.kubernetes(image=...)`).
    container: dict[str, Any] | None = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Check each `__init__` for missing keyword arguments first, as Airflow's `BaseOperatorMeta`.

        Without this, a misspelt required argument (`bash_comand`) would surface as Python's bare
        "missing 1 required keyword-only argument" and never name the misspelling.
        """
        super().__init_subclass__(**kwargs)
        if "__init__" in cls.__dict__:
            cls.__init__ = _authoring_init(cls.__dict__["__init__"])  # type: ignore[method-assign]

    def __init__(
        self,
        task_id: str | None = None,
        *,
        do_xcom_push: bool = True,
        params: Mapping[str, Any] | None = None,
        multiple_outputs: bool = False,
        **kwargs: Any,
    ) -> None:
        unknown = {name: value for name, value in kwargs.items() if name not in self.ignored_arguments}
        if unknown:
            raise AirflowException(describe_invalid_arguments(type(self), task_id, unknown=unknown))
        self.task_id = task_id
        self.do_xcom_push = do_xcom_push
        if multiple_outputs:  # Airflow's BaseOperator argument: each key of the returned dict an XCom too
            self.multiple_outputs = True
        self.params: dict[str, Any] = dict(params or {})
        for name, default in SCHEDULER_ARGUMENT_DEFAULTS.items():
            setattr(self, name, kwargs.get(name, default))
        #: The DAG (authoring) or the context's `dag` (set by the task runner); None outside both.
        self.dag: DagInfo | None = None

    @property
    def task_type(self) -> str:
        return type(self).__name__

    @property
    def node_id(self) -> str:
        return self.task_id or ""

    def as_setup(self) -> BaseOperator:
        """Airflow's `as_setup()`: this task prepares what the work needs (its teardown runs after)."""
        self.is_setup = True
        return self

    def as_teardown(self, *, setups: Any = None, on_failure_fail_dagrun: bool | None = None) -> BaseOperator:
        """Airflow's `as_teardown()`: cleans up after the work, even when it failed.

        It runs once its upstreams are done if one of its setups succeeded (`all_done_setup_success`
        unless a trigger rule was given); its failure does not fail the run unless
        `on_failure_fail_dagrun`. `setups` become its upstreams.
        """
        self.is_teardown = True
        if on_failure_fail_dagrun is not None:
            self.on_failure_fail_dagrun = on_failure_fail_dagrun
        if setups is not None:
            self.set_upstream(setups)
        return self

    def __enter__(self) -> Any:
        """`with teardown_op:` (or a setup): the tasks made in the block run between its setup and it."""
        from zonda.authoring.setup_teardown import SetupTeardownContext

        contexts_open = self.__dict__.setdefault("_setup_teardown_blocks", [])
        block = SetupTeardownContext(self)
        contexts_open.append(block)
        return block.__enter__()

    def __exit__(self, *exc: Any) -> None:
        self.__dict__["_setup_teardown_blocks"].pop().__exit__(*exc)

    #: A mapped task's sources (`zonda.authoring.mapped.attach`); None for an unmapped task.
    expand_spec: dict[str, Any] | None = None
    #: Its `.map()` functions, in the order the manifest numbers them.
    map_functions: list[Callable[[Any], Any]] = []

    @classmethod
    def partial(cls, **kwargs: Any) -> Any:
        """Airflow's dynamic task mapping: the arguments every instance shares; `.expand(...)` or
        `.expand_kwargs(...)` on the result makes the mapped task (see `zonda.authoring.mapped`)."""
        from zonda.authoring.mapped import PartialOperator

        return PartialOperator(cls, kwargs)

    @property
    def output(self) -> Any:
        """This task's return value, as an argument of another task (Airflow's `XComArg`)."""
        from zonda.authoring.taskflow import XComArg

        return XComArg(self)

    @property
    def upstream_task_ids(self) -> set[str]:
        return {node.node_id for node in getattr(self, "upstream_edges", {})}

    @property
    def dag_id(self) -> str:
        return self.dag.dag_id if self.dag else ""

    def has_dag(self) -> bool:
        return self.dag is not None

    @property
    def log(self) -> logging.Logger:
        """The task log: the runner sends it to stdout, which the controller collects."""
        return logging.getLogger(f"zonda.task.operators.{type(self).__module__}.{type(self).__qualname__}")

    def __repr__(self) -> str:
        return f"<Task({self.task_type}): {self.task_id}>"

    def execute(self, context: Context) -> Any:
        """Do the task's work; the return value becomes the XCom `return_value`."""
        raise NotImplementedError(f"{self.task_type} must override execute(context)")

    def on_kill(self) -> None:
        """Called when the try is being killed (SIGTERM): stop any child process started by `execute`."""

    def defer(
        self,
        *,
        trigger: Any,
        method_name: str,
        kwargs: dict[str, Any] | None = None,
        timeout: timedelta | None = None,
    ) -> NoReturn:
        """Hand the wait to `trigger` and resume in `method_name(context, event=..., **kwargs)`.

        It raises `TaskDeferred`, so it works from any depth of `execute`'s calls; the try ends and a
        new instance of the operator resumes when the trigger fires.
        """
        raise TaskDeferred(trigger=trigger, method_name=method_name, kwargs=kwargs, timeout=timeout)

    def resume_execution(self, next_method: str, next_kwargs: dict[str, Any] | None, context: Context) -> Any:
        """Resume a deferred task: call `next_method`, or fail if its trigger failed or timed out."""
        next_kwargs = next_kwargs or {}
        if next_method == TRIGGER_FAIL_REPR:
            traceback = next_kwargs.get("traceback")
            if traceback is not None:
                self.log.error("Trigger failed:\n%s", "\n".join(traceback))
            error = next_kwargs.get("error", "Unknown")
            if error == TriggerFailureReason.TRIGGER_TIMEOUT:
                raise TaskDeferralTimeout(error)
            raise TaskDeferralError(error)
        return getattr(self, next_method)(context, **next_kwargs)

    def render_template_fields(
        self,
        context: Context,
        jinja_env: jinja2.Environment | None = None,
        limits: templating.TemplateLimits | None = None,
    ) -> None:
        """Render every attribute named in `template_fields` in place, as Airflow does before `execute`.

        `jinja_env` is the DAG's (user-defined macros and filters, native rendering); None: the default.
        `limits` bound all the fields' rendering together (one task's budget); None: the defaults.
        """
        self.__dict__["_template_environment"] = jinja_env  # for `render_template` in `execute`
        spent = templating.budget(limits)
        for name in self.template_fields:
            if not hasattr(self, name):
                raise AttributeError(
                    f"{name!r} is configured as a template field but {self.task_type} does not have "
                    "this attribute."
                )
            rendered = templating.render(
                getattr(self, name),
                context,
                field=name,
                environment=jinja_env,
                budget=spent,
                template_ext=self.template_ext,
            )
            if xcom_refs.referenced_task_ids(rendered):
                rendered = xcom_refs.resolve(rendered, context["ti"].xcom_pull)
            setattr(self, name, rendered)

    def render_template(
        self,
        content: Any,
        context: Context,
        jinja_env: jinja2.Environment | None = None,
        seen_oids: set[int] | None = None,
    ) -> Any:
        """Airflow's `render_template`: `content` (a template string, or a collection of them) rendered
        with `context` as a template field is, in the DAG's environment unless `jinja_env` is given."""
        environment = jinja_env or self.__dict__.get("_template_environment")
        return templating.render(content, context, environment=environment, template_ext=self.template_ext)


def describe_invalid_arguments(
    operator_class: type[BaseOperator],
    task_id: str | None,
    *,
    unknown: Mapping[str, Any] | None = None,
    missing: Sequence[str] = (),
) -> str:
    """Airflow's "Invalid arguments were passed" message, with the likely intended names."""
    accepted = sorted(_accepted_arguments(operator_class))
    problems = []
    if missing:
        plural = "s" if len(missing) > 1 else ""
        problems.append(f"missing keyword argument{plural} {', '.join(repr(name) for name in missing)}")
    if unknown:
        hints = [
            f"did you mean {matches[0]!r} for {name!r}?"
            for name in unknown
            if (matches := difflib.get_close_matches(name, accepted, n=1))
        ]
        problems.append(
            f"Invalid arguments were: **kwargs: {dict(unknown)}" + "".join(f"; {h}" for h in hints)
        )
    return f"Invalid arguments were passed to {operator_class.__name__} (task_id: {task_id}). " + "; ".join(
        problems
    )


def _authoring_init(init: Callable[..., None]) -> Callable[..., None]:
    """Wrap an operator's `__init__`: authoring hooks around the outermost call, then the missing check."""
    parameters = list(inspect.signature(init).parameters.values())[1:]  # without self
    required = [
        (index, parameter.name)
        for index, parameter in enumerate(parameters)
        if parameter.default is parameter.empty
        and parameter.kind in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY)
    ]

    @functools.wraps(init)
    def checked_init(self: BaseOperator, *args: Any, **kwargs: Any) -> None:
        outermost = "authored_arguments" not in self.__dict__
        if outermost:
            kwargs = operator_hooks.before_init(self, args, kwargs)
        missing = [name for index, name in required if index >= len(args) and name not in kwargs]
        if missing:
            accepted = _accepted_arguments(type(self))
            unknown = {name: value for name, value in kwargs.items() if name not in accepted}
            raise AirflowException(
                describe_invalid_arguments(
                    type(self), kwargs.get("task_id"), unknown=unknown, missing=missing
                )
            )
        init(self, *args, **kwargs)
        if outermost:
            operator_hooks.after_init(self)

    return checked_init


def _accepted_arguments(operator_class: type[BaseOperator]) -> set[str]:
    """Keyword arguments an operator class accepts: the same answer DAG validation gives."""
    return set(operator_arguments.signature_of_class(operator_class).accepted)


class SkipMixin:
    """Records which downstream tasks to skip, for the runner to report (Airflow's `SkipMixin`).

    In Airflow the operator writes the skipped states itself; here it only decides, and the scheduler
    applies the decision to the DAG it knows (validating ids, expanding task groups to their roots).
    """

    #: Direct downstream ids to follow, the others being skipped; None: follow every one.
    follow_task_ids: list[str] | None = None
    #: Skip every task downstream, whatever its trigger rule (ShortCircuit's default).
    skip_all_downstream: bool = False

    def skip_all_except(self, ti: Any, branch_task_ids: str | Iterable[str] | None) -> None:
        """Follow only `branch_task_ids` among the direct downstream tasks (None: follow none)."""
        if branch_task_ids is None:
            follow: list[str] = []
        elif isinstance(branch_task_ids, str):
            follow = [branch_task_ids]
        elif isinstance(branch_task_ids, Iterable):
            follow = list(branch_task_ids)
            invalid = [(item, type(item).__name__) for item in follow if not isinstance(item, str)]
            if invalid:
                raise AirflowException(
                    f"'branch_task_ids' expected all task IDs are strings. Invalid tasks found: {invalid}."
                )
        else:
            raise AirflowException(
                "'branch_task_ids' must be either None, a task ID, or an Iterable of IDs, "
                f"but got {type(branch_task_ids).__name__!r}."
            )
        self.follow_task_ids = list(dict.fromkeys(follow))

    def skip_downstream(self, *, ignore_downstream_trigger_rules: bool) -> None:
        """Skip everything downstream, or only the direct downstream tasks letting trigger rules act."""
        if ignore_downstream_trigger_rules:
            self.skip_all_downstream = True
        else:
            self.follow_task_ids = []


BaseOperator.__init__ = _authoring_init(BaseOperator.__init__)  # type: ignore[method-assign]

__all__ = ["BaseOperator", "Label", "SkipMixin", "chain", "chain_linear", "cross_downstream"]
