"""`zonda.actions.clear_and_mark`: a user's clear and mark, through the transition table, then driven by
`decide`.

Everything here is pure: the run is driven pass by pass with `tests.unit.pure_runs.Run`, the
user's edit is applied to its status in between, exactly as the CLI does between its read and write.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.unit.pure_runs import RUN_NAME, Run, make_dag, started
from zonda.actions import clear_and_mark
from zonda.passes import plans
from zonda.passes.decisions import AttemptPhase, Observation
from zonda.passes.run_pass import decide
from zonda.resources.dagrun_models import DagRunStatus
from zonda.resources.models import DagRunState, DagSpec, TaskInstanceState, TaskSpec

S = TaskInstanceState

CHAIN = {
    "extract": {"retries": 1},
    "transform": {"upstream": ["extract"]},
    "load": {"upstream": ["transform"]},
}


def failed_chain() -> Run:
    """extract succeeded, transform failed (no retries), load upstream_failed: the run failed."""
    run = started(make_dag(CHAIN))
    run.step(run.succeeded("extract"))
    run.wait(timedelta(minutes=1))
    run.step(run.failed("transform"))
    assert run.states() == {"extract": "success", "transform": "failed", "load": "upstream_failed"}
    assert run.status.state is DagRunState.FAILED
    return run


def apply(run: Run, result: clear_and_mark.ActionResult) -> None:
    run.status = result.status


# ----------------------------------------------------------------------------------------- clear


def test_clearing_a_failed_task_with_downstream_runs_both_again_and_requeues_the_run() -> None:
    run = failed_chain()
    result = clear_and_mark.clear(run.dag, run.status, task_ids=["transform"], downstream=True, now=run.now)
    assert result.changed == ("transform", "load")
    assert {t: run.status.task_instances[t].state for t in result.changed} == {
        "transform": S.FAILED,
        "load": S.UPSTREAM_FAILED,
    }
    apply(run, result)
    assert run.states() == {"extract": "success", "transform": "none", "load": "none"}
    assert run.status.state is DagRunState.QUEUED
    assert (run.status.start_date, run.status.end_date, run.status.queued_at) == (None, None, run.now)
    assert [e.reason for e in result.events] == ["TaskCleared", "TaskCleared"]
    assert "failed -> none" in result.events[0].message
    plan = run.step(after=timedelta(seconds=5))
    assert plan.status.state is DagRunState.RUNNING
    assert plan.status.start_date == run.now  # the run starts anew: its dagrun_timeout counts from here
    assert [launch.task_id for launch in plan.launches] == ["transform"]
    assert run.ti("transform").try_number == 2


def test_a_cleared_task_instance_gets_its_retries_again() -> None:
    run = failed_chain()
    apply(run, clear_and_mark.clear(run.dag, run.status, task_ids=["extract"], now=run.now))
    assert run.ti("extract").max_tries == 1 + 1  # try_number 1 + retries 1, as Airflow's clear sets it


def test_clearing_a_running_task_instance_restarts_it_instead_of_resetting_it() -> None:
    run = started(make_dag(CHAIN))
    run.step(run.running("extract"))
    old_attempt = run.ti("extract").pod_name
    result = clear_and_mark.clear(run.dag, run.status, task_ids=["extract"], now=run.now)
    assert result.status.task_instances["extract"].state is S.RESTARTING
    assert result.status.state is DagRunState.RUNNING  # an unfinished run is not requeued
    apply(run, result)
    plan = run.step()
    assert plan.kills == [old_attempt]
    assert [launch.task_id for launch in plan.launches] == ["extract"]
    assert run.ti("extract").try_number == 2


def test_upstream_closure_and_default_selection() -> None:
    dag = make_dag(CHAIN)
    assert clear_and_mark.select_tasks(dag, ["load"], upstream=True) == ["extract", "transform", "load"]
    assert clear_and_mark.select_tasks(dag, ["transform"]) == ["transform"]
    assert clear_and_mark.select_tasks(dag, None) == ["extract", "transform", "load"]


def test_only_failed_clears_failed_and_upstream_failed_only() -> None:
    run = failed_chain()
    result = clear_and_mark.clear(run.dag, run.status, only_failed=True, now=run.now)
    assert result.changed == ("transform", "load")


def test_unknown_tasks_are_named_in_the_error() -> None:
    run = failed_chain()
    with pytest.raises(clear_and_mark.ActionError, match=r"no such task.*nope"):
        clear_and_mark.clear(run.dag, run.status, task_ids=["nope", "load"], now=run.now)


def test_a_run_that_has_not_started_has_no_dag_to_act_on() -> None:
    with pytest.raises(clear_and_mark.ActionError, match="not started"):
        clear_and_mark.dag_of_run("etl", DagRunStatus())
    spec = DagSpec(
        tasks=[
            TaskSpec(id="a", operator="EmptyOperator"),
            TaskSpec(id="b", operator="EmptyOperator", depends_on=["a"]),
        ]
    ).to_wire()
    dag = clear_and_mark.dag_of_run("etl", DagRunStatus(dag_spec=spec))
    assert set(dag.tasks["a"].downstream) == {"b"}


# ------------------------------------------------------------------------------------------ mark


def test_marking_the_failed_task_success_clears_its_failed_downstream_and_the_run_resumes() -> None:
    run = failed_chain()
    result = clear_and_mark.mark(run.dag, run.status, task_ids=["transform"], state=S.SUCCESS, now=run.now)
    assert result.changed == ("transform", "load")
    assert [e.reason for e in result.events] == ["TaskMarkedSuccess", "TaskCleared"]
    apply(run, result)
    assert run.states() == {"extract": "success", "transform": "success", "load": "none"}
    assert run.status.state is DagRunState.QUEUED
    plan = run.step()
    assert [launch.task_id for launch in plan.launches] == ["load"]
    run.step(run.succeeded("load"))
    assert run.status.state is DagRunState.SUCCESS


def test_marking_a_failed_leaf_success_lets_the_controller_settle_the_run_success() -> None:
    run = started(make_dag({"only": {}}))
    run.step(run.failed("only"))
    assert run.status.state is DagRunState.FAILED
    result = clear_and_mark.mark(run.dag, run.status, task_ids=["only"], state=S.SUCCESS, now=run.now)
    assert result.status.state is DagRunState.RUNNING
    apply(run, result)
    plan = run.step()
    assert plan.status.state is DagRunState.SUCCESS
    assert [e.reason for e in plan.events] == ["RunSucceeded"]


def test_marking_a_running_task_stops_its_attempt() -> None:
    run = started(make_dag(CHAIN))
    run.step(run.running("extract"))
    attempt = run.ti("extract").pod_name
    run.wait(timedelta(seconds=30))
    result = clear_and_mark.mark(run.dag, run.status, task_ids=["extract"], state=S.FAILED, now=run.now)
    extract = result.status.task_instances["extract"]
    assert (extract.state, extract.end_date, extract.reason) == (S.FAILED, run.now, "Marked failed by a user")
    assert result.events[0].warning
    apply(run, result)
    report = run.attempt("extract", AttemptPhase.RUNNING)
    observed = plans.observe(run.status, {report.name: report}, [])  # as the reconciler gathers
    plan = run.step(stray_attempts=observed.stray_attempts)
    assert plan.kills == [attempt]
    assert run.states() == {"extract": "failed", "transform": "upstream_failed", "load": "upstream_failed"}


def test_marking_with_downstream_marks_the_closure_and_skips_those_already_there() -> None:
    run = started(make_dag(CHAIN))
    run.step(run.succeeded("extract"))
    result = clear_and_mark.mark(
        run.dag, run.status, task_ids=["extract"], state=S.SUCCESS, downstream=True, now=run.now
    )
    assert result.changed == ("transform", "load")


@pytest.mark.parametrize("state", [S.NONE, S.RUNNING, S.UPSTREAM_FAILED])
def test_only_success_failed_and_skipped_can_be_marked(state: TaskInstanceState) -> None:
    run = failed_chain()
    with pytest.raises(clear_and_mark.ActionError, match="only failed, skipped, success"):
        clear_and_mark.mark(run.dag, run.status, task_ids=["load"], state=state, now=run.now)


def test_actions_are_idempotent_once_applied() -> None:
    run = failed_chain()
    once = clear_and_mark.mark(run.dag, run.status, task_ids=["transform"], state=S.SUCCESS, now=run.now)
    twice = clear_and_mark.mark(run.dag, once.status, task_ids=["transform"], state=S.SUCCESS, now=run.now)
    assert twice.changed == () and twice.status == once.status
    plan = decide(
        run.dag,
        run_name=RUN_NAME,
        run_type=run.run_type,
        status=once.status,
        observed=Observation(),
        now=run.now,
    )
    assert plan.status.task_instances["transform"].state is S.SUCCESS


def test_a_cleared_task_a_branch_skipped_is_skipped_again_while_the_branch_stands() -> None:
    """Airflow's NotPreviouslySkippedDep; clearing the branch too lets it decide again."""
    run = started(
        make_dag({"branch": {}, "path_a": {"upstream": ["branch"]}, "path_b": {"upstream": ["branch"]}})
    )
    run.step(run.succeeded("branch", follow_task_ids=["path_a"]))
    run.finish_all()
    assert run.states() == {"branch": "success", "path_a": "success", "path_b": "skipped"}
    apply(run, clear_and_mark.clear(run.dag, run.status, task_ids=["path_b"], now=run.now))
    plan = run.step(after=timedelta(seconds=1))
    assert run.states()["path_b"] == "skipped" and not plan.launches
    assert "previous XCom result from parent task branch" in (run.ti("path_b").reason or "")
    assert run.status.state is DagRunState.SUCCESS
    apply(run, clear_and_mark.clear(run.dag, run.status, task_ids=["branch"], downstream=True, now=run.now))
    run.step(after=timedelta(seconds=1))
    run.step(run.succeeded("branch", follow_task_ids=["path_b"]))
    assert run.states() == {"branch": "success", "path_a": "skipped", "path_b": "queued"}
