"""Dynamic task mapping: the count (`zonda.specs.mapping`), the scheduler's expansion and mapped trigger rules
(`decide`), and what each instance receives, against Airflow 2.x's documented behaviour.

Real: the scheduler core and the expansion arithmetic; attempts are reported as the executors would.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.pure_runs import Run, launched, make_dag, started
from zonda.resources import xcom_refs
from zonda.resources.models import ExpandSpec, TaskInstanceState, TriggerRule
from zonda.resources.names import attempt_name
from zonda.specs import mapping

S = TaskInstanceState
REF = xcom_refs.reference


def lengths(**known: int) -> Callable[[str, str], int | None]:
    return lambda task_id, key: known.get(task_id)


def never_loads(path: str) -> Any:
    raise AssertionError(f"no .map() function expected, got {path}")


# ------------------------------------------------------------------------------------ the count


@pytest.mark.parametrize(
    ("expand", "known", "expected"),
    [
        pytest.param(ExpandSpec(kwargs={"x": [1, 2, 3]}), {}, 3, id="a literal list: one per item"),
        pytest.param(ExpandSpec(kwargs={"x": {"a": 1, "b": 2}}), {}, 2, id="a literal dict: one per item"),
        pytest.param(
            ExpandSpec(kwargs={"x": [1, 2], "y": REF("up")}),
            {"up": 3},
            6,
            id="two arguments: the cross product",
        ),
        pytest.param(
            ExpandSpec(kwargs={"x": mapping.zip_source(REF("a"), REF("b"))}),
            {"a": 3, "b": 5},
            3,
            id="zip: as long as the shortest",
        ),
        pytest.param(
            ExpandSpec(kwargs={"x": mapping.zip_source(REF("a"), [1], fill=True)}),
            {"a": 3},
            3,
            id="zip with a fillvalue: as long as the longest",
        ),
        pytest.param(
            ExpandSpec(kwargs={"x": mapping.map_source(REF("a"), "m:f")}),
            {"a": 4},
            4,
            id="map keeps the length",
        ),
        pytest.param(ExpandSpec(kwargs_list=REF("a")), {"a": 7}, 7, id="expand_kwargs: one per dict"),
        pytest.param(ExpandSpec(kwargs={"x": [], "y": [1, 2]}), {}, 0, id="an empty source: nothing"),
    ],
)
def test_expansion_length(expand: ExpandSpec, known: dict[str, int], expected: int) -> None:
    assert mapping.expansion_length(expand, lengths(**known)) == expected


def test_an_upstream_that_pushed_no_list_cannot_be_mapped_over() -> None:
    with pytest.raises(mapping.MappingError, match="task 'up' pushed no list or dict as XCom 'return_value'"):
        mapping.expansion_length(ExpandSpec(kwargs={"x": REF("up")}), lengths())


def test_keys_round_trip() -> None:
    assert mapping.ti_key("group.task", 12) == "group.task[12]"
    assert mapping.split_key("group.task[12]") == ("group.task", 12)
    assert mapping.split_key("task") == ("task", -1)
    assert mapping.ti_key("task") == "task"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=5), min_size=1, max_size=3))
def test_each_instance_gets_one_combination_in_product_order(sizes: list[int]) -> None:
    """Airflow's DictOfListsExpandInput: instance i gets the i-th combination of itertools.product,
    the last argument varying fastest; every combination exactly once."""
    sources = {f"arg{n}": [f"{n}-{i}" for i in range(size)] for n, size in enumerate(sizes)}
    expand = ExpandSpec(kwargs=sources)
    count = mapping.expansion_length(expand, lengths())
    picked = [
        mapping.expanded_arguments(expand, index, lambda t, k: None, never_loads) for index in range(count)
    ]
    expected = [
        dict(zip(sources, combination, strict=True)) for combination in itertools.product(*sources.values())
    ]
    assert picked == expected


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(), max_size=40))
def test_mapping_over_an_xcom_gives_instance_i_item_i(values: list[int]) -> None:
    expand = ExpandSpec(kwargs={"x": REF("up")})
    count = mapping.expansion_length(expand, lengths(up=len(values)))
    assert count == len(values)
    pull = {("up", "return_value"): values}
    picked = [
        mapping.expanded_arguments(expand, i, lambda t, k: pull[t, k], never_loads)["x"] for i in range(count)
    ]
    assert picked == values


def test_zip_map_and_dict_items_as_airflow_gives_them() -> None:
    pulled = {"a": [1, 2, 3], "b": {"k": "v", "l": "w"}}
    expand = ExpandSpec(
        kwargs={
            "pair": mapping.zip_source(REF("a"), ["x", "y"]),
            "item": mapping.map_source(REF("b"), "tests.unit.zonda.passes.test_mapping:upper_pair"),
        }
    )
    load = {"tests.unit.zonda.passes.test_mapping:upper_pair": upper_pair}.__getitem__
    first = mapping.expanded_arguments(expand, 0, lambda t, k: pulled[t], load)
    last = mapping.expanded_arguments(expand, 3, lambda t, k: pulled[t], load)
    assert first == {"pair": (1, "x"), "item": ("K", "V")}  # a dict maps as (key, value) pairs
    assert last == {"pair": (2, "y"), "item": ("L", "W")}


def upper_pair(pair: tuple[str, str]) -> tuple[str, str]:
    return pair[0].upper(), pair[1].upper()


def test_max_map_length_message_names_the_setting() -> None:
    assert mapping.check_length(1024, 1024) is None
    message = mapping.check_length(1025, 1024)
    assert message is not None and "max_map_length=1024" in message and "1025" in message


def test_mapped_attempt_names_keep_the_index_and_stay_dns_labels() -> None:
    name = attempt_name("a" * 60, "very_long_task_name_in_a_group[1023]", 12)
    assert len(name) <= 63 and "-1023-12-" in name
    assert attempt_name("run", "t[1]", 1) != attempt_name("run", "t[11]", 1)


# ------------------------------------------------------------------------------ the scheduler


def mapped_dag(*, trigger_rule: TriggerRule = TriggerRule.ALL_SUCCESS, **mapped: Any) -> Any:
    return make_dag(
        {
            "make": {},
            "work": {"upstream": ["make"], "expand": ExpandSpec(kwargs={"x": REF("make")}), **mapped},
            "reduce": {"upstream": ["work"], "trigger_rule": trigger_rule},
        }
    )


def expanded(values: list[Any], **mapped: Any) -> Run:
    run = started(mapped_dag(**mapped))
    run.step(run.succeeded("make", xcom=values, xcom_lengths={"return_value": len(values)}))
    return run


def test_the_count_is_decided_when_the_upstream_finishes() -> None:
    run = started(mapped_dag())
    assert run.states() == {"make": "queued", "work": "none", "reduce": "none"}
    plan = run.step(run.succeeded("make", xcom=[10, 20, 30], xcom_lengths={"return_value": 3}))
    assert run.states() == {
        "make": "success",
        "work[0]": "queued",
        "work[1]": "queued",
        "work[2]": "queued",
        "reduce": "none",
    }
    assert [(launch.task_id, launch.map_index) for launch in plan.launches] == [
        ("work", 0),
        ("work", 1),
        ("work", 2),
    ]
    assert "TaskExpanded" in [event.reason for event in plan.events]


def test_the_length_comes_from_the_inline_value_when_the_runner_did_not_say() -> None:
    run = started(mapped_dag())
    run.step(run.succeeded("make", xcom=["a", "b"]))
    assert sorted(run.states()) == ["make", "reduce", "work[0]", "work[1]"]


def test_an_empty_expansion_skips_the_mapped_task_and_its_all_success_downstream() -> None:
    run = expanded([])
    assert run.states() == {"make": "success", "work": "skipped", "reduce": "skipped"}


def test_more_than_max_map_length_fails_the_mapped_task_clearly() -> None:
    run = started(mapped_dag())
    plan = run.step(run.succeeded("make", xcom=None, xcom_lengths={"return_value": 1025}))
    assert run.ti("work").state is S.FAILED
    assert "max_map_length=1024" in (run.ti("work").reason or "")
    assert run.states()["reduce"] == "upstream_failed"
    assert not [launch for launch in plan.launches if launch.task_id == "work"]


def test_an_upstream_returning_a_scalar_fails_the_mapped_task() -> None:
    run = started(mapped_dag())
    run.step(run.succeeded("make", xcom=7))
    assert run.ti("work").state is S.FAILED
    assert "pushed no list or dict" in (run.ti("work").reason or "")


def test_a_failed_upstream_leaves_one_upstream_failed_instance() -> None:
    run = started(mapped_dag())
    run.step(run.failed("make"))
    assert run.states() == {"make": "failed", "work": "upstream_failed", "reduce": "upstream_failed"}


def finish(run: Run, outcomes: dict[int, str]) -> None:
    reports = []
    for index, outcome in outcomes.items():
        key = mapping.ti_key("work", index)
        reports.append(run.succeeded(key, xcom=index * 10) if outcome == "success" else run.failed(key))
    run.step(*reports)


def test_the_downstream_waits_for_every_instance() -> None:
    run = expanded([1, 2, 3])
    finish(run, {0: "success", 1: "success"})
    assert run.ti("reduce").state is S.NONE
    assert "'work' (3 mapped)" in (run.ti("reduce").reason or "")  # one short sentence, not 3 ids
    finish(run, {2: "success"})
    assert run.ti("reduce").state is S.QUEUED


@pytest.mark.parametrize(
    ("rule", "outcomes", "expected"),
    [
        pytest.param(
            TriggerRule.ALL_SUCCESS,
            {0: "success", 1: "failed", 2: "success"},
            S.UPSTREAM_FAILED,
            id="all_success: one failed instance fails the downstream",
        ),
        pytest.param(
            TriggerRule.ALL_DONE,
            {0: "success", 1: "failed", 2: "success"},
            S.QUEUED,
            id="all_done: runs once every instance is done",
        ),
        pytest.param(
            TriggerRule.ONE_FAILED,
            {1: "failed"},
            S.QUEUED,
            id="one_failed: fires at the first failed instance",
        ),
        pytest.param(
            TriggerRule.ONE_SUCCESS,
            {2: "success"},
            S.QUEUED,
            id="one_success: fires at the first successful instance",
        ),
        pytest.param(
            TriggerRule.NONE_FAILED,
            {0: "success", 1: "success", 2: "failed"},
            S.UPSTREAM_FAILED,
            id="none_failed: any failed instance",
        ),
    ],
)
def test_mapped_trigger_rules_count_instances(
    rule: TriggerRule, outcomes: dict[int, str], expected: TaskInstanceState
) -> None:
    run = expanded([1, 2, 3], trigger_rule=rule)
    finish(run, outcomes)
    assert run.ti("reduce").state is expected


def test_a_run_with_a_failed_mapped_leaf_fails() -> None:
    dag = make_dag(
        {"make": {}, "work": {"upstream": ["make"], "expand": ExpandSpec(kwargs={"x": REF("make")})}}
    )
    run = started(dag)
    run.step(run.succeeded("make", xcom=[1, 2]))
    finish(run, {0: "success", 1: "failed"})
    assert run.status.state is not None and run.status.state.value == "failed"
    assert "work[1]" in (run.status.message or "")


def test_max_active_tis_per_dagrun_limits_instances_in_flight() -> None:
    run = expanded(list(range(5)), max_active_tis_per_dagrun=2)
    assert [key for key, ti in run.status.task_instances.items() if ti.state is S.QUEUED] == [
        "work[0]",
        "work[1]",
    ]
    assert "max_active_tis_per_dagrun=2" in (run.ti("work[4]").reason or "")
    finish(run, {0: "success"})
    assert run.ti("work[2]").state is S.QUEUED and run.ti("work[3]").state is S.SCHEDULED


def test_a_whole_clear_expands_again_and_keeps_try_numbers() -> None:
    """Airflow's `_revise_map_indexes_if_mapped`: new indexes are added, the ones beyond are removed."""
    run = expanded([1, 2, 3])
    finish(run, {0: "success", 1: "success", 2: "success"})
    cleared = {
        key: ti.model_copy(update={"state": S.NONE})
        for key, ti in run.status.task_instances.items()
        if key != "reduce"
    }
    run.status = run.status.model_copy(update={"task_instances": {**run.status.task_instances, **cleared}})
    run.step()
    run.step(run.succeeded("make", xcom=[1, 2]))
    assert run.ti("work[2]").state is S.REMOVED
    assert run.ti("work[0]").state is S.QUEUED and run.ti("work[0]").try_number == 2
    finish(run, {0: "success", 1: "success"})
    assert run.ti("reduce").state is S.QUEUED  # the removed instance does not hold the downstream


def test_mapping_over_a_mapped_task_counts_its_results() -> None:
    dag = make_dag(
        {
            "make": {},
            "first": {"upstream": ["make"], "expand": ExpandSpec(kwargs={"x": REF("make")})},
            "second": {"upstream": ["first"], "expand": ExpandSpec(kwargs={"y": REF("first")})},
        }
    )
    run = started(dag)
    run.step(run.succeeded("make", xcom=[1, 2, 3, 4]))
    run.step(*(run.succeeded(f"first[{index}]", xcom=index) for index in range(4)))
    assert launched(run.plans[-1]) == ["second"] * 4


def test_a_second_pass_changes_nothing() -> None:
    run = expanded([1, 2, 3])
    before = run.status
    plan = run.step()
    assert plan.status == before and not plan.launches


def test_zonda_clear_of_a_mapped_task_clears_every_instance_and_it_expands_again() -> None:
    from zonda.actions import clear_and_mark

    run = expanded([1, 2, 3])
    finish(run, {0: "success", 1: "failed", 2: "success"})
    result = clear_and_mark.clear(run.dag, run.status, task_ids=["work"], now=run.now, who="test")
    assert {key: ti.state for key, ti in result.status.task_instances.items() if key.startswith("work")} == {
        "work[0]": S.NONE,
        "work[1]": S.NONE,
        "work[2]": S.NONE,
    }
    run.status = result.status
    run.step()
    assert [run.ti(f"work[{i}]").try_number for i in range(3)] == [2, 2, 2]
    only_failed = clear_and_mark.clear(
        run.dag, run.status, task_ids=["work"], now=run.now, who="test", only_failed=True
    )
    assert not only_failed.changed  # nothing failed now: the instances are queued again


@settings(max_examples=40, deadline=None)
@given(st.lists(st.booleans(), max_size=40), st.sampled_from([TriggerRule.ALL_SUCCESS, TriggerRule.ALL_DONE]))
def test_any_expansion_gives_indexes_0_to_n_launched_in_order_and_settles(
    outcomes: list[bool], rule: TriggerRule
) -> None:
    """Whatever the length and the instances' outcomes: keys work[0..n-1], launched in map-index order,
    and the downstream settles as its trigger rule says over the instances (an empty list skips)."""
    run = started(mapped_dag(trigger_rule=rule))
    plan = run.step(run.succeeded("make", xcom=list(range(len(outcomes)))))
    keys = [key for key in run.status.task_instances if key.startswith("work")]
    if not outcomes:
        assert keys == ["work"] and run.ti("work").state is S.SKIPPED
        assert run.ti("reduce").state is (S.SKIPPED if rule is TriggerRule.ALL_SUCCESS else S.QUEUED)
        return
    assert keys == [f"work[{index}]" for index in range(len(outcomes))]
    assert [launch.map_index for launch in plan.launches] == list(range(min(len(outcomes), 16)))
    while queued := [key for key in keys if run.ti(key).state is S.QUEUED]:
        run.step(
            *(
                run.succeeded(key) if outcomes[mapping.split_key(key)[1]] else run.failed(key)
                for key in queued
            )
        )
    expected = S.QUEUED if all(outcomes) or rule is TriggerRule.ALL_DONE else S.UPSTREAM_FAILED
    assert run.ti("reduce").state is expected


def test_depends_on_past_waits_for_the_previous_runs_same_map_index() -> None:
    """Airflow's PrevDagrunDep for a mapped instance looks at the previous run's instance of its index."""
    previous = {"make": S.SUCCESS, "work[0]": S.SUCCESS, "work[1]": S.FAILED, "reduce": S.SUCCESS}
    run = started(
        mapped_dag(depends_on_past=True),
    )
    run.step(run.succeeded("make", xcom=[1, 2, 3]), previous_run_states=previous)
    assert run.ti("work[0]").state is S.QUEUED and run.ti("work[2]").state is S.QUEUED  # no past for [2]
    assert run.ti("work[1]").state is S.NONE
    assert "previous task instance is in the state 'failed'" in (run.ti("work[1]").reason or "")
    plan = run.step(previous_run_states=previous)
    assert "TaskExpanded" not in [event.reason for event in plan.events] and not plan.launches


def test_a_mapped_kubernetes_pod_operator_gets_its_arguments_from_the_controller() -> None:
    import dataclasses

    from zonda.passes import plans
    from zonda.resources.dagrun_models import DagRunStatus, TaskInstanceStatus

    kpo = make_dag({
        "make": {},
        "pod": {"upstream": ["make"], "operator": "KubernetesPodOperator",
                "expand": ExpandSpec(kwargs={"arguments": REF("make")})},
    }).tasks["pod"]  # fmt: skip
    kpo = dataclasses.replace(kpo, args={"image": "busybox"})
    done = TaskInstanceStatus(state=S.SUCCESS, xcom=[["echo", "a"], ["echo", "b"]])
    status = DagRunStatus(task_instances={"make": done})
    assert plans.mapped_container_args(kpo, 1, status) == {"image": "busybox", "arguments": ["echo", "b"]}
    stored = DagRunStatus(task_instances={"make": done.model_copy(update={"xcom": {
        "__zonda_xcom_stored__": {"url": "file:///x", "bytes": 5000}}})})  # fmt: skip
    with pytest.raises(mapping.MappingError, match="XCom backend"):
        plans.mapped_container_args(kpo, 0, stored)
