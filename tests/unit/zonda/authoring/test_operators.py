"""Operators in-process: BaseOperator's contract, Bash, Python, branching, and the operators that never run.

Real: bash subprocesses, imports, Jinja rendering with `zonda.tries.templating`'s context. Nothing is mocked.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zonda.context import Context
from zonda.exceptions import (
    AirflowException,
    AirflowSkipException,
    TaskDeferralError,
    TaskDeferralTimeout,
    TaskDeferred,
)
from zonda.operators.base import BaseOperator
from zonda.operators.bash import BashOperator
from zonda.operators.empty import EmptyOperator
from zonda.operators.kubernetes_pod import KubernetesPodOperator
from zonda.operators.latest_only import LatestOnlyOperator
from zonda.operators.python import (
    BranchPythonOperator,
    PythonOperator,
    ShortCircuitOperator,
    determine_kwargs,
)
from zonda.resources.invocations import TaskInvocation
from zonda.resources.run_types import RunType
from zonda.specs.imports import import_string
from zonda.tries import task_context, templating
from zonda.triggers import DateTimeTrigger


def make_context(**fields: Any) -> Context:
    defaults: dict[str, Any] = {
        "dag_name": "etl",
        "run_name": "scheduled-2024-01-02",
        "run_type": RunType.SCHEDULED,
        "task_id": "task",
        "try_number": 1,
        "operator": None,
        "logical_date": datetime(2024, 1, 2, tzinfo=UTC),
        "data_interval_start": datetime(2024, 1, 2, tzinfo=UTC),
        "data_interval_end": datetime(2024, 1, 3, tzinfo=UTC),
        "params": {"region": "eu"},
    }
    return task_context.build_context(TaskInvocation(**{**defaults, **fields}))


# ----------------------------------------------------------------------------------- BaseOperator


class Greeter(BaseOperator):
    template_fields = ("greeting",)

    def __init__(self, *, greeting: str, name: str = "world", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.greeting = greeting
        self.name = name

    def execute(self, context: Context) -> str:
        return f"{self.greeting} {self.name}"

    def resume(self, context: Context, event: Any = None, attempt: int = 0) -> dict[str, Any]:
        return {"event": event, "attempt": attempt}


@pytest.mark.parametrize(
    ("kwargs", "expected_fragments"),
    [
        pytest.param(
            {"greting": "hi"},
            ["Greeter", "missing keyword argument 'greeting'", "did you mean 'greeting'"],
            id="a misspelt argument names the operator, the argument and the likely one",
        ),
        pytest.param(
            {"greeting": "hi", "colour": "red"},
            ["Greeter (task_id: t)", "colour"],
            id="an argument no operator takes names the operator and the argument",
        ),
    ],
)
def test_unknown_arguments_are_an_airflow_exception(
    kwargs: dict[str, Any], expected_fragments: list[str]
) -> None:
    with pytest.raises(AirflowException) as raised:
        Greeter(task_id="t", **kwargs)
    for fragment in expected_fragments:
        assert fragment in str(raised.value)


def test_scheduler_arguments_from_airflow_are_accepted_and_kept_as_attributes() -> None:
    operator = Greeter(
        task_id="t",
        greeting="hi",
        retries=3,
        retry_delay=timedelta(minutes=1),
        pool="p",
        queue="q",
        trigger_rule="all_done",
        owner="me",
        email=["a@b.c"],
        email_on_failure=True,
        depends_on_past=True,
        execution_timeout=timedelta(hours=1),
        priority_weight=5,
        doc_md="# doc",
    )
    assert operator.execute({}) == "hi world"
    # Readable back as in Airflow (`print(op.retries)`); the scheduler takes them from the task spec.
    assert (operator.retries, operator.pool, operator.trigger_rule) == (3, "p", "all_done")


def test_render_template_fields_renders_only_the_declared_fields() -> None:
    operator = Greeter(task_id="t", greeting="hello {{ params.region }}", name="{{ ds }}")
    operator.render_template_fields(make_context())
    assert (operator.greeting, operator.name) == ("hello eu", "{{ ds }}")


def test_a_template_field_the_operator_lacks_is_an_error_naming_it() -> None:
    class Broken(BaseOperator):
        template_fields = ("missing",)

    with pytest.raises(AttributeError, match="'missing' is configured as a template field but Broken"):
        Broken(task_id="t").render_template_fields(make_context())


def test_an_undefined_template_variable_fails_naming_the_field() -> None:
    operator = Greeter(task_id="t", greeting="{{ no_such_variable }}")
    with pytest.raises(templating.TemplateError, match="greeting"):
        operator.render_template_fields(make_context())


def test_defer_raises_task_deferred_through_broad_excepts_at_any_depth() -> None:
    moment = datetime(2030, 1, 1, tzinfo=UTC)

    class Nested(BaseOperator):
        def execute(self, context: Context) -> None:
            try:
                self._helper()
            except Exception:  # what careless user code does; a deferral must pass through
                pytest.fail("TaskDeferred was caught by `except Exception`")

        def _helper(self) -> None:
            self.defer(
                trigger=DateTimeTrigger(moment),
                method_name="resume",
                kwargs={"a": 1},
                timeout=timedelta(minutes=5),
            )

    with pytest.raises(TaskDeferred) as raised:
        Nested(task_id="t").execute({})
    deferred = raised.value
    assert (deferred.method_name, deferred.kwargs, deferred.timeout) == (
        "resume",
        {"a": 1},
        timedelta(minutes=5),
    )
    assert deferred.trigger.moment == moment


def test_task_deferred_refuses_a_timeout_that_is_not_a_timedelta() -> None:
    with pytest.raises(ValueError, match="timedelta"):
        TaskDeferred(trigger=None, method_name="m", timeout=30)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("next_method", "next_kwargs", "expected"),
    [
        pytest.param(
            "resume",
            {"event": "fired", "attempt": 2},
            {"event": "fired", "attempt": 2},
            id="resuming calls next_method with the context and next_kwargs",
        ),
        pytest.param("resume", None, {"event": None, "attempt": 0}, id="resuming without kwargs passes none"),
        pytest.param(
            "__fail__",
            {"error": "Trigger failure"},
            TaskDeferralError,
            id="a failed trigger fails the resumed task",
        ),
        pytest.param(
            "__fail__",
            {"error": "Trigger timeout"},
            TaskDeferralTimeout,
            id="a trigger timeout fails the resumed task with TaskDeferralTimeout",
        ),
        pytest.param("__fail__", None, TaskDeferralError, id="a failure without a reason still fails"),
    ],
)
def test_resume_execution(next_method: str, next_kwargs: dict[str, Any] | None, expected: Any) -> None:
    operator = Greeter(task_id="t", greeting="hi")
    if isinstance(expected, type):
        with pytest.raises(expected):
            operator.resume_execution(next_method, next_kwargs, {})
    else:
        assert operator.resume_execution(next_method, next_kwargs, {}) == expected


@pytest.mark.parametrize(
    "path",
    [
        pytest.param("os.path:join", id="the colon form imports the attribute after the colon"),
        pytest.param("os.path.join", id="the dotted form imports the last name"),
    ],
)
def test_import_string(path: str) -> None:
    assert import_string(path) is os.path.join


@pytest.mark.parametrize(
    "path",
    [
        pytest.param("join", id="a bare name is not an import path"),
        pytest.param("os.path:no_such_function", id="a missing attribute is an ImportError"),
        pytest.param("no_such_module_xyz:f", id="a missing module is an ImportError"),
    ],
)
def test_import_string_errors(path: str) -> None:
    with pytest.raises(ImportError):
        import_string(path)


# ---------------------------------------------------------------------------------- BashOperator


BASH_CASES = [
    pytest.param(
        {"bash_command": "echo first; echo last"}, "last", id="the last line of stdout is the return value"
    ),
    pytest.param(
        {"bash_command": "echo out; echo err >&2"},
        "err",
        id="stderr is merged into the output, as Airflow's SubprocessHook does",
    ),
    pytest.param({"bash_command": "true"}, "", id="a command printing nothing returns an empty string"),
    pytest.param(
        {"bash_command": "echo $ZONDA_GREETING", "env": {"ZONDA_GREETING": "hello"}},
        "hello",
        id="env sets the command's variables",
    ),
    pytest.param(
        {"bash_command": "echo ${HOME:-unset}", "env": {"X": "1"}},
        "unset",
        id="env replaces the inherited environment",
    ),
    pytest.param(
        {"bash_command": "echo ${HOME:-unset} $X", "env": {"X": "1"}, "append_env": True},
        f"{os.environ.get('HOME', 'unset')} 1",
        id="append_env adds env to the inherited environment",
    ),
    pytest.param(
        {"bash_command": "echo $PORT", "env": {"PORT": 8080}},
        "8080",
        id="env values from YAML numbers become strings",
    ),
    pytest.param(
        {"bash_command": "echo $AIRFLOW_CTX_DAG_ID $AIRFLOW_CTX_TASK_ID $AIRFLOW_CTX_TRY_NUMBER"},
        "etl task 1",
        id="Airflow's AIRFLOW_CTX variables are exported",
    ),
    pytest.param(
        {"bash_command": "echo $AIRFLOW_CTX_DAG_RUN_ID", "env": {}},
        "scheduled-2024-01-02",
        id="Airflow's AIRFLOW_CTX variables are exported with an empty env too",
    ),
    pytest.param({"bash_command": "echo {{ ds }}"}, "2024-01-02", id="bash_command is templated"),
    pytest.param(
        {"bash_command": "echo skipped; echo '[1, 2]'", "output_processor": json.loads},
        [1, 2],
        id="output_processor makes the last line the value returned",
    ),
    pytest.param(
        {"bash_command": "echo '{\"a\": 1}'", "output_processor": "json:loads"},
        {"a": 1},
        id="output_processor as a manifest holds it: an import path",
    ),
    pytest.param(
        {"bash_command": "echo $D", "env": {"D": "{{ ds_nodash }}"}}, "20240102", id="env is templated"
    ),
    pytest.param(
        {"bash_command": "exit 99", "skip_on_exit_code": None},
        AirflowException,
        id="with skip_on_exit_code None exit 99 fails",
    ),
    pytest.param({"bash_command": "exit 99"}, AirflowSkipException, id="exit code 99 skips the task"),
    pytest.param(
        {"bash_command": "exit 3", "skip_on_exit_code": [3, 4]},
        AirflowSkipException,
        id="any of several skip_on_exit_code skips the task",
    ),
    pytest.param(
        {"bash_command": "exit 1", "cwd": "/no/such/dir"},
        AirflowException,
        id="a missing cwd fails before running",
    ),
]


@pytest.mark.parametrize(("args", "expected"), BASH_CASES)
def test_bash_operator(args: dict[str, Any], expected: Any) -> None:
    operator = BashOperator(task_id="task", **args)
    context = make_context()
    operator.render_template_fields(context)
    if isinstance(expected, type):
        with pytest.raises(expected):
            operator.execute(context)
    else:
        assert operator.execute(context) == expected


def test_bash_failure_says_the_exit_code_as_airflow_does() -> None:
    with pytest.raises(AirflowException) as raised:
        BashOperator(task_id="t", bash_command="exit 7").execute(make_context())
    assert str(raised.value) == "Bash command failed. The command returned a non-zero exit code 7."


def test_bash_runs_in_a_temporary_directory_removed_afterwards_unless_cwd_is_given(tmp_path: Any) -> None:
    temporary = BashOperator(task_id="t", bash_command="pwd").execute(make_context())
    assert os.path.basename(temporary).startswith("airflowtmp") and not os.path.exists(temporary)
    assert BashOperator(task_id="t", bash_command="pwd", cwd=str(tmp_path)).execute(make_context()) == str(
        tmp_path
    )


def test_bash_output_is_logged_line_by_line(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("INFO")
    BashOperator(task_id="t", bash_command="echo one; echo two").execute(make_context())
    assert [r.getMessage() for r in caplog.records if r.getMessage() in ("one", "two")] == ["one", "two"]


def test_bash_on_kill_stops_the_command_and_its_children() -> None:
    operator = BashOperator(task_id="t", bash_command="sleep 60 & sleep 60; echo done")
    outcome: list[BaseException | str] = []

    def run() -> None:
        try:
            outcome.append(operator.execute(make_context()))
        except BaseException as error:
            outcome.append(error)

    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.monotonic() + 10
    while operator._process is None and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)
    operator.on_kill()
    thread.join(timeout=10)
    assert not thread.is_alive(), "on_kill did not stop the command"
    assert isinstance(outcome[0], AirflowException) and "non-zero exit code -15" in str(outcome[0])


# -------------------------------------------------------------------------------- PythonOperator


def takes_nothing() -> str:
    return "nothing"


def takes_ds_and_ti(ds: str, ti: Any) -> str:
    return f"{ds} {ti.task_id}"


def takes_everything(*args: Any, **kwargs: Any) -> dict[str, Any]:
    return {"args": list(args), "keys": sorted(kwargs)}


def takes_arguments(a: int, b: int = 0, *, c: int = 0, params: Any = None) -> list[Any]:
    return [a, b, c, params["region"]]


def takes_templates_dict(templates_dict: dict[str, str]) -> str:
    return templates_dict["query"]


PYTHON_CASES = [
    pytest.param(
        {"python_callable": takes_nothing}, "nothing", id="a callable declaring no parameter gets no context"
    ),
    pytest.param(
        {"python_callable": takes_ds_and_ti},
        "2024-01-02 task",
        id="a callable gets the context variables its parameters name",
    ),
    pytest.param(
        {"python_callable": takes_arguments, "op_args": [1], "op_kwargs": {"b": 2, "c": 3}},
        [1, 2, 3, "eu"],
        id="op_args and op_kwargs are passed along with named context variables",
    ),
    pytest.param(
        {"python_callable": takes_templates_dict, "templates_dict": {"query": "day={{ ds }}"}},
        "day=2024-01-02",
        id="templates_dict is rendered and given as a context variable",
    ),
    pytest.param(
        {
            "python_callable": "examples.operators.callables:return_value",
            "op_kwargs": {"value": "{{ params.region }}-{{ ds }}"},
        },
        "eu-2024-01-02",
        id="an import path names the callable and op_kwargs are templated",
    ),
    pytest.param(
        {"python_callable": "examples.operators.callables.return_value", "op_args": ["{{ ds }}"]},
        "2024-01-02",
        id="the dotted import path works too and op_args are templated",
    ),
]


@pytest.mark.parametrize(("args", "expected"), PYTHON_CASES)
def test_python_operator(args: dict[str, Any], expected: Any) -> None:
    operator = PythonOperator(task_id="task", **args)
    context = make_context()
    operator.render_template_fields(context)
    assert operator.execute(context) == expected


def test_a_callable_with_var_keyword_gets_the_whole_context_and_op_kwargs() -> None:
    result = PythonOperator(
        task_id="t", python_callable=takes_everything, op_args=[1], op_kwargs={"extra": 1}
    ).execute(make_context())
    assert result["args"] == [1]
    assert {"ds", "ti", "params", "data_interval_end", "templates_dict", "extra"} <= set(result["keys"])


@pytest.mark.parametrize(
    ("python_callable", "message"),
    [
        pytest.param(42, "`python_callable` param must be callable", id="a value that is not callable"),
        pytest.param(
            "examples.operators.callables:no_such_function",
            "Cannot import python_callable",
            id="an import path naming nothing",
        ),
        pytest.param(
            "examples.operators.callables",
            "`python_callable` param must be callable",
            id="an import path naming a module, which is not callable",
        ),
    ],
)
def test_python_callable_errors(python_callable: Any, message: str) -> None:
    with pytest.raises(AirflowException, match=message):
        PythonOperator(task_id="t", python_callable=python_callable)


def test_a_positional_argument_named_like_a_context_variable_is_refused() -> None:
    with pytest.raises(
        ValueError, match=r"The key 'ds' in args is a part of kwargs and therefore reserved\."
    ):
        PythonOperator(task_id="t", python_callable=takes_ds_and_ti, op_args=["x"]).execute(make_context())


def test_show_return_value_in_logs_false_hides_the_value(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("INFO")
    PythonOperator(task_id="t", python_callable=lambda: "secret", show_return_value_in_logs=False).execute({})
    assert "Done. Returned value not shown" in caplog.text and "secret" not in caplog.text


@given(
    context=st.dictionaries(st.sampled_from(["ds", "ti", "a", "b", "params", "other"]), st.integers()),
    wildcard=st.booleans(),
)
def test_determine_kwargs_gives_exactly_the_named_parameters_or_everything(
    context: dict[str, int], wildcard: bool
) -> None:
    def named(ds: int = 0, a: int = 0, *, params: int = 0) -> None: ...

    def everything(ds: int = 0, **kwargs: int) -> None: ...

    chosen = determine_kwargs(everything if wildcard else named, (), context)
    expected = context if wildcard else {k: v for k, v in context.items() if k in ("ds", "a", "params")}
    assert dict(chosen) == expected


# ------------------------------------------------------------------- Branch and ShortCircuit


@pytest.mark.parametrize(
    ("returned", "follow"),
    [
        pytest.param("a", ["a"], id="a task id follows that task only"),
        pytest.param(["a", "b", "a"], ["a", "b"], id="a list follows each task once"),
        pytest.param(("a",), ["a"], id="a tuple of ids is a list of ids"),
        pytest.param(None, [], id="None follows no direct downstream task"),
        pytest.param([], [], id="an empty list follows no direct downstream task"),
    ],
)
def test_branch_python_operator_reports_the_tasks_to_follow(returned: Any, follow: list[str]) -> None:
    operator = BranchPythonOperator(task_id="t", python_callable=lambda: returned)
    assert operator.execute(make_context()) == returned
    assert (operator.follow_task_ids, operator.skip_all_downstream) == (follow, False)


@pytest.mark.parametrize(
    ("returned", "message"),
    [
        pytest.param(
            3,
            "must be either None, a task ID, or an Iterable of IDs, but got 'int'",
            id="a number is not a branch",
        ),
        pytest.param(
            ["a", 3], "expected all task IDs are strings", id="a list holding a number is not a branch"
        ),
    ],
)
def test_branch_python_operator_refuses_what_is_not_task_ids(returned: Any, message: str) -> None:
    with pytest.raises(AirflowException, match=message):
        BranchPythonOperator(task_id="t", python_callable=lambda: returned).execute(make_context())


def test_branch_by_import_path_with_templated_choice() -> None:
    operator = BranchPythonOperator(
        task_id="t",
        python_callable="examples.operators.callables:choose_branch",
        op_kwargs={"follow": "load_{{ params.region }}"},
    )
    context = make_context()
    operator.render_template_fields(context)
    operator.execute(context)
    assert operator.follow_task_ids == ["load_eu"]


@pytest.mark.parametrize(
    ("returned", "ignore_downstream_trigger_rules", "follow", "skip_all"),
    [
        pytest.param(True, True, None, False, id="a truthy value follows every downstream task"),
        pytest.param("yes", False, None, False, id="a truthy value follows everything in either mode"),
        pytest.param(
            False,
            True,
            None,
            True,
            id="a falsy value skips everything downstream by default, whatever the trigger rules",
        ),
        pytest.param(
            0,
            False,
            [],
            False,
            id="a falsy value without ignoring trigger rules skips only the direct downstream",
        ),
    ],
)
def test_short_circuit_operator(
    returned: Any, ignore_downstream_trigger_rules: bool, follow: list[str] | None, skip_all: bool
) -> None:
    operator = ShortCircuitOperator(
        task_id="t",
        python_callable=lambda: returned,
        ignore_downstream_trigger_rules=ignore_downstream_trigger_rules,
    )
    assert operator.execute(make_context()) == returned
    assert (operator.follow_task_ids, operator.skip_all_downstream) == (follow, skip_all)


# ------------------------------------------------------------------- operators that never run here


def test_empty_operator_does_nothing() -> None:
    EmptyOperator(task_id="t").execute(make_context())


def test_latest_only_operator_is_decided_by_the_scheduler_not_executed() -> None:
    with pytest.raises(AirflowException, match="decided by the scheduler"):
        LatestOnlyOperator(task_id="t").execute(make_context())


def test_kubernetes_pod_operator_describes_its_container_and_pod() -> None:
    operator = KubernetesPodOperator(
        task_id="t",
        image="busybox:1.36",
        cmds=["sh", "-c"],
        arguments=["echo {{ ds }}"],
        env_vars={"A": "1", "PORT": 80},
        container_resources={"limits": {"memory": "64Mi"}},
        labels={"team": "data"},
        node_selector={"pool": "batch"},
        image_pull_secrets="reg1, reg2",
        in_cluster=True,
        get_logs=True,
        on_finish_action="delete_pod",
        retries=2,
    )
    operator.render_template_fields(make_context())
    assert operator.to_container() == {
        "name": "base",
        "image": "busybox:1.36",
        "command": ["sh", "-c"],
        "args": ["echo 2024-01-02"],
        "env": [{"name": "A", "value": "1"}, {"name": "PORT", "value": "80"}],
        "resources": {"limits": {"memory": "64Mi"}},
    }
    assert operator.to_pod_override() == {
        "metadata": {"labels": {"team": "data"}},
        "spec": {"nodeSelector": {"pool": "batch"}, "imagePullSecrets": [{"name": "reg1"}, {"name": "reg2"}]},
    }
    with pytest.raises(AirflowException, match="plain container"):
        operator.execute(make_context())


def test_kubernetes_pod_operator_keeps_env_given_as_kubernetes_entries() -> None:
    env = [{"name": "S", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]
    assert KubernetesPodOperator(task_id="t", image="i", env_vars=env).to_container()["env"] == env


def test_an_async_callable_runs_on_an_event_loop() -> None:
    """Airflow 3.2's PythonOperator runs an `async def` callable (the standard provider's
    example_python_operator's async_sleep_for_* tasks) and returns what it returns."""

    async def sleep_then_add(a: int, b: int) -> int:
        await asyncio.sleep(0.01)
        return a + b

    operator = PythonOperator(task_id="t", python_callable=sleep_then_add, op_kwargs={"a": 1, "b": 2})
    assert operator.execute(make_context()) == 3


def test_an_operator_renders_a_template_of_its_own_in_execute() -> None:
    """Airflow's `render_template` (the core example tutorial_taskflow_templates calls
    `context["task"].render_template(...)` inside the task)."""
    operator = PythonOperator(task_id="t", python_callable=lambda: None)
    context = make_context()
    operator.render_template_fields(context)
    assert operator.render_template("run: {{ ds }}", context) == "run: 2024-01-02"
    assert operator.render_template(["{{ ds_nodash }}", 1], context) == ["20240102", 1]
