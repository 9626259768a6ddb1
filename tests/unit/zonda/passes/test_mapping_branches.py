"""Branches, short-circuits and their re-skip on clear decide per map index (Airflow 2's
`SkipMixin.skip_all_except`, which skips ``dag_run.get_task_instance(task_id, map_index=ti.map_index)``,
and `NotPreviouslySkippedDep` reading the same index's decision).

The scheduler's pass (`decide()`) is real, driven pass by pass with reports built by hand; the last
test runs a Python DAG end to end in-process (`dag.test()`: `decide()` and the task runner, real).
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.devtools import dag_runs
from tests.unit.pure_runs import Run, make_dag, started
from zonda.actions import clear_and_mark
from zonda.passes import skips
from zonda.resources import xcom_refs
from zonda.resources.models import DagRunState, ExpandSpec, TaskInstanceState, TriggerRule
from zonda.specs import mapped_groups

S = TaskInstanceState
TR = TriggerRule
EXPAND = ExpandSpec(kwargs={"x": xcom_refs.reference("make")}, into=mapped_groups.GROUP_INTO)


def group_dag(*, join_rule: TriggerRule = TR.NONE_FAILED_MIN_ONE_SUCCESS, after_rule: TriggerRule) -> Any:
    """make >> g(branch >> [a, b] >> join) >> after, the group mapped over make's list."""
    inside = {
        "g.branch": [],
        "g.a": ["g.branch"],
        "g.b": ["g.branch"],
        "g.join": ["g.a", "g.b"],
    }
    tasks: dict[str, dict[str, Any]] = {"make": {}}
    for task_id, upstream in inside.items():
        tasks[task_id] = {
            "upstream": upstream or ["make"],
            "expand": EXPAND,
            "mapped_group": "g",
            "map_peers": frozenset(inside) - {task_id},
        }
    tasks["g.join"]["trigger_rule"] = join_rule
    tasks["after"] = {"upstream": ["g.join"], "trigger_rule": after_rule}
    return make_dag(tasks)


def expanded(size: int, after_rule: TriggerRule = TR.ALL_SUCCESS) -> Run:
    run = started(group_dag(after_rule=after_rule))
    run.step(run.succeeded("make", xcom=list(range(size)), xcom_lengths={"return_value": size}))
    return run


def group_states(run: Run, *task_ids: str) -> dict[str, str]:
    return {key: state for key, state in run.states().items() if key.split("[")[0] in task_ids}


# ------------------------------------------------------------------------------ the pure decision


@pytest.mark.parametrize(
    ("decider", "expected"),
    [
        pytest.param("g.branch[1]", ["g.a[1]"], id="a mapped instance skips the same index only"),
        pytest.param("branch", ["g.a[0]", "g.a[1]", "g.a[2]"], id="an unmapped decider skips every index"),
        pytest.param("g.branch[3]", [], id="an index the downstream does not have skips nothing"),
    ],
)
def test_a_decision_skips_the_instances_with_its_own_map_index(decider: str, expected: list[str]) -> None:
    instances = {"g.a": ["g.a[0]", "g.a[1]", "g.a[2]"]}
    assert skips.instances_to_skip(decider, ["g.a"], instances.__getitem__) == expected


def test_a_mapped_decider_never_skips_an_unmapped_task_or_an_unexpanded_one() -> None:
    """Airflow's `get_task_instance(task_id, map_index=ti.map_index)` finds no such instance."""
    instances = {"after": ["after"], "later": ["later"]}
    assert skips.instances_to_skip("g.branch[0]", ["after", "later"], instances.__getitem__) == []


@pytest.mark.parametrize(
    ("upstream", "key", "known", "expected"),
    [
        pytest.param("g.branch", "g.a[1]", {"g.branch[0]", "g.branch[1]"}, "g.branch[1]", id="same index"),
        pytest.param("branch", "g.a[1]", {"branch"}, "branch", id="unmapped parent"),
        pytest.param("g.branch", "g.a", {"g.branch[0]"}, None, id="unexpanded task"),
        pytest.param("g.branch", "g.a[5]", {"g.branch[0]"}, None, id="no such index"),
    ],
)
def test_the_deciding_parent_instance_is_the_one_with_the_same_map_index(
    upstream: str, key: str, known: set[str], expected: str | None
) -> None:
    assert skips.deciding_instance(upstream, key, known) == expected


# ------------------------------------------------------------------------- branches in a mapped group


def test_each_index_of_a_mapped_group_follows_its_own_branch() -> None:
    run = expanded(3)
    run.step(run.running("g.branch[0]"), run.running("g.branch[1]"), run.running("g.branch[2]"))
    run.step(
        run.succeeded("g.branch[0]", follow_task_ids=["g.a"]),
        run.succeeded("g.branch[1]", follow_task_ids=["g.b"]),
    )
    assert group_states(run, "g.a", "g.b") == {
        "g.a[0]": "queued",
        "g.a[1]": "skipped",
        "g.a[2]": "none",  # its branch is still running
        "g.b[0]": "skipped",
        "g.b[1]": "queued",
        "g.b[2]": "none",
    }
    assert "Branch g.branch[1] followed ['g.a']" not in (run.ti("g.a[1]").reason or "")
    assert "Branch g.branch[1] followed ['g.b']" in (run.ti("g.a[1]").reason or "")
    run.step(run.succeeded("g.branch[2]", follow_task_ids=["g.a", "g.b"]))
    assert group_states(run, "g.a", "g.b")["g.a[2]"] == group_states(run, "g.b")["g.b[2]"] == "queued"
    run.finish_all()
    assert set(group_states(run, "g.join").values()) == {"success"}
    assert run.states()["after"] == "success" and run.status.state is DagRunState.SUCCESS


def test_a_branch_following_nothing_at_one_index_skips_that_index_through_the_group() -> None:
    run = expanded(2)
    run.step(
        run.succeeded("g.branch[0]", follow_task_ids=[]),
        run.succeeded("g.branch[1]", follow_task_ids=["g.a"]),
    )
    run.finish_all()
    assert group_states(run, "g.a", "g.b", "g.join") == {
        "g.a[0]": "skipped",
        "g.a[1]": "success",
        "g.b[0]": "skipped",
        "g.b[1]": "skipped",
        "g.join[0]": "skipped",  # none_failed_min_one_success: nothing succeeded at index 0
        "g.join[1]": "success",
    }
    # outside the group, all_success counts every instance: one skipped index skips it
    assert run.states()["after"] == "skipped"


def test_a_short_circuit_at_one_index_skips_that_indexs_downstream_only() -> None:
    """ShortCircuitOperator (ignore_downstream_trigger_rules): every task downstream at its index; a
    task outside the group has no instance at that index, so its own trigger rule decides."""
    run = expanded(2, after_rule=TR.ALL_DONE)
    run.step(
        run.succeeded("g.branch[0]", skip_all_downstream=True),
        run.succeeded("g.branch[1]"),
    )
    assert group_states(run, "g.a", "g.b", "g.join") == {
        "g.a[0]": "skipped",
        "g.a[1]": "queued",
        "g.b[0]": "skipped",
        "g.b[1]": "queued",
        "g.join[0]": "skipped",
        "g.join[1]": "none",
    }
    assert "short-circuited" in (run.ti("g.join[0]").reason or "")
    run.finish_all()
    assert run.states()["after"] == "success"  # all_done: not skipped by index 0's short-circuit


def test_an_unmapped_branch_before_a_mapped_group_decides_for_every_index() -> None:
    dag = make_dag(
        {
            "branch": {},
            "make": {"upstream": ["branch"]},
            "other": {"upstream": ["branch"]},
            "g.work": {"upstream": ["make"], "expand": EXPAND, "mapped_group": "g", "map_peers": frozenset()},
        }
    )
    run = started(dag)
    run.step(run.succeeded("branch", follow_task_ids=["other"]))
    assert run.states() == {"branch": "success", "make": "skipped", "other": "queued", "g.work": "skipped"}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    choices=st.lists(st.sets(st.sampled_from(["g.a", "g.b"])), min_size=1, max_size=5),
    order=st.randoms(use_true_random=False),
)
def test_each_index_follows_exactly_its_own_choice_whatever_the_order(
    choices: list[set[str]], order: Any
) -> None:
    """Property: whatever each index chooses and in whatever order the branches finish (several per
    pass), a[i] and b[i] run exactly when branch i chose them."""
    run = expanded(len(choices))
    pending = list(range(len(choices)))
    order.shuffle(pending)
    while pending:
        batch = pending[: order.randint(1, len(pending))]
        pending = pending[len(batch) :]
        run.step(*(run.succeeded(f"g.branch[{i}]", follow_task_ids=sorted(choices[i])) for i in batch))
    run.finish_all()
    for index, chosen in enumerate(choices):
        for task_id in ("g.a", "g.b"):
            expected = "success" if task_id in chosen else "skipped"
            assert run.states()[f"{task_id}[{index}]"] == expected, (index, chosen)


# ----------------------------------------------------------------------------- the re-skip on clear


def test_a_cleared_group_is_skipped_again_per_index_while_each_branch_stands() -> None:
    """Airflow's NotPreviouslySkippedDep with the same index's decision; clearing the branch lets
    each index decide again."""
    run = expanded(2)
    run.step(
        run.succeeded("g.branch[0]", follow_task_ids=["g.a"]),
        run.succeeded("g.branch[1]", follow_task_ids=["g.b"]),
    )
    run.finish_all()
    run.status = clear_and_mark.clear(run.dag, run.status, task_ids=["g.a", "g.b"], now=run.now).status
    run.step(after=timedelta(seconds=1))
    assert group_states(run, "g.a", "g.b") == {
        "g.a[0]": "queued",
        "g.a[1]": "skipped",
        "g.b[0]": "skipped",
        "g.b[1]": "queued",
    }
    assert "previous XCom result from parent task g.branch[1]" in (run.ti("g.a[1]").reason or "")
    run.finish_all()
    assert run.status.state is DagRunState.SUCCESS
    cleared = clear_and_mark.clear(run.dag, run.status, task_ids=["g.branch"], downstream=True, now=run.now)
    run.status = cleared.status
    run.step(after=timedelta(seconds=1))
    run.step(
        run.succeeded("g.branch[0]", follow_task_ids=["g.b"]),
        run.succeeded("g.branch[1]", follow_task_ids=["g.b"]),
    )
    assert group_states(run, "g.a", "g.b") == {
        "g.a[0]": "skipped",
        "g.a[1]": "skipped",
        "g.b[0]": "queued",
        "g.b[1]": "queued",
    }


def test_a_short_circuits_direct_downstream_is_skipped_again_on_clear() -> None:
    """Airflow's ShortCircuitOperator records what it skipped; its direct downstream stays skipped."""
    run = expanded(2)
    run.step(run.succeeded("g.branch[0]", skip_all_downstream=True), run.succeeded("g.branch[1]"))
    run.finish_all()
    run.status = clear_and_mark.clear(run.dag, run.status, task_ids=["g.a"], now=run.now).status
    run.step(after=timedelta(seconds=1))
    assert group_states(run, "g.a") == {"g.a[0]": "skipped", "g.a[1]": "queued"}
    assert "previous XCom result from parent task g.branch[0]" in (run.ti("g.a[0]").reason or "")


def test_the_re_skip_waits_for_the_past_when_asked() -> None:
    """wait_for_past_depends_before_skipping: Airflow waits for depends_on_past before the re-skip."""
    dag = group_dag(after_rule=TR.ALL_SUCCESS)
    for task_id in ("g.a", "g.b"):
        dag.tasks[task_id] = dataclasses.replace(
            dag.tasks[task_id], depends_on_past=True, wait_for_past_depends_before_skipping=True
        )
    past = {"previous_run_states": {"g.a[0]": S.FAILED}}
    run = started(dag)
    run.step(run.succeeded("make", xcom=[1, 2], xcom_lengths={"return_value": 2}), **past)
    run.step(
        run.succeeded("g.branch[0]", follow_task_ids=["g.b"]),
        run.succeeded("g.branch[1]", follow_task_ids=["g.b"]),
        **past,
    )
    assert group_states(run, "g.a") == {"g.a[0]": "skipped", "g.a[1]": "skipped"}  # the branch skips at once
    run.status = clear_and_mark.clear(run.dag, run.status, task_ids=["g.a"], now=run.now).status
    run.step(after=timedelta(seconds=1), **past)
    assert group_states(run, "g.a") == {"g.a[0]": "none", "g.a[1]": "skipped"}
    assert "past depends are not met" in (run.ti("g.a[0]").reason or "")


# ------------------------------------------------------------------------------ end to end, in-process


def test_a_python_dag_branches_per_index_inside_a_mapped_group(tmp_path: Path) -> None:
    (tmp_path / "branches.py").write_text("""
from zonda import DAG
from zonda.decorators import task, task_group

with DAG("mapped_branches") as dag:
    @task
    def make():
        return [1, 2, 3, 4]

    @task_group
    def per_number(number):
        @task.branch
        def choose(n):
            return "per_number.even" if n % 2 == 0 else "per_number.odd"

        @task
        def even(n):
            return f"{n} is even"

        @task
        def odd(n):
            return f"{n} is odd"

        @task.short_circuit(trigger_rule="none_failed_min_one_success")
        def big(n):
            return n > 1

        @task(trigger_rule="none_failed_min_one_success")
        def report(n):
            return n

        choice = choose(number)
        choice >> [even(number), odd(number)] >> big(number) >> report(number)

    per_number.expand(number=make())
""")
    outcome = dag_runs.test_file(tmp_path / "branches.py")
    states = outcome.task_states
    assert [states[f"per_number.even[{i}]"] for i in range(4)] == ["skipped", "success", "skipped", "success"]
    assert [states[f"per_number.odd[{i}]"] for i in range(4)] == ["success", "skipped", "success", "skipped"]
    assert [outcome.xcoms.get(f"per_number.odd[{i}]") for i in (0, 2)] == ["1 is odd", "3 is odd"]
    reports = [states[f"per_number.report[{i}]"] for i in range(4)]
    assert reports == ["skipped", "success", "success", "success"]  # big[0] short-circuited index 0
    assert outcome.state == "success"


def test_a_latest_only_inside_a_mapped_group_decides_for_its_own_index() -> None:
    """LatestOnlyOperator runs without a try; inside a mapped group each instance records its own
    decision (a scheduled run outside the latest interval skips the same index's downstream)."""
    dag = make_dag(
        {
            "make": {},
            "g.latest": {
                "upstream": ["make"],
                "operator": "LatestOnlyOperator",
                "expand": EXPAND,
                "mapped_group": "g",
                "map_peers": frozenset({"g.work"}),
            },
            "g.work": {
                "upstream": ["g.latest"],
                "expand": EXPAND,
                "mapped_group": "g",
                "map_peers": frozenset({"g.latest"}),
            },
        }
    )
    run = started(dag)
    window = {"latest_window": (run.now, run.now + timedelta(days=1))}  # this run is not the latest
    run.step(
        run.succeeded("make", xcom=[1, 2], xcom_lengths={"return_value": 2}),
        after=timedelta(days=9),
        **window,
    )
    assert run.states() == {
        "make": "success",
        "g.latest[0]": "success",
        "g.latest[1]": "success",
        "g.work[0]": "skipped",
        "g.work[1]": "skipped",
    }
    assert run.ti("g.latest[1]").follow_task_ids == []


def test_a_branch_in_a_mapped_group_may_follow_a_plain_group_nested_in_it() -> None:
    """A branch returning a TaskGroup id follows the group's roots, here at its own index only."""
    inside = {"g.branch": [], "g.inner.a": ["g.branch"], "g.inner.b": ["g.inner.a"], "g.other": ["g.branch"]}
    tasks: dict[str, dict[str, Any]] = {"make": {}}
    for task_id, upstream in inside.items():
        tasks[task_id] = {
            "upstream": upstream or ["make"],
            "expand": EXPAND,
            "mapped_group": "g",
            "map_peers": frozenset(inside) - {task_id},
            "group": task_id.rsplit(".", 1)[0],
        }
    run = started(make_dag(tasks))
    run.step(run.succeeded("make", xcom=[1, 2], xcom_lengths={"return_value": 2}))
    run.step(
        run.succeeded("g.branch[0]", follow_task_ids=["g.inner"]),
        run.succeeded("g.branch[1]", follow_task_ids=["g.other"]),
    )
    assert run.ti("g.branch[0]").follow_task_ids == ["g.inner.a"]
    assert group_states(run, "g.inner.a", "g.other") == {
        "g.inner.a[0]": "queued",
        "g.inner.a[1]": "skipped",
        "g.other[0]": "skipped",
        "g.other[1]": "queued",
    }
    run.finish_all()
    assert group_states(run, "g.inner.b") == {"g.inner.b[0]": "success", "g.inner.b[1]": "skipped"}


def test_a_mapped_branch_binds_the_same_index_of_a_mapped_task_expanded_after_it() -> None:
    """`choose.expand(...) >> work.expand(...)`: work expands once every choose[i] finished, and
    work[i] is skipped when choose[i] did not follow it (NotPreviouslySkippedDep at the same index)."""
    dag = make_dag(
        {
            "choose": {"expand": ExpandSpec(kwargs={"n": [0, 1, 2]})},
            "work": {"upstream": ["choose"], "expand": ExpandSpec(kwargs={"n": [0, 1, 2]})},
            "other": {"upstream": ["choose"]},
        }
    )
    run = started(dag)
    run.step(
        run.succeeded("choose[0]", follow_task_ids=["work"]),
        run.succeeded("choose[1]", follow_task_ids=["other"]),
        run.succeeded("choose[2]", follow_task_ids=["work", "other"]),
    )
    assert group_states(run, "work", "other") == {
        "work[0]": "queued",
        "work[1]": "skipped",
        "work[2]": "queued",
        "other": "queued",  # unmapped: no instance at a mapped branch's index, its trigger rule decides
    }
    assert "parent task choose[1]" in (run.ti("work[1]").reason or "")
