"""`decide`: Airflow's scheduler loop for one run, scenario by scenario."""

from __future__ import annotations

import dataclasses
import hashlib
import math
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.unit.pure_runs import (
    LOGICAL_DATE,
    RUN_NAME,
    START,
    TR,
    Run,
    S,
    event_reasons,
    launched,
    make_dag,
    started,
)
from zonda.passes import plans
from zonda.passes.decisions import AttemptPhase, ObservedAttempt, ObservedTrigger, RunPlan
from zonda.passes.retries import MAX_RETRY_DELAY, retry_delay_for
from zonda.passes.run_pass import decide
from zonda.resources.dagrun_models import DagRunStatus, TaskInstanceStatus
from zonda.resources.invocations import DeferralRequest, TaskOutcome, TaskResult
from zonda.resources.models import (
    FINISHED_TI_STATES,
    DagRunState,
    TaskInstanceState,
    TriggerRule,
    WeightRule,
)
from zonda.resources.names import attempt_name, trigger_name
from zonda.resources.run_types import RunType
from zonda.resources.states import allowed_targets
from zonda.specs.dags import ResolvedDag

# --------------------------------------------------------------------------------- the first pass


def test_first_pass_starts_the_run_and_launches_the_roots() -> None:
    run = Run(make_dag({"extract": {"retries": 2}, "load": {"upstream": ["extract"]}}))
    plan = run.step()
    assert plan.status.state is DagRunState.RUNNING
    assert plan.status.start_date == START
    assert run.states() == {"extract": "queued", "load": "none"}
    extract = run.ti("extract")
    assert (extract.try_number, extract.max_tries, extract.queued_at) == (1, 2, START)
    assert plan.launches[0].attempt_name == attempt_name(RUN_NAME, "extract", 1) == extract.pod_name
    assert event_reasons(plan) == ["RunStarted", "TaskQueued"]
    assert "all_success" in (run.ti("load").reason or "")


def test_a_linear_dag_succeeds_task_after_task() -> None:
    run = started(make_dag({"extract": {}, "load": {"upstream": ["extract"]}}))
    run.step(run.running("extract"))
    assert run.states()["extract"] == "running"
    plan = run.step(run.succeeded("extract", xcom={"rows": 3}, xcoms={"path": "/tmp/x"}))
    assert run.ti("extract").xcom == {"rows": 3}
    assert run.ti("extract").xcoms == {"path": "/tmp/x"}  # xcom_push'ed keys are kept beside it
    assert launched(plan) == ["load"]
    run.wait(timedelta(minutes=1))
    plan = run.step(run.succeeded("load"))
    assert plan.status.state is DagRunState.SUCCESS
    assert plan.status.end_date == run.now
    assert event_reasons(plan) == ["TaskSucceeded", "RunSucceeded"]
    assert plan.wake_at is None


def test_a_failure_propagates_upstream_failed_and_fails_the_run() -> None:
    run = started(
        make_dag({"extract": {}, "load": {"upstream": ["extract"]}, "report": {"upstream": ["load"]}})
    )
    plan = run.step(run.failed("extract", exit_code=2, message="boom"))
    assert run.states() == {"extract": "failed", "load": "upstream_failed", "report": "upstream_failed"}
    assert run.ti("extract").reason == "Attempt {} failed with exit code 2: boom; try 1 of 1".format(
        attempt_name(RUN_NAME, "extract", 1)
    )
    assert (run.ti("load").reason or "").startswith(
        "Task's trigger rule 'all_success' requires all upstream tasks to have succeeded, but found 1 "
        "non-success(es)."
    )
    assert event_reasons(plan) == ["TaskFailed", "TaskUpstreamFailed", "TaskUpstreamFailed", "RunFailed"]
    assert plan.status.state is DagRunState.FAILED
    assert "report" in (plan.status.message or "")


def test_a_container_task_that_exits_zero_without_a_result_succeeds() -> None:
    run = started(make_dag({"container": {"operator": None}}))
    run.step(run.attempt("container", AttemptPhase.SUCCEEDED, exit_code=0))
    assert run.states() == {"container": "success"}


OUTCOMES = [
    pytest.param(
        lambda run: run.failed("task", exit_code=99),
        "skipped",
        id="exit code 99 skips the task, as BashOperator does",
    ),
    pytest.param(
        lambda run: run.succeeded("task", outcome=TaskOutcome.SKIPPED, message="no data"),
        "skipped",
        id="AirflowSkipException skips the task",
    ),
    pytest.param(
        lambda run: run.succeeded("task", outcome=TaskOutcome.FAILED),
        "up_for_retry",
        id="a failure with retries left is retried",
    ),
    pytest.param(
        lambda run: run.succeeded("task", outcome=TaskOutcome.FAILED_NO_RETRY),
        "failed",
        id="AirflowFailException fails the task despite its retries",
    ),
    pytest.param(
        lambda run: run.attempt(
            "task", AttemptPhase.FAILED, exit_code=1, result=TaskResult(outcome=TaskOutcome.FAILED_NO_RETRY)
        ),
        "failed",
        id="a non-zero exit with a no-retry result is not retried",
    ),
    pytest.param(
        lambda run: run.attempt("task", AttemptPhase.MISSING),
        "up_for_retry",
        id="a vanished pod is a zombie and is retried",
    ),
    pytest.param(
        lambda run: run.attempt("task", AttemptPhase.PENDING),
        "queued",
        id="a pending pod keeps the task queued",
    ),
]


@pytest.mark.parametrize(("report", "state"), OUTCOMES)
def test_attempt_outcomes(report: Any, state: str) -> None:
    run = started(make_dag({"task": {"retries": 1, "retry_delay": timedelta(minutes=5)}}))
    run.step(report(run))
    assert run.states() == {"task": state}


def test_a_zombie_says_what_happened() -> None:
    run = started(make_dag({"task": {"retries": 1}}))
    run.step(run.running("task"))
    plan = run.step(run.attempt("task", AttemptPhase.MISSING, message="node lost"))
    reason = run.ti("task").reason or ""
    assert "vanished while the task instance was running" in reason
    assert "zombie" in reason and "node lost" in reason
    assert event_reasons(plan) == ["TaskUpForRetry"]
    assert plan.events[0].warning


# -------------------------------------------------------------------------------------- retries


def test_a_failing_task_is_retried_exactly_retries_times_then_failed() -> None:
    run = started(make_dag({"flaky": {"retries": 2, "retry_delay": timedelta(minutes=5)}}))
    names = [run.ti("flaky").pod_name]
    for try_number in (1, 2):
        run.wait(timedelta(minutes=1))
        plan = run.step(run.failed("flaky"))
        ti = run.ti("flaky")
        assert ti.state is S.UP_FOR_RETRY
        assert ti.next_try_at == run.now + timedelta(minutes=5)
        assert plan.wake_at == ti.next_try_at
        assert run.step(after=timedelta(minutes=4, seconds=59)).launches == []
        plan = run.step(after=timedelta(seconds=1))
        assert [(launch.task_id, launch.try_number) for launch in plan.launches] == [
            ("flaky", try_number + 1)
        ]
        names.append(run.ti("flaky").pod_name)
    plan = run.step(run.failed("flaky"))
    assert run.states() == {"flaky": "failed"}
    assert plan.status.state is DagRunState.FAILED
    assert "try 3 of 3" in (run.ti("flaky").reason or "")
    assert len(set(names)) == 3


def _airflow_backoff(next_try: int, delay: timedelta) -> timedelta:
    """Airflow 2.x's next_retry_datetime backoff, written out independently."""
    min_backoff = max(1, math.ceil(delay.total_seconds() * (2 ** (next_try - 2))))
    seed = f"etl#flaky#{LOGICAL_DATE.isoformat()}#{next_try}".encode()
    ti_hash = int(hashlib.sha1(seed, usedforsecurity=False).hexdigest(), 16)
    return timedelta(seconds=min(min_backoff + ti_hash % min_backoff, MAX_RETRY_DELAY.total_seconds()))


def test_exponential_backoff_follows_airflows_formula() -> None:
    delay = timedelta(minutes=1)
    run = started(
        make_dag({"flaky": {"retries": 3, "retry_delay": delay, "retry_exponential_backoff": True}})
    )
    waits = []
    for next_try in (2, 3, 4):
        run.step(run.failed("flaky"))
        wait = (run.ti("flaky").next_try_at or START) - run.now
        waits.append(wait)
        assert wait == _airflow_backoff(next_try, delay)
        assert delay * 2 ** (next_try - 2) <= wait < delay * 2 ** (next_try - 1)
        run.step(after=wait)
    assert len(set(waits)) == 3


@pytest.mark.parametrize(
    ("max_retry_delay", "expected"),
    [
        pytest.param(timedelta(minutes=30), timedelta(minutes=30), id="max_retry_delay caps the backoff"),
        pytest.param(None, MAX_RETRY_DELAY, id="without max_retry_delay a backoff never exceeds a day"),
    ],
)
def test_backoff_is_capped(max_retry_delay: timedelta | None, expected: timedelta) -> None:
    delay = retry_delay_for(
        dag_id="etl",
        task_id="flaky",
        logical_date=LOGICAL_DATE,
        next_try_number=12,
        retry_delay=timedelta(hours=1),
        exponential_backoff=True,
        max_retry_delay=max_retry_delay,
    )
    assert delay == expected


def test_retry_delay_without_backoff_ignores_max_retry_delay() -> None:
    """As Airflow: max_retry_delay only caps exponential backoff."""
    delay = retry_delay_for(
        dag_id="etl",
        task_id="t",
        logical_date=LOGICAL_DATE,
        next_try_number=2,
        retry_delay=timedelta(hours=2),
        max_retry_delay=timedelta(hours=1),
    )
    assert delay == timedelta(hours=2)


def test_a_retry_without_delay_is_launched_in_the_same_pass() -> None:
    run = started(make_dag({"flaky": {"retries": 1, "retry_delay": timedelta(0)}}))
    plan = run.step(run.failed("flaky"))
    assert [(launch.task_id, launch.try_number) for launch in plan.launches] == [("flaky", 2)]
    assert event_reasons(plan) == ["TaskUpForRetry", "TaskQueued"]


# ------------------------------------------------------------------------------------- branching


BRANCH_DAG: dict[str, dict[str, Any]] = {
    "branch": {"operator": "BranchPythonOperator"},
    "path_a": {"upstream": ["branch"]},
    "path_b": {"upstream": ["branch"]},
}


@pytest.mark.parametrize(
    ("join_rule", "expected"),
    [
        pytest.param(
            TR.ALL_SUCCESS,
            {"path_b": "skipped", "join": "skipped"},
            id="an all_success join is skipped when a branch is not followed",
        ),
        pytest.param(
            TR.NONE_FAILED_MIN_ONE_SUCCESS,
            {"path_b": "skipped", "join": "success"},
            id="a none_failed_min_one_success join runs after the followed branch",
        ),
        pytest.param(
            TR.ONE_SUCCESS,
            {"path_b": "skipped", "join": "success"},
            id="a one_success join runs after the followed branch",
        ),
    ],
)
def test_branch_without_trigger(join_rule: TriggerRule, expected: dict[str, str]) -> None:
    dag = make_dag({**BRANCH_DAG, "join": {"upstream": ["path_a", "path_b"], "trigger_rule": join_rule}})
    run = started(dag)
    plan = run.step(run.succeeded("branch", follow_task_ids=["path_a"]))
    assert launched(plan) == ["path_a"]
    assert run.ti("branch").follow_task_ids == ["path_a"]
    assert "Branch branch followed ['path_a']" in (run.ti("path_b").reason or "")
    run.finish_all()
    assert {t: s for t, s in run.states().items() if t in expected} == expected
    assert run.status.state is DagRunState.SUCCESS


def test_a_join_directly_downstream_of_the_branch_is_kept_when_a_followed_path_leads_to_it() -> None:
    """Airflow's empty-branch rule: branch >> join and branch >> task1 >> join, following task1."""
    dag = make_dag(
        {
            "branch": {},
            "task1": {"upstream": ["branch"]},
            "other": {"upstream": ["branch"]},
            "join": {"upstream": ["branch", "task1"], "trigger_rule": TR.NONE_FAILED_MIN_ONE_SUCCESS},
        }
    )
    run = started(dag)
    run.step(run.succeeded("branch", follow_task_ids=["task1"]))
    assert run.states() == {"branch": "success", "task1": "queued", "other": "skipped", "join": "none"}
    run.finish_all()
    assert run.states()["join"] == "success"


def test_a_branch_following_nothing_skips_every_direct_downstream() -> None:
    run = started(make_dag(BRANCH_DAG))
    run.step(run.succeeded("branch", follow_task_ids=[]))
    assert run.states() == {"branch": "success", "path_a": "skipped", "path_b": "skipped"}
    assert run.status.state is DagRunState.SUCCESS


def test_a_branch_returning_a_task_group_id_follows_the_groups_roots() -> None:
    """Airflow expands a TaskGroup id among branch_task_ids to the group's root tasks."""
    dag = make_dag(
        {
            "branch": {},
            "load.a": {"upstream": ["branch"], "group": "load"},
            "load.b": {"upstream": ["branch"], "group": "load"},
            "load.inner.c": {"upstream": ["load.a"], "group": "load.inner"},
            "other": {"upstream": ["branch"]},
        }
    )
    run = started(dag)
    plan = run.step(run.succeeded("branch", follow_task_ids=["load"]))
    assert run.ti("branch").follow_task_ids == ["load.a", "load.b"]
    assert launched(plan) == ["load.a", "load.b"]
    assert run.states()["other"] == "skipped"


def test_a_branch_naming_an_unknown_task_fails() -> None:
    run = started(make_dag(BRANCH_DAG))
    run.step(run.succeeded("branch", follow_task_ids=["nope"]))
    assert run.states()["branch"] == "failed"
    assert "Invalid tasks found: ['nope']" in (run.ti("branch").reason or "")


def test_short_circuit_skips_every_downstream_task_ignoring_trigger_rules() -> None:
    dag = make_dag(
        {
            "check": {},
            "a": {"upstream": ["check"]},
            "b": {"upstream": ["a"], "trigger_rule": TR.ALL_DONE},
            "c": {"upstream": ["b"], "trigger_rule": TR.NONE_FAILED},
        }
    )
    run = started(dag)
    run.step(run.succeeded("check", skip_all_downstream=True))
    assert run.states() == {"check": "success", "a": "skipped", "b": "skipped", "c": "skipped"}


def test_a_skip_cascades_through_a_chain_in_one_pass() -> None:
    dag = make_dag(
        {
            "a": {},
            "b": {"upstream": ["a"]},
            "c": {"upstream": ["b"]},
            "d": {"upstream": ["c"], "trigger_rule": TR.ALL_DONE},
        }
    )
    run = started(dag)
    plan = run.step(run.succeeded("a", outcome=TaskOutcome.SKIPPED))
    assert run.states() == {"a": "skipped", "b": "skipped", "c": "skipped", "d": "queued"}
    assert launched(plan) == ["d"]


def test_one_failed_fires_before_every_upstream_is_done() -> None:
    dag = make_dag({"a": {}, "b": {}, "alert": {"upstream": ["a", "b"], "trigger_rule": TR.ONE_FAILED}})
    run = started(dag)
    plan = run.step(run.failed("a"))
    assert launched(plan) == ["alert"]
    assert run.states()["b"] == "queued"


# ----------------------------------------------------------------------------------- latest only


LATEST_ONLY_WITH_TRIGGER: dict[str, dict[str, Any]] = {  # Airflow's example_latest_only_with_trigger
    "latest_only": {"operator": "LatestOnlyOperator"},
    "task1": {"upstream": ["latest_only"], "operator": "EmptyOperator"},
    "task2": {"operator": "EmptyOperator"},
    "task3": {"upstream": ["task1", "task2"], "operator": "EmptyOperator"},
    "task4": {"upstream": ["task1", "task2"], "operator": "EmptyOperator", "trigger_rule": TR.ALL_DONE},
}
INTERVAL_END = LOGICAL_DATE + timedelta(days=1)
NEXT_END = INTERVAL_END + timedelta(days=1)
#: Airflow 2.10's window for a daily run: the next interval (`plans.latest_window`).
NEXT_INTERVAL = (INTERVAL_END, NEXT_END)


@pytest.mark.parametrize(
    ("run_type", "now", "latest_window", "expected"),
    [
        pytest.param(
            RunType.SCHEDULED,
            NEXT_END + timedelta(days=3),
            NEXT_INTERVAL,
            {
                "latest_only": "success",
                "task1": "skipped",
                "task2": "success",
                "task3": "skipped",
                "task4": "success",
            },
            id="an old scheduled run skips task1 and task3, and task4 runs by all_done",
        ),
        pytest.param(
            RunType.SCHEDULED,
            INTERVAL_END + timedelta(hours=1),
            NEXT_INTERVAL,
            {
                "latest_only": "success",
                "task1": "success",
                "task2": "success",
                "task3": "success",
                "task4": "success",
            },
            id="the latest scheduled run runs everything",
        ),
        pytest.param(
            RunType.MANUAL,
            NEXT_END + timedelta(days=3),
            NEXT_INTERVAL,
            {
                "latest_only": "success",
                "task1": "success",
                "task2": "success",
                "task3": "success",
                "task4": "success",
            },
            id="a manual run continues whatever the date",
        ),
        pytest.param(
            RunType.BACKFILL,
            NEXT_END + timedelta(days=3),
            NEXT_INTERVAL,
            {
                "latest_only": "success",
                "task1": "skipped",
                "task2": "success",
                "task3": "skipped",
                "task4": "success",
            },
            id="a backfill run is not the latest",
        ),
        pytest.param(
            RunType.SCHEDULED,
            INTERVAL_END,
            NEXT_INTERVAL,
            {
                "latest_only": "success",
                "task1": "skipped",
                "task2": "success",
                "task3": "skipped",
                "task4": "success",
            },
            id="the window's start is excluded, as Airflow's left_window < now",
        ),
        pytest.param(
            RunType.SCHEDULED,
            NEXT_END + timedelta(days=3),
            None,
            {
                "latest_only": "success",
                "task1": "success",
                "task2": "success",
                "task3": "success",
                "task4": "success",
            },
            id="the last scheduled run of a DAG proceeds",
        ),
    ],
)
def test_latest_only_with_trigger(
    run_type: RunType,
    now: datetime,
    latest_window: tuple[datetime, datetime] | None,
    expected: dict[str, str],
) -> None:
    run = Run(make_dag(LATEST_ONLY_WITH_TRIGGER), run_type=run_type, now=now)
    plan = run.step(latest_window=latest_window)
    assert run.states() == expected
    assert plan.launches == []
    assert plan.status.state is DagRunState.SUCCESS


@pytest.mark.parametrize(
    ("airflow_version", "externally_triggered", "task1"),
    [
        pytest.param(None, True, "success", id="a manual run in the cluster is externally triggered"),
        pytest.param("2", False, "skipped", id="Airflow 2's dag.test() run is judged by its interval"),
        pytest.param("3", False, "success", id="Airflow 3: every manual run proceeds, dag.test()'s too"),
        pytest.param("3", True, "success", id="Airflow 3: a triggered run proceeds"),
    ],
)
def test_a_manual_run_proceeds_as_its_airflow_decides(
    airflow_version: str | None, externally_triggered: bool, task1: str
) -> None:
    """Airflow 2.10's `LatestOnlyOperator` lets a manual run proceed when `dag_run.external_trigger`
    (not `dag.test()`'s run), the standard provider's (Airflow 3) any `run_type == MANUAL`."""
    dag = make_dag(LATEST_ONLY_WITH_TRIGGER)
    dag = dataclasses.replace(dag, spec=dag.spec.model_copy(update={"airflow_version": airflow_version}))
    run = Run(dag, run_type=RunType.MANUAL, now=NEXT_END + timedelta(days=3))
    run.step(latest_window=NEXT_INTERVAL, externally_triggered=externally_triggered)
    assert run.states()["task1"] == task1
    assert run.states()["task4"] == "success"


def test_latest_only_explains_its_skip() -> None:
    run = Run(make_dag(LATEST_ONLY_WITH_TRIGGER), now=NEXT_END + timedelta(days=3))
    run.step(latest_window=NEXT_INTERVAL)
    assert "Not latest execution, skipping downstream" in (run.ti("latest_only").reason or "")
    assert run.ti("latest_only").follow_task_ids == []
    assert run.ti("latest_only").try_number == 1


def test_an_empty_operator_succeeds_without_a_launch_and_unblocks_its_downstream_at_once() -> None:
    run = Run(make_dag({"start": {"operator": "EmptyOperator"}, "work": {"upstream": ["start"]}}))
    plan = run.step()
    assert launched(plan) == ["work"]
    # Airflow 2.10's `schedule_tis` records try 1 for a task it succeeds without running
    assert run.ti("start").state is S.SUCCESS and run.ti("start").try_number == 1


# ------------------------------------------------------------------------------------- deferral


def test_deferral_fires_and_the_task_resumes_in_the_same_try() -> None:
    run = started(make_dag({"wait": {}}))
    first_attempt = run.ti("wait").pod_name
    run.wait(timedelta(seconds=5))
    run.step(run.running("wait"))
    run.wait(timedelta(seconds=5))
    plan = run.step(run.deferred("wait", kwargs={"x": 1}, method_name="done"))
    ti = run.ti("wait")
    name = trigger_name(RUN_NAME, "wait", 1, 1)
    assert (ti.state, ti.deferral_count, ti.trigger_name, ti.try_number) == (S.DEFERRED, 1, name, 1)
    assert [(t.name, t.try_number, t.deferral_count) for t in plan.triggers_to_create] == [(name, 1, 1)]
    assert event_reasons(plan) == ["TaskDeferred"]
    run.wait(timedelta(minutes=10))
    plan = run.step(run.trigger("wait", fired=True, event={"at": "now"}))
    ti = run.ti("wait")
    assert plan.triggers_to_delete == [name]
    assert [(launch.task_id, launch.try_number) for launch in plan.launches] == [("wait", 1)]
    assert plan.launches[0].attempt_name != first_attempt
    assert (ti.state, ti.next_method, ti.next_kwargs) == (S.QUEUED, "done", {"x": 1, "event": {"at": "now"}})
    assert ti.start_date == START + timedelta(seconds=0), "a resumed try keeps its start"
    run.wait(timedelta(seconds=3))
    run.step(run.succeeded("wait"))
    ti = run.ti("wait")
    assert (ti.state, ti.next_method, ti.next_kwargs) == (S.SUCCESS, None, None)
    assert run.status.state is DagRunState.SUCCESS


def test_a_trigger_an_earlier_pass_created_before_its_status_write_failed_is_not_deleted_as_a_stray() -> None:
    run = started(make_dag({"wait": {}}))
    run.step(run.running("wait"))
    as_read = run.status.model_copy(deep=True)
    deferral = run.deferred("wait", kwargs={"x": 1}, method_name="done")
    [created] = run.step(deferral).triggers_to_create  # this pass's status write is refused
    run.status = as_read  # the next pass reads the same, and finds that trigger
    again = run.step(deferral, stray_triggers=(created.name,))
    assert ([t.name for t in again.triggers_to_create], again.triggers_to_delete) == ([created.name], [])
    control = run.step(deferral, stray_triggers=("an-old-trigger",))  # a real stray still goes
    assert control.triggers_to_delete == ["an-old-trigger"]


def test_a_deferral_that_times_out_fails_the_task() -> None:
    run = started(make_dag({"wait": {}}))
    plan = run.step(run.deferred("wait", timeout_seconds=60))
    timeout_at = run.now + timedelta(seconds=60)
    assert run.ti("wait").trigger_timeout_at == timeout_at == plan.triggers_to_create[0].timeout_at
    assert plan.wake_at == timeout_at
    trigger = run.trigger("wait")
    run.wait(timedelta(seconds=59))
    assert run.step(trigger).events == []
    run.wait(timedelta(seconds=1))
    plan = run.step(trigger)
    assert run.states() == {"wait": "failed"}
    assert (run.ti("wait").reason or "").startswith("Trigger/execution timeout")
    assert plan.triggers_to_delete == [trigger.name]


def test_a_failed_trigger_fails_the_try_and_retries_apply() -> None:
    run = started(make_dag({"wait": {"retries": 1, "retry_delay": timedelta(0)}}))
    run.step(run.deferred("wait"))
    plan = run.step(run.trigger("wait", failed=True, message="connection refused"))
    retry = next(event for event in plan.events if event.reason == "TaskUpForRetry")
    assert "Trigger failure: connection refused" in retry.message
    assert [(launch.task_id, launch.try_number) for launch in plan.launches] == [("wait", 2)]


def test_the_execution_timeout_bounds_a_deferral() -> None:
    """Airflow: trigger_timeout = min(deferral timeout, start_date + execution_timeout)."""
    run = started(make_dag({"wait": {"execution_timeout": timedelta(minutes=10)}}))
    run.step(run.running("wait"))
    run.wait(timedelta(minutes=2))
    run.step(run.deferred("wait", timeout_seconds=3600))
    assert run.ti("wait").trigger_timeout_at == START + timedelta(minutes=10)


def test_the_execution_timeout_counts_the_whole_try_across_deferrals() -> None:
    run = started(
        make_dag(
            {
                "wait": {
                    "execution_timeout": timedelta(minutes=10),
                    "retries": 1,
                    "retry_delay": timedelta(minutes=1),
                }
            }
        )
    )
    run.step(run.running("wait"))
    run.wait(timedelta(minutes=2))
    run.step(run.deferred("wait"))
    run.wait(timedelta(minutes=3))
    run.step(run.trigger("wait", fired=True))
    resumed = run.ti("wait").pod_name
    run.wait(timedelta(minutes=1))
    plan = run.step(run.running("wait"))
    assert plan.wake_at == START + timedelta(minutes=10)
    run.wait(timedelta(minutes=3, seconds=59))
    assert run.step(run.running("wait")).kills == []
    run.wait(timedelta(seconds=1))
    plan = run.step(run.running("wait"))
    assert plan.kills == [resumed]
    assert run.states() == {"wait": "up_for_retry"}
    assert "execution_timeout of 10m" in (run.ti("wait").reason or "")


def test_a_resumed_try_waiting_for_a_slot_still_times_out() -> None:
    run = started(make_dag({"wait": {"execution_timeout": timedelta(minutes=3)}}, max_active_tasks=1))
    run.step(run.deferred("wait"))
    plan = run.step(run.trigger("wait", fired=True), running_in_dag=1)
    assert (run.states(), plan.wake_at) == ({"wait": "scheduled"}, START + timedelta(minutes=3))
    run.wait(timedelta(minutes=3))
    plan = run.step()
    assert (run.states(), plan.launches) == ({"wait": "failed"}, [])


def test_execution_timeout_kills_a_running_attempt() -> None:
    run = started(make_dag({"slow": {"execution_timeout": timedelta(seconds=90)}}))
    run.step(run.running("slow"))
    run.wait(timedelta(seconds=90))
    plan = run.step(run.running("slow"))
    assert plan.kills == [attempt_name(RUN_NAME, "slow", 1)]
    assert run.states() == {"slow": "failed"}


def test_running_seconds_add_up_the_attempts_of_a_try() -> None:
    run = started(make_dag({"wait": {}}))
    run.step(run.running("wait"))
    run.wait(timedelta(seconds=30))
    run.step(run.deferred("wait"))
    run.wait(timedelta(hours=1))
    run.step(run.trigger("wait", fired=True))
    resumed_at = run.now
    run.step(run.running("wait"))
    run.wait(timedelta(seconds=20))
    run.step(
        run.attempt(
            "wait", AttemptPhase.SUCCEEDED, TaskResult(outcome=TaskOutcome.SUCCESS), started_at=resumed_at
        )
    )
    assert run.ti("wait").running_seconds == 50


# ----------------------------------------------------------------------------------- reschedule


def test_a_rescheduled_sensor_pokes_again_in_the_same_try() -> None:
    run = started(make_dag({"sensor": {"operator": "zonda.sensors.FileSensor"}}))
    first = run.ti("sensor").pod_name
    run.step(run.running("sensor"))
    poke_at = run.now + timedelta(minutes=5)
    run.wait(timedelta(seconds=10))
    plan = run.step(run.succeeded("sensor", outcome=TaskOutcome.RESCHEDULE, reschedule_at=poke_at))
    ti = run.ti("sensor")
    assert (ti.state, ti.next_try_at, ti.first_try_start) == (S.UP_FOR_RESCHEDULE, poke_at, START)
    assert plan.wake_at == poke_at
    plan = run.step(after=poke_at - run.now)
    assert [(launch.task_id, launch.try_number) for launch in plan.launches] == [("sensor", 1)]
    assert plan.launches[0].attempt_name != first
    assert run.ti("sensor").first_try_start == START
    run.step(run.succeeded("sensor"))
    assert (run.ti("sensor").state, run.ti("sensor").first_try_start) == (S.SUCCESS, None)


def test_every_attempt_of_a_try_has_a_name_of_its_own() -> None:
    run = started(make_dag({"task": {}}))
    names = [run.ti("task").pod_name]
    for _ in range(2):
        run.step(run.deferred("task"))
        run.step(run.trigger("task", fired=True))
        names.append(run.ti("task").pod_name)
        run.step(run.succeeded("task", outcome=TaskOutcome.RESCHEDULE, reschedule_at=run.now))
        names.append(run.ti("task").pod_name)
    assert run.ti("task").try_number == 1
    assert run.states() == {"task": "queued"}
    assert len(set(names)) == 5


# ------------------------------------------------------------------------------ slots and order


def test_max_active_tasks_caps_the_launches() -> None:
    dag = make_dag({f"t{i}": {} for i in range(5)}, max_active_tasks=3)
    run = Run(dag)
    plan = run.step(running_in_dag=1)
    assert launched(plan) == ["t0", "t1"]
    assert run.ti("t4").state is S.SCHEDULED
    assert "max_active_tasks limit of 3" in (run.ti("t4").reason or "")
    plan = run.step(run.succeeded("t0"), running_in_dag=1)
    assert launched(plan) == ["t2"]


@pytest.mark.parametrize(
    ("tasks", "order"),
    [
        pytest.param(
            {"lonely": {}, "head": {}, "mid": {"upstream": ["head"]}, "tail": {"upstream": ["mid"]}},
            ["head", "mid"],
            id="downstream weight favours the task that unblocks the most",
        ),
        pytest.param({"b": {}, "a": {}}, ["a", "b"], id="equal weights launch in task id order"),
        pytest.param(
            {
                "low": {"priority_weight": 1, "weight_rule": WeightRule.ABSOLUTE},
                "high": {"priority_weight": 5, "weight_rule": WeightRule.ABSOLUTE},
            },
            ["high", "low"],
            id="absolute weights are the tasks' own",
        ),
    ],
)
def test_launch_order_follows_effective_priority(tasks: dict[str, dict[str, Any]], order: list[str]) -> None:
    run = Run(make_dag(tasks, max_active_tasks=1))
    assert launched(run.step()) == order[:1]
    assert launched(run.step(run.succeeded(order[0]))) == order[1:2]


def test_upstream_weight_adds_the_upstream_tasks_weights() -> None:
    dag = make_dag(
        {
            "root": {"priority_weight": 10},
            "a": {"weight_rule": WeightRule.UPSTREAM},
            "b": {"upstream": ["root"], "weight_rule": WeightRule.UPSTREAM},
        },
        max_active_tasks=1,
    )
    run = Run(dag)
    assert launched(run.step()) == ["root"]
    assert launched(run.step(run.succeeded("root"))) == ["b"]


# ----------------------------------------------------------------------------------- timeouts


def test_dagrun_timeout_skips_unfinished_task_instances_and_fails_the_run() -> None:
    dag = make_dag(
        {"slow": {}, "wait": {}, "later": {"upstream": ["slow"]}, "done": {}},
        dagrun_timeout=timedelta(hours=1),
    )
    run = started(dag)
    run.step(run.running("slow"), run.deferred("wait"), run.succeeded("done"))
    assert run.plans[-1].wake_at == START + timedelta(hours=1)
    trigger = run.trigger("wait")
    run.wait(timedelta(hours=1))
    plan = run.step(run.running("slow"), trigger)
    assert run.states() == {"slow": "skipped", "wait": "skipped", "later": "skipped", "done": "success"}
    assert plan.kills == [attempt_name(RUN_NAME, "slow", 1)]
    assert plan.triggers_to_delete == [trigger.name]
    assert plan.status.state is DagRunState.FAILED
    assert event_reasons(plan)[-1] == "RunTimedOut"
    assert plan.wake_at is None
    assert "dagrun_timeout of 1h" in (plan.status.message or "")


# -------------------------------------------------------------------------------------- others


def test_depends_on_past_waits_for_the_previous_run() -> None:
    dag = make_dag({"daily": {"depends_on_past": True}})
    for previous, state in [
        (None, "queued"),
        ({"daily": S.SUCCESS}, "queued"),
        ({"daily": S.SKIPPED}, "queued"),
        ({}, "queued"),
        ({"daily": S.FAILED}, "none"),
    ]:
        run = Run(dag)
        run.step(previous_run_states=previous)
        assert run.states() == {"daily": state}, previous
    assert "previous task instance is in the state 'failed'" in (run.ti("daily").reason or "")


@pytest.mark.parametrize(
    ("wait", "expected"),
    [
        pytest.param(False, "skipped", id="by default a task its trigger rule skips is skipped at once"),
        pytest.param(True, "none", id="wait_for_past_depends_before_skipping waits for the past first"),
    ],
)
def test_wait_for_past_depends_before_skipping(wait: bool, expected: str) -> None:
    dag = make_dag(
        {
            "check": {},
            "daily": {
                "upstream": ["check"],
                "depends_on_past": True,
                "wait_for_past_depends_before_skipping": wait,
            },
        }
    )
    run = Run(dag)
    run.step(previous_run_states={"daily": S.FAILED})
    run.step(run.succeeded("check", outcome=TaskOutcome.SKIPPED), previous_run_states={"daily": S.FAILED})
    assert run.states() == {"check": "skipped", "daily": expected}


def test_task_instances_whose_task_left_the_dag_are_removed() -> None:
    status = DagRunStatus(
        state=DagRunState.RUNNING,
        start_date=START,
        task_instances={
            "gone": TaskInstanceStatus(state=S.RUNNING, try_number=1, pod_name="pod-gone"),
            "old": TaskInstanceStatus(state=S.SUCCESS, try_number=1),
        },
    )
    run = Run(make_dag({"kept": {}}), status=status)
    plan = run.step()
    assert run.states() == {"gone": "removed", "old": "removed", "kept": "queued"}
    assert plan.kills == ["pod-gone"]
    run.step(run.succeeded("kept"))
    assert run.status.state is DagRunState.SUCCESS


def test_a_removed_task_instance_comes_back_with_its_task() -> None:
    status = DagRunStatus(
        state=DagRunState.RUNNING,
        start_date=START,
        task_instances={"back": TaskInstanceStatus(state=S.REMOVED)},
    )
    run = Run(make_dag({"back": {}}), status=status)
    run.step()
    assert run.states() == {"back": "queued"}


def test_an_attempt_of_a_task_instance_marked_by_a_user_is_stopped() -> None:
    run = started(make_dag({"task": {}}))
    report = run.running("task")
    run.status = run.status.model_copy(
        update={"task_instances": {"task": run.ti("task").model_copy(update={"state": S.SUCCESS})}}
    )
    observed = plans.observe(run.status, {report.name: report}, [])  # as the reconciler gathers
    plan = run.step(**{"stray_attempts": observed.stray_attempts})
    assert plan.kills == [report.name]
    assert run.status.state is DagRunState.SUCCESS


def test_a_task_instance_cleared_while_running_is_stopped_and_run_again() -> None:
    run = started(make_dag({"task": {}}))
    report = run.running("task")
    run.status = run.status.model_copy(
        update={"task_instances": {"task": run.ti("task").model_copy(update={"state": S.RESTARTING})}}
    )
    plan = run.step(report)
    assert report.name in plan.kills
    assert [(launch.task_id, launch.try_number) for launch in plan.launches] == [("task", 2)]


def test_strays_are_cleaned_up() -> None:
    run = started(make_dag({"task": {}}))
    plan = run.step(stray_attempts=("old-pod",), stray_triggers=("old-trigger",))
    assert (plan.kills, plan.triggers_to_delete) == (["old-pod"], ["old-trigger"])


def test_a_pod_an_earlier_pass_launched_before_its_status_write_failed_is_this_launch_not_a_stray() -> None:
    """The pass that launched it failed to record it (a 504, a reset): the next pass finds that attempt
    alive, named for a try its status does not hold yet, and launches the same try again (the create
    is AlreadyExists). Killing it as a stray would fail the try it is (found by the fault proxy)."""
    dag = make_dag({"first": {}, "second": {"upstream": ["first"]}})
    run = started(dag)
    as_read = run.status.model_copy(deep=True)
    [launch] = run.step(run.succeeded("first")).launches  # this pass's status write is refused
    assert (launch.task_id, launch.try_number) == ("second", 1)
    run.status = as_read  # so the next pass reads what the failed one read, and finds its pod alive
    again = run.step(run.succeeded("first"), stray_attempts=(launch.attempt_name,))
    assert [a.attempt_name for a in again.launches] == [launch.attempt_name]
    assert again.kills == []
    control = run.step(stray_attempts=("an-old-pod",))  # a real stray still is killed
    assert control.kills == ["an-old-pod"]


def test_a_finished_run_changes_nothing() -> None:
    run = started(make_dag({"task": {}}))
    run.step(run.succeeded("task"))
    status = run.status
    run.wait(timedelta(days=1))
    plan = run.step(run.succeeded("task"))
    assert (plan.status, plan.events, plan.launches, plan.wake_at) == (status, [], [], None)


def _all_states(plans: Iterable[RunPlan]) -> list[str]:
    return [event.reason for plan in plans for event in plan.events]


def test_every_state_change_is_one_event_with_its_reason() -> None:
    run = Run(make_dag({"a": {}, "b": {"upstream": ["a"]}}))
    run.step()
    run.step(run.running("a"))
    run.step(run.failed("a"))
    assert _all_states(run.plans) == [
        "RunStarted",
        "TaskQueued",
        "TaskRunning",
        "TaskFailed",
        "TaskUpstreamFailed",
        "RunFailed",
    ]
    upstream_failed = run.plans[-1].events[1]
    assert upstream_failed.message.startswith(
        "Task b (none -> upstream_failed): Task's trigger rule 'all_success'"
    )
    assert upstream_failed.warning


# ----------------------------------------------------------------------------------- properties


@st.composite
def random_dags(draw: st.DrawFn) -> ResolvedDag:
    tasks: dict[str, dict[str, Any]] = {}
    for i in range(draw(st.integers(1, 6))):
        earlier = [f"t{j}" for j in range(i)]
        tasks[f"t{i}"] = {
            "upstream": draw(st.lists(st.sampled_from(earlier), unique=True, max_size=3)) if earlier else [],
            "trigger_rule": draw(st.sampled_from(TriggerRule)),
            "retries": draw(st.integers(0, 2)),
            "retry_delay": draw(st.sampled_from([timedelta(0), timedelta(minutes=1)])),
            "retry_exponential_backoff": draw(st.booleans()),
            "operator": draw(st.sampled_from(["BashOperator", "EmptyOperator", "LatestOnlyOperator", None])),
            "execution_timeout": draw(st.sampled_from([None, timedelta(minutes=3)])),
            "depends_on_past": draw(st.booleans()),
            "weight_rule": draw(st.sampled_from(WeightRule)),
        }
    return make_dag(
        tasks,
        max_active_tasks=draw(st.integers(1, 4)),
        dagrun_timeout=draw(st.sampled_from([None, timedelta(minutes=40)])),
    )


@st.composite
def random_results(draw: st.DrawFn, run: Run, task_id: str) -> TaskResult | None:
    kind = draw(
        st.sampled_from(
            [
                "none",
                "success",
                "branch",
                "short",
                "skipped",
                "failed",
                "no_retry",
                "deferred",
                "deferred",
                "deferred",
                "reschedule",
            ]
        )
    )
    downstream = sorted(run.dag.tasks[task_id].downstream)
    if kind == "none":
        return None
    if kind == "branch":
        follow = draw(st.lists(st.sampled_from(downstream), unique=True)) if downstream else []
        return TaskResult(outcome=TaskOutcome.SUCCESS, follow_task_ids=follow)
    if kind == "short":
        return TaskResult(outcome=TaskOutcome.SUCCESS, skip_all_downstream=True)
    if kind == "deferred":
        timeout = draw(st.sampled_from([None, 60.0, 600.0]))
        return TaskResult(
            outcome=TaskOutcome.DEFERRED,
            deferral=DeferralRequest(
                trigger_classpath="zonda.triggers.DateTimeTrigger", timeout_seconds=timeout
            ),
        )
    if kind == "reschedule":
        minutes = draw(st.integers(0, 5))
        return TaskResult(outcome=TaskOutcome.RESCHEDULE, reschedule_at=run.now + timedelta(minutes=minutes))
    outcome = {
        "success": TaskOutcome.SUCCESS,
        "skipped": TaskOutcome.SKIPPED,
        "failed": TaskOutcome.FAILED,
        "no_retry": TaskOutcome.FAILED_NO_RETRY,
    }[kind]
    return TaskResult(outcome=outcome)


@st.composite
def random_reports(draw: st.DrawFn, run: Run) -> list[ObservedAttempt | ObservedTrigger]:
    """What executors and the triggerer might report of the run's live task instances."""
    reports: list[ObservedAttempt | ObservedTrigger] = []
    for task_id, ti in run.status.task_instances.items():
        if ti.state in (S.QUEUED, S.RUNNING):
            phase = draw(
                st.sampled_from([None, *AttemptPhase, AttemptPhase.SUCCEEDED, AttemptPhase.SUCCEEDED])
            )
            if phase is None:
                continue
            result = draw(random_results(run, task_id)) if phase is AttemptPhase.SUCCEEDED else None
            exit_code = draw(st.sampled_from([1, 99])) if phase is AttemptPhase.FAILED else None
            reports.append(run.attempt(task_id, phase, result, exit_code=exit_code))
        elif ti.state is S.DEFERRED:
            kind = draw(st.sampled_from(["none", "pending", "fired", "failed"]))
            if kind != "none":
                reports.append(
                    run.trigger(task_id, fired=kind == "fired", failed=kind == "failed", event={"n": 1})
                )
    return reports


def _reachable(start: TaskInstanceState) -> set[TaskInstanceState]:
    seen, pending = {start}, [start]
    while pending:
        for target in allowed_targets(pending.pop()):
            if target not in seen:
                seen.add(target)
                pending.append(target)
    return seen


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dag=random_dags(), run_type=st.sampled_from(RunType), data=st.data())
def test_random_runs_make_only_legal_moves_and_every_pass_is_idempotent(
    dag: ResolvedDag, run_type: RunType, data: st.DataObject
) -> None:
    run = Run(dag, run_type=run_type)
    previous = data.draw(
        st.one_of(st.none(), st.dictionaries(st.sampled_from(sorted(dag.tasks)), st.sampled_from(S)))
    )
    for _ in range(data.draw(st.integers(1, 15))):
        run.wait(timedelta(minutes=data.draw(st.integers(0, 10))))
        before = run.status
        running_elsewhere = data.draw(st.integers(0, 2))
        # decide checks every move it makes with check_transition: an illegal one raises here.
        plan = run.step(
            *data.draw(random_reports(run)),
            running_in_dag=running_elsewhere,
            previous_run_states=previous,
            latest_window=NEXT_INTERVAL,
        )
        for task_id, ti in plan.status.task_instances.items():
            old = before.task_instances.get(task_id, TaskInstanceStatus()).state
            assert ti.state in _reachable(old), (task_id, old, ti.state)
        active = sum(1 for ti in plan.status.task_instances.values() if ti.state in (S.QUEUED, S.RUNNING))
        if plan.launches:
            assert active <= dag.spec.max_active_tasks - running_elsewhere
        if plan.status.state in (DagRunState.SUCCESS, DagRunState.FAILED):
            finished = [ti.state in FINISHED_TI_STATES for ti in plan.status.task_instances.values()]
            assert all(finished), run.states()
        again = decide(
            dag,
            run_name=RUN_NAME,
            run_type=run_type,
            status=plan.status,
            observed=run.last_observation,
            now=run.now,
        )
        assert (again.status, again.launches, again.events) == (plan.status, [], [])
    names = [launch.attempt_name for plan in run.plans for launch in plan.launches]
    assert len(names) == len(set(names)), "every attempt has a name of its own"


# ------------------------------------------------------------------ pending timeout (Airflow #15218)

NEVER_PULL = 'ErrImageNeverPull: Container image "missing:1" is not present with pull policy of Never'


def pending(run: Run, task_id: str) -> ObservedAttempt:
    """The current attempt's pod, Pending since its launch, with the kubelet's waiting reason."""
    ti = run.ti(task_id)
    return dataclasses.replace(
        run.attempt(task_id, AttemptPhase.PENDING, message=NEVER_PULL), pending_since=ti.queued_at
    )


def test_a_pod_pending_past_the_timeout_fails_its_try_with_the_kubelets_reason_and_retries() -> None:
    run = started(make_dag({"task": {"retries": 1, "retry_delay": timedelta(seconds=30)}}))
    run.pending_timeout = timedelta(seconds=300)
    first_pod = run.ti("task").pod_name
    plan = run.step(pending(run, "task"), after=timedelta(seconds=300))
    ti = run.ti("task")
    assert ti.state is S.UP_FOR_RETRY
    assert "still Pending after the pending timeout of 5m" in (ti.reason or "")
    assert "ErrImageNeverPull" in (ti.reason or "") and ti.message == NEVER_PULL
    assert plan.kills == [first_pod], "the executor deletes the pod that never started"
    assert event_reasons(plan) == ["TaskUpForRetry"]
    plan = run.step(after=timedelta(seconds=30))
    assert run.ti("task").state is S.QUEUED and run.ti("task").try_number == 2
    assert run.ti("task").pod_name != first_pod and plan.launches


def test_a_pod_pending_within_the_timeout_stays_queued_and_the_run_wakes_at_the_timeout() -> None:
    run = started(make_dag({"task": {"retries": 1}}))
    run.pending_timeout = timedelta(seconds=300)
    queued_at = run.ti("task").queued_at
    assert queued_at is not None
    plan = run.step(pending(run, "task"), after=timedelta(seconds=299))
    assert run.states() == {"task": "queued"} and plan.kills == []
    assert plan.wake_at == queued_at + timedelta(seconds=300)


def test_without_a_pending_timeout_a_pending_pod_waits_forever() -> None:
    run = started(make_dag({"task": {"retries": 1}}))
    plan = run.step(pending(run, "task"), after=timedelta(days=1))
    assert run.states() == {"task": "queued"} and plan.kills == [] and plan.wake_at is None


def test_a_pending_timeout_on_the_last_try_fails_the_task_and_the_run() -> None:
    run = started(make_dag({"task": {}}))
    run.pending_timeout = timedelta(seconds=5)
    run.step(pending(run, "task"), after=timedelta(seconds=6))
    assert run.states() == {"task": "failed"}
    assert "try 1 of 1" in (run.ti("task").reason or "")
    assert run.status.state is DagRunState.FAILED


def test_a_running_attempt_is_never_failed_by_the_pending_timeout() -> None:
    run = started(make_dag({"task": {"retries": 1}}))
    run.pending_timeout = timedelta(seconds=5)
    run.step(run.running("task"), after=timedelta(seconds=60))
    assert run.states() == {"task": "running"}
