"""Mapped task groups (Airflow 2.5's `@task_group` `.expand()`): what they compile to, what the DAG's
validation refuses, the scheduler's per-index dependencies inside the group (Airflow's
`_get_relevant_upstream_map_indexes`) and all-instances ones outside it, per-index XCom pulls, and a
run end to end in-process (`dag.test()`: `decide()` and the task runner, real; no cluster).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from controller.devtools import dag_runs
from tests.unit.pure_runs import Run, make_dag, started
from zonda import DAG
from zonda.authoring.manifests import dag_manifest
from zonda.decorators import task, task_group
from zonda.resources import xcom_refs
from zonda.resources.models import ExpandSpec, TaskInstanceState, TriggerRule
from zonda.specs import mapped_groups, mapping
from zonda.specs.dags import DagInvalid, parse_dag_spec, resolve_dag

S = TaskInstanceState
REF = xcom_refs.reference
ARG = mapped_groups.group_argument


def plus(x: int, y: int) -> int:
    return x + y


def square(value: int) -> int:
    return value * value


# ------------------------------------------------------------------------------------ authoring


def test_an_expanded_group_compiles_to_the_groups_expand_and_argument_markers() -> None:
    with DAG("groups") as dag:

        @task_group
        def grp(x: Any, y: Any) -> Any:
            return task(square)(task(plus)(x, y=y))

        grp.partial(y=10).expand(x=task(mapping_source)())
    manifest = dag_manifest(dag)["spec"]
    (group,) = manifest["taskGroups"]
    assert group["expand"] == {"kwargs": {"x": REF("mapping_source")}}
    assert group["dependsOn"] == ["mapping_source"]  # the group's roots wait for what it maps over
    tasks = {body["id"]: body for body in manifest["tasks"]}
    assert tasks["plus"]["args"]["op_args"] == [ARG("x")]
    assert tasks["plus"]["args"]["op_kwargs"] == {"y": 10}  # partial(): the same for every index
    assert "expand" not in tasks["plus"]

    resolved = resolve_dag("groups", parse_dag_spec(manifest))
    inner = resolved.tasks["grp.square"]
    assert inner.expand is not None and inner.expand.into == mapped_groups.GROUP_INTO
    assert inner.map_peers == frozenset({"grp.plus"})
    assert inner.upstream == frozenset({"grp.plus"})
    assert resolved.tasks["grp.plus"].upstream == frozenset({"mapping_source"})
    assert resolved.tasks["mapping_source"].mapped_group is None


def mapping_source() -> list[int]:
    return [1, 2, 3]


def test_expand_kwargs_gives_every_parameter_from_each_dict() -> None:
    with DAG("kwargs") as dag:

        @task_group
        def grp(x: Any, y: Any) -> None:
            task(plus)(x, y)

        grp.expand_kwargs([{"x": 1, "y": 2}, {"x": 3, "y": 4}])
    spec = dag_manifest(dag)["spec"]
    assert spec["taskGroups"][0]["expand"] == {"kwargsList": [{"x": 1, "y": 2}, {"x": 3, "y": 4}]}
    assert spec["tasks"][0]["args"]["op_args"] == [ARG("x"), ARG("y")]


def test_a_group_argument_used_outside_its_group_is_refused() -> None:
    with DAG("leak") as dag:
        leaked: list[Any] = []

        @task_group
        def grp(x: Any) -> None:
            leaked.append(x)
            task(square)(x)

        grp.expand(x=[1])
        task(square)(leaked[0])
    with pytest.raises(ValueError, match="used outside its mapped task group"):
        dag_manifest(dag)


def test_authoring_refuses_what_airflow_refuses() -> None:
    @task_group
    def grp(x: Any, y: Any = 1) -> None:
        task(plus)(x, y)

    with DAG("refused"):
        with pytest.raises(TypeError, match=r"unexpected argument\(s\) \['z'\]"):
            grp.expand(z=[1])
        with pytest.raises(TypeError, match="both partial\\(\\) and expand\\(\\)"):
            grp.partial(x=1).expand(x=[1])
        with pytest.raises(TypeError, match="a previous partial"):
            grp.partial(y=1).partial(y=2)
        with pytest.raises(TypeError, match="an XComArg or a list of dicts"):
            grp.expand_kwargs({"x": 1})
        with pytest.raises(TypeError, match="needs at least one argument"):
            grp.expand()


def test_override_names_the_mapped_group() -> None:
    @task_group
    def grp(x: Any) -> None:
        task(square)(x)

    with DAG("renamed") as dag:
        grp.override(group_id="other").expand(x=[1, 2])
    (group,) = dag_manifest(dag)["spec"]["taskGroups"]
    assert group["id"] == "other" and group["expand"] == {"kwargs": {"x": [1, 2]}}


def group_spec(**extra: Any) -> dict[str, Any]:
    return {
        "taskGroups": [
            {"id": "g", "expand": {"kwargs": {"x": [1, 2]}}},
            {"id": "inner", "parent": "g", **extra},
        ],
        "tasks": [
            {"id": "a", "group": "g", "operator": "BashOperator", "args": {"bash_command": ARG("x")}},
            {"id": "b", "group": "inner", "operator": "BashOperator", "args": {"bash_command": "echo"}},
        ],
    }


def test_a_nested_mapped_group_is_refused_with_what_to_do_instead() -> None:
    """Airflow 2 accepts it when parsing but cannot run it (the inner group fails to expand,
    apache/airflow#29339): Zonda refuses it when the DAG is validated (docs/decisions.md)."""
    with pytest.raises(
        DagInvalid, match="mapped task groups inside mapped task groups are not supported"
    ) as error:
        resolve_dag("bad", parse_dag_spec(group_spec(expand={"kwargs": {"y": [1]}})))
    assert "('inner' inside 'g'): make the inner one a plain TaskGroup" in str(error.value)


def test_a_mapped_task_inside_a_mapped_group_is_refused_with_what_to_do_instead() -> None:
    spec = group_spec()
    spec["tasks"][1]["expand"] = {"kwargs": {"bash_command": ["echo"]}}
    with pytest.raises(
        DagInvalid, match="a mapped task inside the mapped task group 'g' is not supported"
    ) as error:
        resolve_dag("bad", parse_dag_spec(spec))
    assert "make it a plain task of the group, which runs once per index" in str(error.value)


def test_a_plain_group_nested_in_a_mapped_group_is_mapped_with_it() -> None:
    resolved = resolve_dag("ok", parse_dag_spec(group_spec()))
    assert resolved.tasks["g.inner.b"].mapped_group == "g"
    assert resolved.tasks["g.inner.b"].map_peers == frozenset({"g.a"})


# ------------------------------------------------------------------------------------ arguments


def test_markers_are_replaced_by_this_index_arguments_anywhere_in_the_arguments() -> None:
    args = {"op_args": [ARG("x")], "op_kwargs": {"y": ARG("y"), "z": 3}, "env": {"A": [ARG("x")]}}
    assert mapped_groups.substitute(args, {"x": 1, "y": "two"}) == {
        "op_args": [1],
        "op_kwargs": {"y": "two", "z": 3},
        "env": {"A": [1]},
    }
    with pytest.raises(mapping.MappingError, match="no argument 'y'"):
        mapped_groups.substitute(args, {"x": 1})


def test_a_peer_is_pulled_at_the_same_index_and_others_whole() -> None:
    returned = {"g.a[0]": "a0", "g.a[1]": "a1", "out[0]": 5, "out[1]": 6, "make": [1, 2]}
    keyed = {"g.a[1]": {"extra": "e1"}}
    own, own_keyed = mapped_groups.per_index_xcoms(returned, keyed, frozenset({"g.a"}), 1)
    assert own == {"g.a": "a1", "out[0]": 5, "out[1]": 6, "make": [1, 2]}
    assert own_keyed == {"g.a": {"extra": "e1"}}


# ------------------------------------------------------------------------------------ the scheduler


def group_dag(after_rule: TriggerRule = TriggerRule.ALL_SUCCESS) -> Any:
    expand = ExpandSpec(kwargs={"x": REF("make")}, into=mapped_groups.GROUP_INTO)
    peers = {"g.a": frozenset({"g.b"}), "g.b": frozenset({"g.a"})}
    return make_dag(
        {
            "make": {},
            "g.a": {"upstream": ["make"], "expand": expand, "mapped_group": "g", "map_peers": peers["g.a"]},
            "g.b": {"upstream": ["g.a"], "expand": expand, "mapped_group": "g", "map_peers": peers["g.b"]},
            "after": {"upstream": ["g.b"], "trigger_rule": after_rule},
        }
    )


def expanded_group(values: list[Any], after_rule: TriggerRule = TriggerRule.ALL_SUCCESS) -> Run:
    run = started(group_dag(after_rule))
    run.step(run.succeeded("make", xcom=values, xcom_lengths={"return_value": len(values)}))
    return run


def test_every_task_of_the_group_expands_when_the_source_succeeds() -> None:
    run = expanded_group([10, 20, 30])
    assert run.states() == {
        "make": "success",
        "g.a[0]": "queued",
        "g.a[1]": "queued",
        "g.a[2]": "queued",
        "g.b[0]": "none",
        "g.b[1]": "none",
        "g.b[2]": "none",
        "after": "none",
    }


def test_each_index_waits_for_its_own_upstream_index_only() -> None:
    run = expanded_group([10, 20, 30])
    run.step(run.succeeded("g.a[1]", xcom=1))
    assert run.ti("g.b[1]").state is S.QUEUED  # not waiting for g.a[0] and g.a[2]
    assert run.ti("g.b[0]").state is S.NONE
    run.step(run.failed("g.a[0]"))
    assert run.ti("g.b[0]").state is S.UPSTREAM_FAILED
    assert run.ti("g.b[2]").state is S.NONE


def test_outside_the_group_the_downstream_waits_for_every_instance() -> None:
    run = expanded_group([10, 20], after_rule=TriggerRule.ALL_DONE)
    run.step(run.succeeded("g.a[0]", xcom=1), run.succeeded("g.a[1]", xcom=2))
    run.step(run.succeeded("g.b[0]", xcom=1))
    assert run.ti("after").state is S.NONE
    run.step(run.failed("g.b[1]"))
    assert run.ti("after").state is S.QUEUED  # all_done over both instances


def test_all_success_outside_the_group_fails_upstream_on_one_failed_index() -> None:
    run = expanded_group([10, 20])
    run.step(run.succeeded("g.a[0]", xcom=1), run.failed("g.a[1]"))
    run.step(run.succeeded("g.b[0]", xcom=1))
    assert run.states()["g.b[1]"] == "upstream_failed"
    assert run.ti("after").state is S.UPSTREAM_FAILED


def test_an_empty_expansion_skips_the_whole_group_and_its_downstream() -> None:
    run = expanded_group([])
    assert run.states() == {"make": "success", "g.a": "skipped", "g.b": "skipped", "after": "skipped"}


def test_a_failed_source_fails_the_group_upstream() -> None:
    run = started(group_dag())
    run.step(run.failed("make"))
    assert run.states() == {
        "make": "failed",
        "g.a": "upstream_failed",
        "g.b": "upstream_failed",
        "after": "upstream_failed",
    }


def test_a_source_that_is_no_list_fails_the_groups_root_and_the_rest_upstream() -> None:
    run = started(group_dag())
    run.step(run.succeeded("make", xcom=7))
    assert run.states() == {
        "make": "success",
        "g.a": "failed",
        "g.b": "upstream_failed",
        "after": "upstream_failed",
    }
    assert "pushed no list or dict" in (run.ti("g.a").reason or "")


# ------------------------------------------------------------------------------ end to end, in-process


def test_a_mapped_group_runs_per_index_and_reduces(tmp_path: Path) -> None:
    (tmp_path / "groups.py").write_text("""
from zonda import DAG
from zonda.decorators import task, task_group

with DAG("mapped_group") as dag:
    @task
    def make():
        return [1, 2, 3]

    @task
    def add(x, y):
        return x + y

    @task
    def square(value, ti=None):
        if value == 12:
            raise ValueError("boom")
        return [ti.map_index, value * value, ti.xcom_pull(task_ids="grp.add")]

    @task_group
    def grp(x, y):
        return square(add(x, y))

    @task(trigger_rule="all_done")
    def collect(values):
        return values

    @task
    def label(name, number):
        return f"{name}={number}"

    @task_group
    def pairs(name, number):
        label(name, number)

    collect(grp.partial(y=10).expand(x=make()))
    pairs.expand_kwargs([{"name": "a", "number": 1}, {"name": "b", "number": 2}])
""")
    outcome = dag_runs.test_file(tmp_path / "groups.py")
    assert [outcome.xcoms[f"grp.add[{i}]"] for i in range(3)] == [11, 12, 13]
    # the XComArg and ti.xcom_pull inside the group read the same index; index 1 failed alone
    assert outcome.task_states["grp.square[1]"] == "failed"
    assert outcome.xcoms["grp.square[2]"] == [2, 169, 13]
    assert outcome.xcoms["collect"] == [[0, 121, 11], [2, 169, 13]]  # the instances that returned one
    assert [outcome.xcoms[f"pairs.label[{i}]"] for i in range(2)] == ["a=1", "b=2"]
    assert outcome.state == "success"  # the leaves (collect: all_done, and pairs) succeeded
