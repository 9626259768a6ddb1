"""Resolving a DAG spec: validation messages, defaults, task groups and order, as Airflow builds a DAG.

Everything here is pure: specs are parsed from the same camelCase dicts a DAG resource holds.
"""

from __future__ import annotations

import itertools
import random
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zonda.resources.models import TriggerRule, WeightRule
from zonda.specs import operator_registry
from zonda.specs.dags import (
    DagInvalid,
    ResolvedDag,
    effective_priority_weights,
    parse_dag_spec,
    resolve_dag,
)
from zonda.specs.merging import strategic_merge


def task(task_id: str, *depends_on: str, **fields: Any) -> dict[str, Any]:
    """A task dict as written in a DAG resource; EmptyOperator unless said otherwise."""
    body: dict[str, Any] = {"id": task_id, "operator": "EmptyOperator", **fields}
    if depends_on:
        body["dependsOn"] = list(depends_on)
    return body


def group(group_id: str, *depends_on: str, **fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"id": group_id, **fields}
    if depends_on:
        body["dependsOn"] = list(depends_on)
    return body


def resolve(tasks: list[dict[str, Any]], **spec: Any) -> ResolvedDag:
    return resolve_dag("example", parse_dag_spec({"tasks": tasks, **spec}))


def errors_of(tasks: list[dict[str, Any]], **spec: Any) -> list[str]:
    with pytest.raises(DagInvalid) as caught:
        resolve(tasks, **spec)
    return caught.value.errors


# ------------------------------------------------------------------------------------- validation

INVALID_DAGS = [
    pytest.param(
        [task("a", "c"), task("b", "a"), task("c", "b")],
        {},
        ["cycle: a -> b -> c -> a"],
        id="a cycle is named task by task from its first task in spec order",
    ),
    pytest.param(
        [task("a", "a")],
        {},
        ["cycle: a -> a"],
        id="a task depending on itself is a cycle of one",
    ),
    pytest.param(
        [task("start"), task("a", "start", "b"), task("b", "a"), task("after", "b")],
        {},
        ["cycle: a -> b -> a"],
        id="tasks merely downstream of a cycle are not reported as cycles",
    ),
    pytest.param(
        [task("a", group="g1"), task("b", "g1", group="g2")],
        {"taskGroups": [group("g1", "g2"), group("g2")]},
        ["cycle: g1.a -> g2.b -> g1.a"],
        id="groups depending on each other make a cycle named by their tasks",
    ),
    pytest.param(
        [task("extract"), task("load", "extrct")],
        {},
        ["task 'load' depends on unknown task or task group 'extrct'", "did you mean 'extract'"],
        id="an unknown upstream names the task that wants it and suggests close ids",
    ),
    pytest.param(
        [task("a"), task("a")],
        {},
        ["task id 'a' is used by 2 tasks (spec.tasks[0] and spec.tasks[1])"],
        id="duplicate task ids say where both are",
    ),
    pytest.param(
        [task("a", group="g"), task("g.a")],
        {"taskGroups": [group("g")]},
        ["task id 'g.a' is used by 2 tasks"],
        id="task ids are compared after group prefixing",
    ),
    pytest.param(
        [task("a", group="g")],
        {"taskGroups": [group("g"), group("g")]},
        ["task group id 'g' is used by 2 groups (spec.taskGroups[0] and spec.taskGroups[1])"],
        id="duplicate task group ids say where both are",
    ),
    pytest.param(
        [task("a", group="etl")],
        {"taskGroups": [group("elt")]},
        ["task 'a' is in unknown task group 'etl'", "did you mean 'elt'"],
        id="a task in an unknown group is named with a suggestion",
    ),
    pytest.param(
        [task("a", group="inner")],
        {"taskGroups": [group("inner", parent="outr"), group("outer")]},
        ["task group 'inner' has unknown parent group 'outr'", "did you mean 'outer'"],
        id="an unknown parent group is named with a suggestion",
    ),
    pytest.param(
        [task("a", group="x")],
        {"taskGroups": [group("x", parent="y"), group("y", parent="x")]},
        ["task groups nest in a cycle: x -> y -> x"],
        id="task groups nested in each other are reported as a cycle",
    ),
    pytest.param(
        [task("a", group="a.b")],
        {"taskGroups": [group("a.b")]},
        ["task group id 'a.b' may not contain '.'"],
        id="a prefixing group id may not contain a dot, as in Airflow",
    ),
    pytest.param(
        [task("g"), task("a", group="g")],
        {"taskGroups": [group("g")]},
        ["id 'g' names both a task and task group 'g'"],
        id="an id naming both a task and a group is ambiguous in dependsOn",
    ),
    pytest.param(
        [task("a", group="g"), task("b", "g", group="g")],
        {"taskGroups": [group("g")]},
        ["task 'g.b' depends on task group 'g', which contains it"],
        id="a task cannot depend on its own group",
    ),
    pytest.param(
        [task("a", group="g")],
        {"taskGroups": [group("g", "g")]},
        ["task group 'g' depends on itself"],
        id="a group cannot depend on itself",
    ),
    pytest.param(
        [task("a", group="g")],
        {"taskGroups": [group("g", "g.a")]},
        ["task group 'g' depends on task 'g.a', which is inside it"],
        id="a group cannot depend on one of its own tasks",
    ),
    pytest.param(
        [task("a", group="inner")],
        {"taskGroups": [group("outer"), group("inner", "outer", parent="outer")]},
        ["task group 'inner' depends on task group 'outer', which contains it"],
        id="a group cannot depend on the group enclosing it",
    ),
    pytest.param(
        [task("a", "empty")],
        {"taskGroups": [group("empty")]},
        ["task 'a' depends on task group 'empty', which has no tasks"],
        id="depending on an empty group is an error rather than silently nothing",
    ),
    pytest.param(
        [task("a")],
        {"taskGroups": [group("lonely", "a")]},
        ["task group 'lonely' has no tasks, so its dependsOn would have no effect"],
        id="an empty group with dependencies is reported",
    ),
    pytest.param(
        [task("a"), task("b", "a", edgeLabels={"c": "why"})],
        {},
        ["task 'b' has an edge label for 'c', which is not in its dependsOn"],
        id="an edge label for something the task does not depend on is reported",
    ),
    pytest.param(
        [task("a"), task("b", group="g")],
        {"taskGroups": [group("g", "a", edgeLabels={"c": "why"})]},
        ["task group 'g' has an edge label for 'c', which is not in its dependsOn"],
        id="an edge label for something the group does not depend on is reported",
    ),
    pytest.param(
        [task("a")],
        {"schedule": "61 * * * *"},
        ["schedule '61 * * * *'", "61"],
        id="an invalid cron expression is named",
    ),
    pytest.param(
        [task("a")],
        {"schedule": "@fortnightly"},
        ["schedule '@fortnightly'", "@daily"],
        id="an unknown preset lists the known ones",
    ),
    pytest.param(
        [task("a")],
        {"schedule": "0s"},
        ["schedule '0s'", "positive"],
        id="a zero duration schedule is refused",
    ),
    pytest.param(
        [task("a")],
        {"timezone": "Europe/Pari"},
        ["unknown timezone 'Europe/Pari'", "did you mean 'Europe/Paris'"],
        id="an unknown timezone suggests close IANA names",
    ),
    pytest.param(
        [task("a")],
        {"schedule": "@daily", "timetable": {"class": "zonda.timetables.OnceTimetable"}},
        ["set either schedule or timetable, not both"],
        id="schedule and timetable together are refused",
    ),
    pytest.param(
        [task("a")],
        {"timetable": {"class": "no_such_package.timetables.Fortnightly"}},
        ["timetable 'no_such_package.timetables.Fortnightly' cannot be used", "no_such_package"],
        id="a timetable class that cannot be imported is an error, not a crash",
    ),
    pytest.param(
        [task("a")],
        {"dagrunTimeout": "0s"},
        ["dagrunTimeout: duration '0s' must be longer than 0s"],
        id="a zero dagrun timeout is refused",
    ),
    pytest.param(
        [task("a", operator="BashOperater")],
        {},
        ["task 'a': unknown operator 'BashOperater'", "did you mean 'BashOperator'"],
        id="an unknown operator name suggests built-in names",
    ),
    pytest.param(
        [task("a", operator="not a path")],
        {},
        ["task 'a': unknown operator 'not a path'"],
        id="an operator that is neither built-in nor an import path is refused",
    ),
    pytest.param(
        [task("a", operator=None)],
        {},
        ["task 'a' has neither an operator nor a container image"],
        id="a task with neither an operator nor a container image is refused",
    ),
    pytest.param(
        [task("a")],
        {"startDate": "2024-02-01T00:00:00Z", "endDate": "2024-01-01T00:00:00Z"},
        ["endDate 2024-01-01T00:00:00+00:00 is before startDate 2024-02-01T00:00:00+00:00"],
        id="an end date before the start date is refused",
    ),
]


@pytest.mark.parametrize(("tasks", "spec", "fragments"), INVALID_DAGS)
def test_invalid_dags_are_reported_with_a_sentence_naming_the_problem(
    tasks: list[dict[str, Any]], spec: dict[str, Any], fragments: list[str]
) -> None:
    errors = errors_of(tasks, **spec)
    assert any(all(fragment in error for fragment in fragments) for error in errors), errors


VALID_DAGS = [
    pytest.param([task("a")], {"schedule": "@daily"}, id="a preset schedule"),
    pytest.param([task("a")], {"schedule": "@quarterly"}, id="Airflow's quarterly preset"),
    pytest.param([task("a")], {"schedule": "@once"}, id="a run-once schedule"),
    pytest.param([task("a")], {"schedule": "*/5 * * * 1-5"}, id="a cron expression"),
    pytest.param([task("a")], {"schedule": "1h30m"}, id="a duration schedule"),
    pytest.param(
        [task("a")], {"timetable": {"class": "zonda.timetables.OnceTimetable"}}, id="a timetable class"
    ),
    pytest.param(
        [task("a", operator="my_company.operators:SyncOperator"), task("b", operator="pkg.mod.Op")],
        {},
        id="operators given by import path, which are never imported",
    ),
    pytest.param([task("a", operator=None, container={"image": "busybox"})], {}, id="a container task"),
    pytest.param(
        [task("a", operator=None)],
        {"defaultArgs": {"container": {"image": "busybox"}}},
        id="a container task whose image comes from defaultArgs",
    ),
    pytest.param(
        [task("a")],
        {"startDate": "2024-01-01T00:00:00Z", "endDate": "2024-01-01T00:00:00Z"},
        id="an end date equal to the start date",
    ),
    pytest.param(
        [task("a")],
        {"timezone": "Asia/Tokyo", "startDate": "2024-01-01T08:00:00", "endDate": "2024-01-01T00:00:00Z"},
        id="a naive start date is read in the DAG's timezone (23:00 UTC the day before)",
    ),
]


@pytest.mark.parametrize(("tasks", "spec"), VALID_DAGS)
def test_valid_dags_resolve(tasks: list[dict[str, Any]], spec: dict[str, Any]) -> None:
    assert resolve(tasks, **spec).tasks


def test_every_problem_is_reported_at_once() -> None:
    errors = errors_of(
        [task("a", "missing"), task("a"), task("b", operator="Nope"), task("c", "c")],
        schedule="not a cron",
        timezone="Nowhere/City",
    )
    assert len(errors) == 6, errors


def test_dag_invalid_message_joins_every_error() -> None:
    with pytest.raises(DagInvalid, match=r"unknown timezone 'X'.*unknown operator 'Y'"):
        resolve([task("a", operator="Y")], timezone="X")


INVALID_WIRE_SPECS = [
    pytest.param(
        {"tasks": [task("a"), task("b"), task("c", triggerRule="al_success")]},
        ["spec.tasks[2].triggerRule: Input should be 'all_success'", "(got 'al_success')"],
        id="an unknown trigger rule gives its field path, the valid rules and what was written",
    ),
    pytest.param(
        {"tasks": [task("a", retryDelay="-5m")]},
        ["spec.tasks[0].retryDelay: invalid duration '-5m'", "'1h30m'"],
        id="a negative duration is named with an example of a valid one",
    ),
    pytest.param(
        {"tasks": [task("a b")]},
        ["spec.tasks[0].id: invalid id 'a b'"],
        id="an invalid task id says which characters are allowed",
    ),
    pytest.param(
        {"tasks": [task("a", dependson=["b"])]},
        ["spec.tasks[0].dependson: unknown field (did you mean 'dependsOn'"],
        id="a misspelt field suggests the right one",
    ),
    pytest.param(
        {"tasks": [task("a")], "taskGroups": [group("g", defaultArgs={"retrys": 1})]},
        ["spec.taskGroups[0].defaultArgs.retrys: unknown field (did you mean 'retries'"],
        id="a misspelt field inside nested objects suggests the right one",
    ),
    pytest.param(
        {"tasks": [task("a", retries=-1)]},
        ["spec.tasks[0].retries: Input should be greater than or equal to 0 (got -1)"],
        id="negative retries are refused with the value written",
    ),
    pytest.param(
        {"tasks": [{"operator": "EmptyOperator"}]},
        ["spec.tasks[0].id: required field is missing"],
        id="a missing task id is named by its path",
    ),
    pytest.param({"tasks": []}, ["spec.tasks: List should have at least 1 item"], id="a DAG needs a task"),
]


@pytest.mark.parametrize(("raw", "fragments"), INVALID_WIRE_SPECS)
def test_parse_dag_spec_reports_field_paths(raw: dict[str, Any], fragments: list[str]) -> None:
    with pytest.raises(DagInvalid) as caught:
        parse_dag_spec(raw)
    assert any(all(f in error for f in fragments) for error in caught.value.errors), caught.value.errors


def test_parse_dag_spec_reports_every_field_at_once() -> None:
    with pytest.raises(DagInvalid) as caught:
        parse_dag_spec({"tasks": [task("a", triggerRule="x", retryDelay="y")], "maxActiveRuns": 0})
    assert len(caught.value.errors) == 3


# --------------------------------------------------------------------------------------- defaults


def test_unset_fields_take_airflows_defaults() -> None:
    resolved = resolve([task("a")]).tasks["a"]
    assert (
        resolved.retries, resolved.retry_delay, resolved.trigger_rule, resolved.priority_weight,
        resolved.weight_rule, resolved.retry_exponential_backoff, resolved.depends_on_past,
        resolved.max_retry_delay, resolved.execution_timeout, resolved.owner, resolved.args,
    ) == (
        0, timedelta(minutes=5), TriggerRule.ALL_SUCCESS, 1,
        WeightRule.DOWNSTREAM, False, False, None, None, "airflow", {},
    )  # fmt: skip


LAYERS = ("DAG", "outer group", "inner group", "task")


def _precedence_cases() -> list[Any]:
    cases = []
    for count in range(len(LAYERS) + 1):
        for chosen in itertools.combinations(LAYERS, count):
            winner = chosen[-1] if chosen else "Airflow's default"
            said = ", ".join(chosen) if chosen else "nothing"
            cases.append(pytest.param(chosen, id=f"retries come from {winner} when set on {said}"))
    return cases


@pytest.mark.parametrize("layers", _precedence_cases())
def test_defaults_precedence(layers: tuple[str, ...]) -> None:
    value = {layer: index + 1 for index, layer in enumerate(LAYERS)}  # each layer says a different number

    def defaults(layer: str) -> dict[str, Any]:
        return {"retries": value[layer]} if layer in layers else {}

    dag = resolve(
        [task("a", group="inner", **defaults("task"))],
        defaultArgs=defaults("DAG"),
        taskGroups=[
            group("outer", defaultArgs=defaults("outer group")),
            group("inner", parent="outer", defaultArgs=defaults("inner group")),
        ],
    )
    expected = value[layers[-1]] if layers else 0
    assert dag.tasks["outer.inner.a"].retries == expected


def test_args_merge_key_by_key_from_dag_to_group_to_task() -> None:
    dag = resolve(
        [task("a", group="g", operator="BashOperator", args={"env": {"C": "3"}, "cwd": "/task"})],
        defaultArgs={"args": {"bash_command": "true", "env": {"A": "1"}, "cwd": "/dag", "append_env": True}},
        taskGroups=[group("g", defaultArgs={"args": {"cwd": "/group", "output_encoding": "ascii"}})],
    )
    # Airflow's default_args feed operator kwargs: a task's `env` replaces the default's whole `env`.
    assert dag.tasks["g.a"].args == {
        "bash_command": "true", "env": {"C": "3"}, "cwd": "/task", "append_env": True,
        "output_encoding": "ascii",
    }  # fmt: skip


def test_container_and_pod_override_merge_deeply_and_replace_lists() -> None:
    dag = resolve(
        [task("a", operator=None, container={"resources": {"limits": {"cpu": "2"}}, "args": ["x"]})],
        defaultArgs={
            "container": {"image": "busybox", "resources": {"limits": {"memory": "1Gi"}}, "args": ["a", "b"]},
            "podOverride": {"spec": {"nodeSelector": {"disk": "ssd"}}},
        },
        taskGroups=[],
    )
    resolved = dag.tasks["a"]
    assert resolved.container == {
        "image": "busybox", "resources": {"limits": {"memory": "1Gi", "cpu": "2"}}, "args": ["x"],
    }  # fmt: skip
    assert resolved.pod_override == {"spec": {"nodeSelector": {"disk": "ssd"}}}


def test_the_merge_leaves_its_inputs_untouched() -> None:
    base = {"a": {"b": [1]}}
    merged = strategic_merge(base, {"a": {"c": 2}})
    merged["a"]["b"].append(2)
    assert base == {"a": {"b": [1]}}


def test_durations_and_timeouts_are_parsed() -> None:
    dag = resolve(
        [task("a", executionTimeout="1h", maxRetryDelay="10m")],
        defaultArgs={"retryDelay": "30s"},
        dagrunTimeout="2h",
    )
    resolved = dag.tasks["a"]
    assert (resolved.retry_delay, resolved.execution_timeout, resolved.max_retry_delay) == (
        timedelta(seconds=30),
        timedelta(hours=1),
        timedelta(minutes=10),
    )
    assert dag.dagrun_timeout == timedelta(hours=2)


# ------------------------------------------------------------------------------------ task groups

GROUP_IDS = [
    pytest.param([group("g")], "g", "g.a", id="a task in a group is prefixed with the group id"),
    pytest.param(
        [group("outer"), group("inner", parent="outer")],
        "inner",
        "outer.inner.a",
        id="nested groups prefix from the outermost",
    ),
    pytest.param(
        [group("g", prefixGroupId=False)],
        "g",
        "a",
        id="a group with prefixGroupId false does not prefix its tasks",
    ),
    pytest.param(
        [group("outer", prefixGroupId=False), group("inner", parent="outer")],
        "inner",
        "inner.a",
        id="a non-prefixing outer group drops its own and its ancestors' prefix from inner ids",
    ),
    pytest.param(
        [group("outer"), group("inner", parent="outer", prefixGroupId=False)],
        "inner",
        "a",
        id="a non-prefixing inner group leaves its tasks unprefixed even inside a prefixing group",
    ),
    pytest.param(
        [group("top", prefixGroupId=False), group("mid", parent="top"), group("low", parent="mid")],
        "low",
        "mid.low.a",
        id="prefixing resumes below a non-prefixing group, as Airflow's child_id",
    ),
]


@pytest.mark.parametrize(("groups", "in_group", "expected_id"), GROUP_IDS)
def test_task_group_prefixes(groups: list[dict[str, Any]], in_group: str, expected_id: str) -> None:
    dag = resolve([task("a", group=in_group)], taskGroups=groups)
    assert list(dag.tasks) == [expected_id]
    assert dag.tasks[expected_id].group == in_group


def upstreams(dag: ResolvedDag) -> dict[str, set[str]]:
    return {task_id: set(resolved.upstream) for task_id, resolved in dag.tasks.items()}


GROUP_EDGES = [
    pytest.param(
        [
            task("a", group="group1"),
            task("b", "a", group="group1"),
            task("c", group="group1"),
            task("task3", "group1"),
        ],
        [group("group1")],
        {"group1.a": set(), "group1.b": {"group1.a"}, "group1.c": set(), "task3": {"group1.b", "group1.c"}},
        id="group1 >> task3 makes task3 depend on the group's leaves",
    ),
    pytest.param(
        [task("start"), task("a", group="g"), task("b", "a", group="g")],
        [group("g", "start")],
        {"start": set(), "g.a": {"start"}, "g.b": {"g.a"}},
        id="a group's dependsOn applies to its roots only",
    ),
    pytest.param(
        [
            task("a", group="g1"),
            task("b", "a", group="g1"),
            task("c", group="g2"),
            task("d", "c", group="g2"),
        ],
        [group("g1"), group("g2", "g1")],
        {"g1.a": set(), "g1.b": {"g1.a"}, "g2.c": {"g1.b"}, "g2.d": {"g2.c"}},
        id="group1 >> group2 joins the leaves of one to the roots of the other",
    ),
    pytest.param(
        [
            task("a", group="outer"),
            task("x", group="inner"),
            task("y", "x", group="inner"),
            task("after", "outer"),
        ],
        [group("outer"), group("inner", "a", parent="outer")],
        {
            "outer.a": set(),
            "outer.inner.x": {"outer.a"},
            "outer.inner.y": {"outer.inner.x"},
            "after": {"outer.inner.y"},
        },
        id="nested groups count their inner groups' edges when finding leaves",
    ),
    pytest.param(
        [task("a", group="g"), task("b", "g.a", group="g")],
        [group("g")],
        {"g.a": set(), "g.b": {"g.a"}},
        id="a task may name a sibling by its full id",
    ),
    pytest.param(
        [task("a"), task("a", group="g"), task("b", "a", group="g")],
        [group("g")],
        {"a": set(), "g.a": set(), "g.b": {"g.a"}},
        id="an id written inside a group means the sibling before the top-level task",
    ),
    pytest.param(
        [task("a", group="outer"), task("b", "a", group="inner")],
        [group("outer"), group("inner", parent="outer")],
        {"outer.a": set(), "outer.inner.b": {"outer.a"}},
        id="an id not found in the task's group is looked up in the enclosing groups",
    ),
    pytest.param(
        [task("x", group="inner"), task("after", "inner")],
        [group("outer"), group("inner", parent="outer")],
        {"outer.inner.x": set(), "after": {"outer.inner.x"}},
        id="a nested group may be named by its declared id from anywhere",
    ),
    pytest.param(
        [task("x", group="inner"), task("after", "outer.inner")],
        [group("outer"), group("inner", parent="outer")],
        {"outer.inner.x": set(), "after": {"outer.inner.x"}},
        id="a nested group may be named by its full id",
    ),
]


@pytest.mark.parametrize(("tasks", "groups", "expected"), GROUP_EDGES)
def test_group_dependencies(
    tasks: list[dict[str, Any]], groups: list[dict[str, Any]], expected: dict[str, set[str]]
) -> None:
    assert upstreams(resolve(tasks, taskGroups=groups)) == expected


def test_downstream_sets_mirror_upstream_sets() -> None:
    dag = resolve([task("a"), task("b", "a"), task("c", "a", "b")])
    assert {t: set(r.downstream) for t, r in dag.tasks.items()} == {"a": {"b", "c"}, "b": {"c"}, "c": set()}


def test_edge_labels_are_keyed_by_resolved_upstream_ids() -> None:
    dag = resolve(
        [
            task("a", group="g"),
            task("b", group="g"),
            task("c", "g", "d", edgeLabels={"g": "when done"}),
            task("d"),
        ],
        taskGroups=[group("g")],
    )
    assert dag.tasks["c"].edge_labels == {"g.a": "when done", "g.b": "when done"}


# ------------------------------------------------------------------------------------------ order


def test_independent_tasks_keep_spec_order() -> None:
    assert list(resolve([task("z"), task("y"), task("x")]).tasks) == ["z", "y", "x"]


def test_ties_are_broken_by_spec_order() -> None:
    dag = resolve([task("late", "root"), task("root"), task("early", "root"), task("solo")])
    assert list(dag.tasks) == ["root", "late", "early", "solo"]


@st.composite
def random_dags(draw: st.DrawFn) -> tuple[list[dict[str, Any]], set[tuple[str, str]]]:
    """An acyclic graph (edges go from lower to higher rank), written in a shuffled spec order."""
    size = draw(st.integers(min_value=1, max_value=25))
    names = [f"t{rank}" for rank in range(size)]
    pairs = [(i, j) for i in range(size) for j in range(i + 1, size)]
    chosen = draw(st.lists(st.sampled_from(pairs), unique=True, max_size=60)) if pairs else []
    edges = {(names[i], names[j]) for i, j in chosen}
    order = draw(st.permutations(names))
    tasks = [task(name, *sorted(u for u, d in edges if d == name)) for name in order]
    return tasks, edges


@settings(max_examples=150, deadline=None)
@given(random_dags())
def test_topological_order_puts_every_upstream_first(dag_and_edges: Any) -> None:
    tasks, edges = dag_and_edges
    order = list(resolve(tasks).tasks)
    position = {task_id: index for index, task_id in enumerate(order)}
    assert sorted(order) == sorted(t["id"] for t in tasks)
    assert all(position[upstream] < position[downstream] for upstream, downstream in edges)


@settings(max_examples=50, deadline=None)
@given(random_dags(), st.randoms(use_true_random=False))
def test_a_back_edge_is_always_reported_as_a_cycle(dag_and_edges: Any, rnd: random.Random) -> None:
    tasks, edges = dag_and_edges
    if not edges:
        return
    upstream, downstream = rnd.choice(sorted(edges))
    for body in tasks:  # close the loop: the upstream now also waits for the downstream
        if body["id"] == upstream:
            body.setdefault("dependsOn", []).append(downstream)
    errors = errors_of(tasks)
    assert any(e.startswith("cycle: ") and upstream in e and downstream in e for e in errors), errors


# ----------------------------------------------------------------------------- priority weights


def test_priority_weights_follow_the_weight_rules() -> None:
    # a -> b -> d and a -> c -> d: d counts once in a's downstream total, as in Airflow.
    tasks = [
        task("a", priorityWeight=1),
        task("b", "a", priorityWeight=2),
        task("c", "a", priorityWeight=3),
        task("d", "b", "c", priorityWeight=4),
    ]
    assert effective_priority_weights(resolve(tasks)) == {"a": 10, "b": 6, "c": 7, "d": 4}
    assert effective_priority_weights(resolve(tasks, defaultArgs={"weightRule": "upstream"})) == {
        "a": 1, "b": 3, "c": 4, "d": 10,
    }  # fmt: skip
    assert effective_priority_weights(resolve(tasks, defaultArgs={"weightRule": "absolute"})) == {
        "a": 1, "b": 2, "c": 3, "d": 4,
    }  # fmt: skip


@settings(max_examples=50, deadline=None)
@given(random_dags())
def test_downstream_weight_is_one_plus_the_number_of_descendants(dag_and_edges: Any) -> None:
    tasks, _ = dag_and_edges
    dag = resolve(tasks)
    descendants: dict[str, set[str]] = {}
    for task_id in reversed(list(dag.tasks)):
        descendants[task_id] = set().union(*({d, *descendants[d]} for d in dag.tasks[task_id].downstream))
    assert effective_priority_weights(dag) == {t: 1 + len(below) for t, below in descendants.items()}


# ------------------------------------------------------------------------------ operator registry

CLASSPATHS = [
    pytest.param(
        "BashOperator", "zonda.operators.bash.BashOperator", id="a built-in name maps to Zonda's class"
    ),
    pytest.param("DummyOperator", "zonda.operators.empty.EmptyOperator", id="DummyOperator is EmptyOperator"),
    pytest.param("pkg.mod.Class", "pkg.mod.Class", id="a dotted import path is returned as is"),
    pytest.param("pkg.mod:Class", "pkg.mod:Class", id="a colon import path is returned as is"),
]


@pytest.mark.parametrize(("name", "expected"), CLASSPATHS)
def test_operator_classpath(name: str, expected: str) -> None:
    assert operator_registry.operator_classpath(name) == expected


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("Bash", id="a bare unknown name"),
        pytest.param("pkg.", id="a path ending with a dot"),
        pytest.param("pkg:mod:Class", id="a path with two colons"),
        pytest.param("1pkg.Class", id="a path starting with a digit"),
    ],
)
def test_operator_classpath_refuses_names_that_are_neither(name: str) -> None:
    with pytest.raises(operator_registry.UnknownOperator, match=f"unknown operator {name!r}"):
        operator_registry.operator_classpath(name)


def test_operators_decided_without_a_pod_are_built_in() -> None:
    assert all(operator_registry.is_builtin(name) for name in operator_registry.NO_POD_OPERATORS)
    assert all(operator_registry.is_builtin(name) for name in operator_registry.CONTAINER_OPERATORS)
    assert not operator_registry.is_builtin("pkg.mod.Class")


def test_only_the_tasks_on_a_cycle_are_named() -> None:
    errors = errors_of([task("start"), task("a", "start", "b"), task("b", "a"), task("after", "b")])
    assert errors == ["cycle: a -> b -> a"]


def test_two_separate_cycles_are_both_named() -> None:
    errors = errors_of([task("a", "b"), task("b", "a"), task("c", "d"), task("d", "c")])
    assert errors == ["cycle: a -> b -> a", "cycle: c -> d -> c"]


SCHEMA = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 3}}, "required": ["who"]}


def test_a_params_schema_is_valid_and_the_defaults_satisfy_it_except_for_required_params() -> None:
    assert resolve([task("a")], params={"n": 5}, paramsSchema=SCHEMA).spec.params_schema == SCHEMA
    assert errors_of([task("a")], params={"n": 1}, paramsSchema=SCHEMA) == [
        "params defaults do not satisfy paramsSchema: param 'n': 1 is less than the minimum of 3"
    ]
    broken = {"type": "object", "properties": {"n": {"type": "integr"}}}
    [error] = errors_of([task("a")], paramsSchema=broken)
    assert error.startswith("paramsSchema.properties.n.type is not a valid JSON schema: 'integr'")


def test_a_params_schema_error_is_reported_with_the_others() -> None:
    errors = errors_of([task("a", "missing")], params={"n": "x"}, paramsSchema=SCHEMA)
    assert len(errors) == 2 and "param 'n': 'x' is not of type 'integer'" in errors[0], errors


def test_a_scheduled_dag_cannot_require_a_param_without_default_as_in_airflow() -> None:
    assert resolve([task("a")], params={"n": 5}, paramsSchema=SCHEMA, schedule=None)
    [error] = errors_of([task("a")], params={"n": 5}, paramsSchema=SCHEMA, schedule="@daily")
    assert error.startswith("paramsSchema requires 'who' with no default in params: a DAG with a schedule")
    assert resolve([task("a")], params={"n": 5, "who": "ann"}, paramsSchema=SCHEMA, schedule="@daily")
