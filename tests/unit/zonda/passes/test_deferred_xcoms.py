"""XComs a try pushes before it defers or reschedules, as Airflow keeps them (pure decide core).

Airflow writes an XCom row at `xcom_push` and deletes a task instance's rows when a try starts that
does not resume a deferral (`if not self.next_method: self.clear_xcom_data()` in Airflow 2.x's
`_execute_task_with_callbacks`): a deferral's pushes reach the resumed try and downstream tasks, a
reschedule's last only until the next poke. Zonda also drops them when the task instance is cleared.
"""

from __future__ import annotations

from datetime import timedelta

from tests.unit.pure_runs import Run, make_dag, started
from zonda.actions import clear_and_mark
from zonda.passes.decisions import AttemptPhase, ObservedAttempt
from zonda.resources.dagrun_models import DagRunSpec
from zonda.resources.invocations import DeferralRequest, TaskInvocation, TaskOutcome
from zonda.resources.models import TaskInstanceState, TriggerRule
from zonda.specs.dags import ResolvedTask
from zonda.tries import invocation_builder, xcoms

S = TaskInstanceState
STORED = xcoms.stored_reference("xcomchunks://team-a/etl-20240101-abc?chunks=1", 5000)


def deferred(run: Run, task_id: str, **result: object) -> ObservedAttempt:
    """The task's attempt deferred to a DateTimeTrigger, reporting what it pushed."""
    deferral = DeferralRequest(
        trigger_classpath="zonda.triggers.DateTimeTrigger", method_name="execute_complete"
    )
    return run.succeeded(task_id, outcome=TaskOutcome.DEFERRED, deferral=deferral, **result)


def rescheduled(run: Run, task_id: str, **result: object) -> ObservedAttempt:
    return run.succeeded(
        task_id, outcome=TaskOutcome.RESCHEDULE, reschedule_at=run.now + timedelta(minutes=1), **result
    )


def invocation_of(run: Run, task_id: str) -> TaskInvocation:
    """What the controller hands the runner for the task's current try (as the executors build it)."""
    task: ResolvedTask = run.dag.tasks[task_id]
    return invocation_builder.task_invocation(
        run_name="etl-20240101", spec=DagRunSpec(dag_name="etl"), status=run.status, dag_spec=run.dag.spec,
        task=task, try_number=run.ti(task_id).try_number,
    )  # fmt: skip


def resumed(run: Run, task_id: str) -> None:
    """The trigger fires and the resumed attempt is launched."""
    run.step(run.trigger(task_id, fired=True, event={"ok": True}))
    assert run.ti(task_id).state is S.QUEUED and run.ti(task_id).next_method == "execute_complete"


def test_pushes_before_a_deferral_reach_the_resumed_try_and_join_its_own_later_ones_winning() -> None:
    run = started(make_dag({"wait": {}, "load": {"upstream": ["wait"]}}))
    run.step(deferred(run, "wait", xcoms={"run_id": "child-1", "shared": "before", "big": STORED,
                                          "rows": [1, 2]}, xcom_lengths={"rows": 2}))  # fmt: skip
    ti = run.ti("wait")
    assert ti.state is S.DEFERRED
    assert ti.xcoms == {"run_id": "child-1", "shared": "before", "big": STORED, "rows": [1, 2]}
    assert ti.xcom_lengths == {"rows": 2}

    resumed(run, "wait")
    pulled = invocation_of(run, "wait")
    assert pulled.next_method == "execute_complete"
    assert pulled.keyed_xcoms["wait"] == {"run_id": "child-1", "shared": "before", "big": STORED,
                                          "rows": [1, 2]}  # fmt: skip

    run.step(run.succeeded("wait", xcom="done", xcoms={"shared": "after", "rows": "no longer a list"},
                           xcom_lengths={}))  # fmt: skip
    ti = run.ti("wait")
    assert ti.state is S.SUCCESS and ti.try_number == 1
    assert (ti.xcom, ti.xcoms) == ("done", {"run_id": "child-1", "shared": "after", "big": STORED,
                                            "rows": "no longer a list"})  # fmt: skip
    assert ti.xcom_lengths is None, "a key pushed again loses its earlier value's length"
    downstream = invocation_of(run, "load")
    assert downstream.xcoms == {"wait": "done"}
    assert downstream.keyed_xcoms["wait"]["run_id"] == "child-1"


def test_a_deferred_tasks_pushes_are_visible_while_it_waits_and_survive_several_deferrals() -> None:
    run = started(make_dag({"wait": {}, "other": {}}))
    run.step(deferred(run, "wait", xcoms={"first": 1}), run.running("other"))
    assert invocation_of(run, "other").keyed_xcoms == {"wait": {"first": 1}}, "as Airflow's table holds it"
    resumed(run, "wait")
    run.step(deferred(run, "wait", xcoms={"second": 2}))
    resumed(run, "wait")
    run.step(run.succeeded("wait"))
    assert run.ti("wait").xcoms == {"first": 1, "second": 2}
    assert run.ti("wait").deferral_count == 2


def test_a_retry_after_a_deferral_starts_without_the_failed_trys_pushes() -> None:
    run = started(make_dag({"wait": {"retries": 1, "retry_delay": timedelta(0)}}))
    run.step(deferred(run, "wait", xcoms={"k": "try 1"}))
    run.step(run.trigger("wait", failed=True, message="boom"))
    ti = run.ti("wait")
    assert (ti.state, ti.try_number, ti.xcoms) == (S.QUEUED, 2, None), "a new try clears them (Airflow)"
    run.step(run.succeeded("wait", xcoms={"other": 1}))
    assert run.ti("wait").xcoms == {"other": 1}


def test_a_trigger_failure_without_retries_keeps_the_pushes_made_before_deferring() -> None:
    """Airflow deletes a task instance's XComs only when a new try starts: a failed one keeps them,
    for a downstream task with `all_done` to pull."""
    report = {"upstream": ["wait"], "trigger_rule": TriggerRule.ALL_DONE}
    run = started(make_dag({"wait": {}, "report": report}))
    run.step(deferred(run, "wait", xcoms={"k": "v"}))
    run.step(run.trigger("wait", failed=True))
    assert run.ti("wait").state is S.FAILED and run.ti("report").state is S.QUEUED
    assert invocation_of(run, "report").keyed_xcoms == {"wait": {"k": "v"}}


def test_a_reschedule_keeps_a_pokes_pushes_only_until_the_next_poke_starts() -> None:
    run = started(make_dag({"sensor": {"operator": "zonda.sensors.FileSensor"}}))
    run.step(rescheduled(run, "sensor", xcoms={"poke": 1, "first_only": True}))
    assert run.ti("sensor").state is S.UP_FOR_RESCHEDULE
    assert run.ti("sensor").xcoms == {"poke": 1, "first_only": True}
    run.step(after=timedelta(minutes=1))
    ti = run.ti("sensor")
    assert (ti.state, ti.try_number, ti.xcoms) == (S.QUEUED, 1, None), "Airflow clears them as a poke starts"
    assert "sensor" not in invocation_of(run, "sensor").keyed_xcoms
    run.step(run.succeeded("sensor", xcoms={"poke": 2}))
    assert run.ti("sensor").xcoms == {"poke": 2}


def test_clearing_a_task_instance_drops_its_xcoms() -> None:
    run = started(make_dag({"wait": {}, "load": {"upstream": ["wait"]}}))
    run.step(deferred(run, "wait", xcoms={"k": "v"}, xcom_lengths={"k": 1}))
    resumed(run, "wait")
    run.step(run.succeeded("wait", xcom=[1, 2], xcom_lengths={"return_value": 2}))
    run.step(run.succeeded("load"))
    cleared = clear_and_mark.clear(run.dag, run.status, task_ids=["wait"], now=run.now)
    ti = cleared.status.task_instances["wait"]
    assert (ti.state, ti.xcom, ti.xcoms, ti.xcom_lengths) == (S.NONE, None, None, None)


def test_clearing_a_deferred_task_instance_drops_its_xcoms_once_its_trigger_is_stopped() -> None:
    run = started(make_dag({"wait": {}}))
    run.step(deferred(run, "wait", xcoms={"k": "v"}))
    trigger = run.trigger("wait")
    run.status = clear_and_mark.clear(run.dag, run.status, task_ids=["wait"], now=run.now).status
    assert run.ti("wait").state is S.RESTARTING
    plan = run.step(trigger)
    assert trigger.name in plan.triggers_to_delete
    assert (run.ti("wait").state, run.ti("wait").try_number, run.ti("wait").xcoms) == (S.QUEUED, 2, None)


def test_a_deferral_reported_twice_is_applied_once() -> None:
    run = started(make_dag({"wait": {}}))
    report = deferred(run, "wait", xcoms={"k": "v"})
    run.step(report)
    first = run.status
    run.step(report)
    assert run.status == first


def test_merge_pushes_later_keys_win_and_lengths_follow_their_values() -> None:
    assert xcoms.merge_pushes(None, None, {}, {}) == (None, None)
    assert xcoms.merge_pushes({"a": [1], "b": 2}, {"a": 1}, {"a": "x", "c": [1, 2]}, {"c": 2}) == (
        {"a": "x", "b": 2, "c": [1, 2]},
        {"c": 2},
    )
    assert xcoms.merge_pushes({"a": [1]}, {"a": 1}, {}, {"return_value": 3}) == (
        {"a": [1]},
        {"a": 1, "return_value": 3},
    )


def test_a_container_tasks_resumed_result_without_xcoms_keeps_the_deferrals() -> None:
    run = started(make_dag({"wait": {}}))
    run.step(deferred(run, "wait", xcoms={"k": "v"}))
    resumed(run, "wait")
    run.step(run.attempt("wait", AttemptPhase.SUCCEEDED, None, exit_code=0))
    assert run.ti("wait").xcoms == {"k": "v"}
