"""Operator arguments checked when a DAG is validated (issue 15), from the operator classes' signatures.

Pure: specs are the camelCase dicts a DAG resource holds; operators are Zonda's real classes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.paths import REPO_ROOT
from zonda.operators.base import BaseOperator
from zonda.specs import operator_registry
from zonda.specs.dags import DagInvalid, parse_dag_spec, resolve_dag
from zonda.specs.operator_arguments import check_operator_arguments, operator_signature, signature_of_class

EXAMPLES = REPO_ROOT / "examples" / "dags"

ARGUMENT_ERRORS = [
    pytest.param(
        "BashOperator",
        {"bash_cmd": "echo hi"},
        [
            "BashOperator got an unexpected argument 'bash_cmd' (did you mean 'bash_command'?)",
            "BashOperator is missing required argument 'bash_command'",
        ],
        id="a misspelt required argument is named with its likely intent and reported missing",
    ),
    pytest.param(
        "BashOperator",
        {"bash_command": 3},
        ["BashOperator argument 'bash_command' should be a string, got a number 3"],
        id="a number where a string is documented",
    ),
    pytest.param(
        "BashOperator",
        {"bash_command": "exit 3", "skip_on_exit_code": [1, "a"]},
        [
            "BashOperator argument 'skip_on_exit_code' should be an integer or a list or null, "
            "got a list [1, 'a']"
        ],
        id="list elements are checked against the element type",
    ),
    pytest.param(
        "PythonOperator",
        {"python_callable": "pkg.mod:fn", "op_kwargs": "x=1"},
        ["PythonOperator argument 'op_kwargs' should be a mapping or null, got a string 'x=1'"],
        id="a string where a mapping is documented",
    ),
    pytest.param(
        "ShortCircuitOperator",
        {},
        ["ShortCircuitOperator is missing required argument 'python_callable'"],
        id="a required argument of a base class's __init__ is required",
    ),
    pytest.param(
        "TimeDeltaSensor",
        {"delta": "1h", "poke_interval": True},
        [
            "TimeDeltaSensor argument 'poke_interval' should be timedelta or a number or a string, "
            "got a boolean True"
        ],
        id="a JSON boolean is not a number",
    ),
    pytest.param(
        "DateTimeSensor",
        {"target_time": 3},
        ["DateTimeSensor argument 'target_time' should be a string or datetime, got a number 3"],
        id="a union of a class JSON cannot hold and str rejects a number",
    ),
    pytest.param(
        "KubernetesPodOperator",
        {"image": "busybox", "cmds": "echo", "task_id": "x"},
        [
            "'task_id' may not be an operator argument: the task's id is its task_id",
            "KubernetesPodOperator argument 'cmds' should be a list or null, got a string 'echo'",
        ],
        id="task_id in args and a string where a list is documented",
    ),
    pytest.param(
        "EmptyOperator",
        {"foo": 1},
        ["EmptyOperator got an unexpected argument 'foo'"],
        id="an unknown argument without a close name gets no suggestion",
    ),
]


@pytest.mark.parametrize(("operator", "args", "expected"), ARGUMENT_ERRORS)
def test_invalid_arguments_are_described(operator: str, args: dict[str, Any], expected: list[str]) -> None:
    assert check_operator_arguments(operator, args) == expected


VALID_ARGUMENTS = [
    pytest.param("BashOperator", {"bash_command": "echo", "env": "{{ params.env }}"}, id="template field"),
    pytest.param("BashOperator", {"bash_command": "echo", "retries": 3, "pool": "p"}, id="scheduler args"),
    pytest.param("TimeSensor", {"target_time": "10:00"}, id="a time as text"),
    pytest.param("TimeDeltaSensor", {"delta": 30, "mode": "reschedule"}, id="a number of seconds"),
    pytest.param("FileSensor", {"filepath": "/tmp/x", "poke_interval": 5.5}, id="float for float"),
    pytest.param("KubernetesPodOperator", {"image": "busybox", "env_vars": {"A": 1}}, id="mapping"),
    pytest.param("WaitForObjectSensor", {"anything": 1}, id="a provider's operator is not imported"),
    pytest.param("pkg.mod.UserOperator", {"anything": 1}, id="a user's operator is not imported"),
]


@pytest.mark.parametrize(("operator", "args"), VALID_ARGUMENTS)
def test_valid_arguments_pass(operator: str, args: dict[str, Any]) -> None:
    assert check_operator_arguments(operator, args) == []


@pytest.mark.parametrize(
    "operator",
    sorted(name for name, path in operator_registry.BUILTIN_OPERATORS.items() if path.startswith("zonda.")),
)
def test_every_builtin_accepts_what_its_class_accepts(operator: str) -> None:
    """One source: every name the checker accepts, the class's constructor accepts too."""
    signature = operator_signature(operator)
    assert signature is not None
    assert "task_id" in signature.accepted
    assert "retries" in signature.accepted  # Airflow's scheduler arguments are accepted and ignored


def test_the_signature_follows_a_subclass() -> None:
    class Greeting(BaseOperator):
        def __init__(self, *, name: str, times: int = 1, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.name, self.times = name, times

    signature = signature_of_class(Greeting)
    assert signature.required == ("name",)
    assert {"name", "times", "do_xcom_push", "params"} <= signature.accepted


def test_every_argument_problem_is_in_the_dag_errors_at_once() -> None:
    spec = parse_dag_spec(
        {
            "defaultArgs": {"args": {"env": {"A": "1"}}},
            "tasks": [
                {"id": "hello", "operator": "BashOperator", "args": {"bash_cmd": "echo"}},
                {"id": "call", "operator": "PythonOperator", "args": {"python_callable": 42}},
                {"id": "fine", "operator": "BashOperator", "args": {"bash_command": "true"}},
            ],
        }
    )
    with pytest.raises(DagInvalid) as caught:
        resolve_dag("example", spec)
    assert caught.value.errors == [
        "task 'hello': BashOperator got an unexpected argument 'bash_cmd' (did you mean 'bash_command'?)",
        "task 'hello': BashOperator is missing required argument 'bash_command'",
        "task 'call': PythonOperator argument 'python_callable' should be a callable or a string, "
        "got a number 42",
    ]


def test_default_args_give_each_operator_only_what_it_accepts() -> None:
    """As Airflow's `apply_defaults`: one DAG's default_args serve operators taking different arguments."""
    spec = parse_dag_spec(
        {
            "defaultArgs": {"args": {"bash_command": "echo default", "op_kwargs": {"x": 1}}},
            "tasks": [
                {"id": "hello", "operator": "BashOperator"},
                {"id": "call", "operator": "PythonOperator", "args": {"python_callable": "m:f"}},
                {"id": "custom", "operator": "pkg.mod.Custom"},
            ],
        }
    )
    tasks = resolve_dag("example", spec).tasks
    assert tasks["hello"].args == {"bash_command": "echo default"}
    assert tasks["call"].args == {"python_callable": "m:f", "op_kwargs": {"x": 1}}
    # A class not imported at validation time gets every default, as before.
    assert tasks["custom"].args == {"bash_command": "echo default", "op_kwargs": {"x": 1}}


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda path: path.name)
def test_the_examples_arguments_are_valid(path: Path) -> None:
    for document in yaml.safe_load_all(path.read_text()):
        if document and document.get("kind") == "DAG":
            resolve_dag(document["metadata"]["name"], parse_dag_spec(document["spec"]))
