"""Authoring dynamic task mapping: what `.partial().expand()` and friends compile to, what the DAG's
validation refuses, and a mapped DAG run end to end in-process (`dag.test()`: `decide()` and the task
runner, real; no cluster).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from controller.devtools import dag_runs
from examples.operators import mapping
from tests.paths import REPO_ROOT
from zonda import DAG
from zonda.authoring.manifests import dag_manifest
from zonda.decorators import task
from zonda.operators.bash import BashOperator
from zonda.specs.dags import DagInvalid, parse_dag_spec, resolve_dag

EXAMPLES = REPO_ROOT / "examples" / "dags"


def tasks_of(dag: DAG) -> dict[str, dict[str, Any]]:
    return {body["id"]: body for body in dag_manifest(dag)["spec"]["tasks"]}


def test_classic_operator_partial_expand_compiles_to_expand() -> None:
    with DAG("classic") as dag:
        BashOperator.partial(task_id="echo", retries=2).expand(bash_command=["echo a", "echo b"])
    body = tasks_of(dag)["echo"]
    assert body["expand"] == {"kwargs": {"bash_command": ["echo a", "echo b"]}}
    assert "bash_command" not in body.get("args", {})  # per instance, not shared
    assert body["retries"] == 2


def test_expand_over_an_xcom_makes_the_dependency() -> None:
    with DAG("flow") as dag:
        task(mapping.add).partial(y=1).expand(x=task(mapping.make_numbers)())
    body = tasks_of(dag)["add"]
    assert body["dependsOn"] == ["make_numbers"]
    assert body["expand"]["into"] == "op_kwargs"
    assert body["args"]["op_kwargs"] == {"y": 1}


def test_expand_with_an_unknown_argument_is_refused_when_authoring() -> None:
    with DAG("typo"), pytest.raises(TypeError, match="unexpected argument"):
        BashOperator.partial(task_id="echo").expand(bash_comand=["x"])


def test_expand_over_a_scalar_is_refused_when_authoring() -> None:
    with DAG("scalar"), pytest.raises(TypeError, match="cannot map over a int"):
        BashOperator.partial(task_id="echo").expand(bash_command=3)


def spec_with(**mapped: Any) -> dict[str, Any]:
    return {
        "tasks": [
            {"id": "up", "operator": "BashOperator", "args": {"bash_command": "echo"}},
            {"id": "echo", "operator": "BashOperator", **mapped},
        ]
    }


@pytest.mark.parametrize(
    ("mapped", "message"),
    [
        pytest.param(
            {"expand": {"kwargs": {"bash_command": {"__zonda_xcom__": {"task_id": "up"}}}}},
            "maps over the XCom of ['up'], which must be upstream of it",
            id="source not upstream",
        ),
        pytest.param(
            {"expand": {"kwargs": {"bash_commnd": ["x"]}}},
            "unexpected argument 'bash_commnd'",
            id="unknown mapped argument",
        ),
        pytest.param({"expand": {"kwargs": {"bash_command": 3}}}, "cannot map over a int", id="a scalar"),
        pytest.param({"expand": {"kwargs": {}}}, "needs at least one argument", id="nothing to map"),
    ],
)
def test_the_dag_validation_refuses_bad_mappings(mapped: dict[str, Any], message: str) -> None:
    with pytest.raises(DagInvalid) as raised:
        resolve_dag("bad", parse_dag_spec(spec_with(**mapped)))
    assert message in str(raised.value)


def test_a_mapped_classic_operator_needs_no_shared_required_argument() -> None:
    resolved = resolve_dag("ok", parse_dag_spec(spec_with(expand={"kwargs": {"bash_command": ["echo"]}})))
    assert resolved.tasks["echo"].expand is not None


def test_the_example_maps_reduces_and_passes_map_index() -> None:
    outcome = dag_runs.test_file(EXAMPLES / "example_dynamic_task_mapping.py")
    assert outcome.state == "success"
    assert outcome.xcoms["total"] == 36  # (1+10) + (2+10) + (3+10)
    assert [outcome.xcoms[f"add[{i}]"] for i in range(3)] == [11, 12, 13]
    assert [outcome.xcoms[f"describe[{i}]"] for i in range(3)] == [
        "instance 0 got 2",
        "instance 1 got 4",
        "instance 2 got 6",
    ]
    assert [outcome.xcoms[f"echo[{i}]"] for i in range(3)] == ["one", "two", "three"]


def test_dag_file_functions_lambdas_zip_and_expand_kwargs(tmp_path: Path) -> None:
    (tmp_path / "mapped.py").write_text("""
from zonda import DAG
from zonda.decorators import task

with DAG("mapped_in_file") as dag:
    @task
    def make():
        return {"a": 1, "b": 2}

    @task
    def pair(key, value):
        return f"{key}={value}"

    @task
    def show(text, ti=None):
        return f"{ti.map_index}:{text}"

    @task
    def collect(values, ti=None):
        return [values, ti.xcom_pull(task_ids="show", map_indexes=1)]

    pairs = pair.expand_kwargs(make().map(lambda item: {"key": item[0], "value": item[1]}))
    shown = show.expand(text=pairs.zip(["x", "y", "z"], fillvalue="-").map(lambda p: "/".join(p)))
    collect(shown)
    show.override(task_id="nothing").expand(text=[])
""")
    outcome = dag_runs.test_file(tmp_path / "mapped.py")
    assert outcome.task_states["nothing"] == "skipped"  # an empty expansion
    assert [outcome.xcoms[f"pair[{i}]"] for i in range(2)] == ["a=1", "b=2"]
    assert outcome.xcoms["collect"] == [["0:a=1/x", "1:b=2/y", "2:-/z"], "1:b=2/y"]
    assert outcome.state == "success"
