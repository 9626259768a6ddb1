"""DAG dependencies, the pure half: triggered runs' names and links, ExternalTaskSensor's verdict,
ExternalTaskMarker, and the clear that follows markers into other DAGs' runs (`zonda.actions.clear_and_mark`).

Nothing here talks to an API: the runs are DagRun bodies and statuses built in memory. The operators
that read and write the API are proven on a real apiserver in tests/cluster/test_dag_dependencies.py.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from zonda.actions import clear_and_mark
from zonda.actions.across_dags import RunClear, RunView, plan_clear_across_dags
from zonda.resources import names, wire
from zonda.resources.dagrun_models import DagRunSpec, DagRunStatus, TaskInstanceStatus
from zonda.resources.models import DagRunState, TaskInstanceState
from zonda.schedules import dag_dependencies
from zonda.schedules.dag_dependencies import ExternalRun, ExternalWait, Parent, Verdict, external_verdict
from zonda.sensors.external_task import ExternalTaskMarker

DAY = datetime(2026, 3, 1, tzinfo=UTC)
NOW = datetime(2026, 3, 2, 12, tzinfo=UTC)

# ------------------------------------------------------------------------------------ triggering


def test_a_triggered_run_name_is_the_same_for_every_try_and_distinct_per_task_and_parent() -> None:
    name = names.triggered_run_name("child", "parent-manual-20260301t000000z", "trigger")
    assert name == names.triggered_run_name("child", "parent-manual-20260301t000000z", "trigger")
    assert name != names.triggered_run_name("child", "parent-manual-20260301t000000z", "trigger_2")
    assert name != names.triggered_run_name("child", "parent-manual-20260302t000000z", "trigger")
    long = names.triggered_run_name("c" * 200, "p" * 200, "t" * 200)
    assert len(long) <= 63 and wire.label_value(long) == long


def test_a_triggered_run_links_back_to_its_parent_through_labels_and_annotations() -> None:
    parent = Parent(dag_name="parent", run_name="parent-manual-20260301t000000z", task_id="group.trigger")
    body = dag_dependencies.triggered_dagrun(
        name="child-x", namespace="ns", dag_name="child", logical_date=DAY, conf={"a": 1}, parent=parent
    )
    labels = body["metadata"]["labels"]
    assert labels[wire.LABEL_TRIGGERED_BY_RUN] == "parent-manual-20260301t000000z"
    assert labels[wire.LABEL_TRIGGERED_BY_DAG] == "parent"
    assert labels[wire.LABEL_RUN_TYPE] == "manual", "Airflow's TriggerDagRunOperator makes manual runs"
    assert body["spec"] == {"dagName": "child", "runType": "manual", "logicalDate": "2026-03-01T00:00:00Z",
                            "conf": {"a": 1}}  # fmt: skip
    assert dag_dependencies.parent_of(body) == parent
    assert dag_dependencies.parent_of({"metadata": {"name": "x"}}) is None


def test_an_airflow_dag_id_means_the_dag_resource_it_renders_to() -> None:
    assert dag_dependencies.external_dag_name("example_child") == "example-child"
    assert dag_dependencies.external_dag_name("example-child") == "example-child"
    with pytest.raises(dag_dependencies.DagDependencyError):
        dag_dependencies.external_dag_name("___")


def test_states_must_be_known_and_in_one_list_only() -> None:
    valid = dag_dependencies.TASK_STATES
    dag_dependencies.check_states(["success"], ["failed"], skipped=["skipped"], valid=valid)
    with pytest.raises(dag_dependencies.DagDependencyError, match="Duplicate values"):
        dag_dependencies.check_states(["success"], ["success"], valid=valid)
    with pytest.raises(dag_dependencies.DagDependencyError, match="Valid values"):
        dag_dependencies.check_states(["succeeded"], [], valid=valid)
    with pytest.raises(dag_dependencies.DagDependencyError, match="Valid values"):
        dag_dependencies.check_states(["upstream_failed"], [], valid=dag_dependencies.RUN_STATES)


# --------------------------------------------------------------------------------------- waiting


def external(name: str, day: datetime, state: str | None = "running", **tasks: str) -> ExternalRun:
    return ExternalRun(name=name, dag_name="parent", logical_date=day, state=state, task_states=tasks)


def wait(**changes: Any) -> ExternalWait:
    return ExternalWait(**{"dag_name": "parent", "logical_dates": (DAY,), "task_ids": ("load",), **changes})


VERDICTS = {
    "the external task succeeded at the same logical date": (
        wait(),
        [external("p1", DAY, load="success")],
        Verdict.SUCCESS,
    ),
    "the external task is still running": (wait(), [external("p1", DAY, load="running")], Verdict.WAITING),
    "there is no external run yet": (wait(), [], Verdict.WAITING),
    "only a run of another logical date succeeded": (
        wait(),
        [external("p0", DAY - timedelta(days=1), load="success")],
        Verdict.WAITING,
    ),
    "a run of another DAG has the task": (
        wait(dag_name="other"),
        [external("p1", DAY, load="success")],
        Verdict.WAITING,
    ),
    "the external task failed and failed_states names it": (
        wait(failed_states=("failed",)),
        [external("p1", DAY, load="failed")],
        Verdict.FAILED,
    ),
    "the external task failed but only success is awaited (Airflow waits until timeout)": (
        wait(),
        [external("p1", DAY, load="failed")],
        Verdict.WAITING,
    ),
    "the external task was skipped and skipped_states names it": (
        wait(skipped_states=("skipped",)),
        [external("p1", DAY, load="skipped")],
        Verdict.SKIPPED,
    ),
    "one of two tasks failed while the other succeeded: failure wins": (
        wait(task_ids=("load", "report"), failed_states=("failed",)),
        [external("p1", DAY, load="success", report="failed")],
        Verdict.FAILED,
    ),
    "one of two tasks is not done yet": (
        wait(task_ids=("load", "report")),
        [external("p1", DAY, load="success", report="queued")],
        Verdict.WAITING,
    ),
    "every task of the group succeeded": (
        wait(task_ids=None, task_group_id="g"),
        [external("p1", DAY, **{"g.a": "success", "g.b": "success", "other": "failed"})],
        Verdict.SUCCESS,
    ),
    "one task of the group is running": (
        wait(task_ids=None, task_group_id="g"),
        [external("p1", DAY, **{"g.a": "success", "g.b": "running"})],
        Verdict.WAITING,
    ),
    "the whole external run succeeded (no task ids)": (
        wait(task_ids=None),
        [external("p1", DAY, state="success")],
        Verdict.SUCCESS,
    ),
    "the whole external run failed and failed_states names it": (
        wait(task_ids=None, failed_states=("failed",)),
        [external("p1", DAY, state="failed")],
        Verdict.FAILED,
    ),
    "two logical dates, only one done": (
        wait(logical_dates=(DAY, DAY + timedelta(days=1))),
        [external("p1", DAY, load="success"), external("p2", DAY + timedelta(days=1), load="running")],
        Verdict.WAITING,
    ),
    "two logical dates, both done": (
        wait(logical_dates=(DAY, DAY + timedelta(days=1))),
        [external("p1", DAY, load="success"), external("p2", DAY + timedelta(days=1), load="success")],
        Verdict.SUCCESS,
    ),
}


@pytest.mark.parametrize(("waiting", "runs", "expected"), VERDICTS.values(), ids=VERDICTS.keys())
def test_the_external_task_sensor_counts_as_airflow_does(
    waiting: ExternalWait, runs: list[ExternalRun], expected: Verdict
) -> None:
    verdict, message = external_verdict(waiting, runs)
    assert verdict is expected, message
    assert f"DAG {waiting.dag_name}" in message


def test_an_external_run_is_read_from_its_body_with_the_logical_date_it_started_with() -> None:
    body = {
        "metadata": {"name": "p1"},
        "spec": {"dagName": "parent", "logicalDate": "2026-03-01T00:00:00+00:00"},
        "status": {"state": "running", "taskInstances": {"load": {"state": "success"}, "x": {}}},
    }
    run = ExternalRun.from_body(body)
    assert (run.dag_name, run.logical_date, run.state) == ("parent", DAY, "running")
    assert run.task_states == {"load": "success", "x": "none"}
    scheduled = {
        "metadata": {"name": "p2"},
        "spec": {"dagName": "parent"},
        "status": {"logicalDate": "2026-03-01T00:00:00Z"},
    }
    assert ExternalRun.from_body(scheduled).logical_date == DAY


# ------------------------------------------------------------------------------ ExternalTaskMarker


def test_an_external_task_marker_checks_its_arguments_as_airflow_does() -> None:
    marker = ExternalTaskMarker(task_id="m", external_dag_id="child", external_task_id="wait")
    assert (marker.execution_date, marker.recursion_depth) == ("{{ logical_date.isoformat() }}", 10)
    assert (
        ExternalTaskMarker(
            task_id="m", external_dag_id="c", external_task_id="t", execution_date=DAY
        ).execution_date
        == DAY.isoformat()
    )
    with pytest.raises(ValueError, match="recursion_depth"):
        ExternalTaskMarker(task_id="m", external_dag_id="c", external_task_id="t", recursion_depth=0)


# ------------------------------------------------------------------------------ clear across DAGs


def finished_run(
    name: str, dag_name: str, tasks: dict[str, dict[str, Any]], day: datetime = DAY, **states: str
) -> RunView:
    """A finished run of a DAG whose tasks are `{id: {"operator", "args", "dependsOn"}}`."""
    dag_spec = {"schedule": None, "tasks": [{"id": task_id, **task} for task_id, task in tasks.items()]}
    return RunView(
        name=name,
        spec=DagRunSpec(dag_name=dag_name, logical_date=day),
        status=DagRunStatus(
            state=DagRunState.SUCCESS,
            logical_date=day,
            data_interval_start=day,
            data_interval_end=day,
            dag_spec=dag_spec,
            task_instances={
                task_id: TaskInstanceStatus(
                    state=TaskInstanceState(states.get(task_id, "success")), try_number=1, max_tries=0
                )
                for task_id in tasks
            },
        ),
    )


def marker(external_dag: str, external_task: str, **args: Any) -> dict[str, Any]:
    return {
        "operator": "ExternalTaskMarker",
        "args": {"external_dag_id": external_dag, "external_task_id": external_task, **args},
    }


EMPTY = {"operator": "EmptyOperator"}
SENSOR = {"operator": "ExternalTaskSensor", "args": {"external_dag_id": "parent", "external_task_id": "mark"}}


def parent_run(day: datetime = DAY, **marker_args: Any) -> RunView:
    return finished_run(
        f"parent-{day:%d}",
        "parent",
        {"start": EMPTY, "mark": {**marker("child_dag", "wait", **marker_args), "dependsOn": ["start"]}},
        day,
    )


def child_run(day: datetime = DAY, name: str | None = None) -> RunView:
    return finished_run(
        name or f"child-{day:%d}",
        "child-dag",
        {"before": EMPTY, "wait": SENSOR, "after": {**EMPTY, "dependsOn": ["wait"]}},
        day,
    )


def test_clearing_a_marker_clears_the_external_task_and_its_downstream_in_the_run_of_that_date() -> None:
    parent, child, other_day = parent_run(), child_run(), child_run(DAY + timedelta(days=1))
    first = RunClear(parent.name, ("start",), downstream=True)
    plan = plan_clear_across_dags(parent, [parent, child, other_day], first, now=NOW)
    assert plan == [
        first,
        RunClear(child.name, ("wait",), downstream=True, via=f"{parent.name}/mark"),
    ]
    dag = clear_and_mark.dag_of_run(child.spec.dag_name, child.status)
    result = plan[1].apply(dag, child.status, now=NOW, who="a user")
    assert result.changed == ("wait", "after"), "the external task and its downstream, not `before`"
    assert "through ExternalTaskMarker parent-01/mark" in result.events[0].message


def test_a_templated_execution_date_picks_the_external_run() -> None:
    parent = parent_run(execution_date="{{ (logical_date - macros.timedelta(days=1)).isoformat() }}")
    yesterday, today = child_run(DAY - timedelta(days=1)), child_run(DAY)
    plan = plan_clear_across_dags(parent, [yesterday, today], RunClear(parent.name, None), now=NOW)
    assert [part.run_name for part in plan] == [parent.name, yesterday.name]


def test_no_external_run_at_that_date_means_only_the_own_run_is_cleared() -> None:
    parent = parent_run()
    plan = plan_clear_across_dags(
        parent, [child_run(DAY + timedelta(days=3))], RunClear(parent.name, None), now=NOW
    )
    assert [part.run_name for part in plan] == [parent.name]


def test_a_marker_that_is_not_cleared_is_not_followed() -> None:
    parent = parent_run()
    plan = plan_clear_across_dags(parent, [child_run()], RunClear(parent.name, ("start",)), now=NOW)
    assert [part.run_name for part in plan] == [parent.name], "mark is downstream of start, not cleared"


def chain_of_runs(length: int, recursion_depth: int) -> list[RunView]:
    """d0.mark -> d1.mark -> ... -> d<length>.end, each at the same logical date."""
    runs = []
    for index in range(length):
        runs.append(
            finished_run(
                f"d{index}-run",
                f"d{index}",
                {"mark": marker(f"d{index + 1}", "mark", recursion_depth=recursion_depth)},
            )
        )
    runs.append(finished_run(f"d{length}-run", f"d{length}", {"mark": EMPTY}))
    return runs


def test_markers_are_followed_from_run_to_run_up_to_the_first_markers_recursion_depth() -> None:
    runs = chain_of_runs(3, recursion_depth=3)
    plan = plan_clear_across_dags(runs[0], runs, RunClear("d0-run", None), now=NOW)
    assert [part.run_name for part in plan] == ["d0-run", "d1-run", "d2-run", "d3-run"]
    too_deep = chain_of_runs(3, recursion_depth=2)
    with pytest.raises(
        clear_and_mark.ActionError, match="Maximum recursion depth 2 reached for ExternalTaskMarker mark"
    ):
        plan_clear_across_dags(too_deep[0], too_deep, RunClear("d0-run", None), now=NOW)


def test_a_cycle_of_markers_clears_each_run_once_as_airflow_remembers_the_markers_it_followed() -> None:
    a = finished_run("a-run", "a", {"mark": marker("b", "mark", recursion_depth=4)})
    b = finished_run("b-run", "b", {"mark": marker("a", "mark", recursion_depth=4)})
    plan = plan_clear_across_dags(a, [a, b], RunClear("a-run", None), now=NOW)
    assert [part.run_name for part in plan] == ["a-run", "b-run", "a-run"]
    assert plan[2].via == "b-run/mark", "back into a once; a's marker is not followed a second time"


def test_only_failed_carries_into_the_external_run() -> None:
    parent = finished_run("p", "parent", {"mark": marker("child-dag", "wait")}, mark="failed")
    child = finished_run(
        "c", "child-dag", {"wait": SENSOR, "after": {**EMPTY, "dependsOn": ["wait"]}}, after="failed"
    )
    plan = plan_clear_across_dags(parent, [child], RunClear("p", None, only_failed=True), now=NOW)
    assert plan[1].only_failed
    dag = clear_and_mark.dag_of_run("child-dag", child.status)
    assert plan[1].apply(dag, child.status, now=NOW, who="u").changed == ("after",)
