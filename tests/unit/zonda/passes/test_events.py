"""`zonda.passes.events`: which RunEvents become Kubernetes Events, and the state changes the log records."""

from __future__ import annotations

from tests.unit.pure_runs import make_dag, started
from zonda.passes.events import events_to_post, state_changes
from zonda.resources.dagrun_models import DagRunStatus, TaskInstanceStatus
from zonda.resources.models import DagRunState, TaskInstanceState
from zonda.resources.run_events import RunEvent

S = TaskInstanceState


def reasons(events: list[RunEvent]) -> list[str]:
    return [event.reason for event in events]


def test_the_first_pass_posts_the_run_start_only() -> None:
    run = started(make_dag({"a": {}, "b": {}}))
    assert reasons(run.plans[0].events) == ["RunStarted", "TaskQueued", "TaskQueued"]
    assert reasons(events_to_post(run.plans[0].events)) == ["RunStarted"]


def test_a_pod_seen_running_posts_nothing() -> None:
    run = started(make_dag({"a": {}}))
    plan = run.step(run.running("a"))
    assert reasons(plan.events) == ["TaskRunning"]
    assert events_to_post(plan.events) == []


def test_a_chain_step_folds_the_success_and_the_next_launch_into_one_event() -> None:
    run = started(make_dag({"a": {}, "b": {"upstream": ["a"]}}))
    plan = run.step(run.succeeded("a"))
    posted = events_to_post(plan.events)
    assert reasons(posted) == ["TaskSucceeded"]
    assert "Task a (queued -> success)" in posted[0].message
    assert "Task b (scheduled -> queued)" in posted[0].message


def test_a_single_outcome_is_posted_as_decide_wrote_it() -> None:
    run = started(make_dag({"a": {}, "b": {}}))
    plan = run.step(run.succeeded("a"), run.running("b"))
    posted = events_to_post(plan.events)
    assert reasons(posted) == ["TaskSucceeded"]
    assert "Task b" in posted[0].message  # the progress of the pass is folded in


def test_warnings_and_the_run_outcome_each_get_their_own_event_in_reading_order() -> None:
    run = started(make_dag({"a": {}, "b": {"upstream": ["a"]}, "c": {}}))
    plan = run.step(run.failed("a"), run.succeeded("c"))
    assert reasons(events_to_post(plan.events)) == [
        "TaskFailed",
        "TaskUpstreamFailed",
        "TaskSucceeded",
        "RunFailed",
    ]


def test_the_weightiest_outcome_names_the_aggregate() -> None:
    events = [
        RunEvent("TaskSucceeded", "Task a (running -> success)"),
        RunEvent("TaskDeferred", "Task b (running -> deferred)"),
        RunEvent("TaskQueued", "Task c (scheduled -> queued)"),
    ]
    posted = events_to_post(events)
    assert reasons(posted) == ["TaskDeferred"]
    assert posted[0].message.count("Task ") == 3


def test_state_changes_list_the_run_then_its_task_instances() -> None:
    old = DagRunStatus(state=DagRunState.QUEUED, task_instances={"a": TaskInstanceStatus()})
    new = DagRunStatus(
        state=DagRunState.RUNNING,
        task_instances={
            "a": TaskInstanceStatus(state=S.QUEUED, try_number=1, reason="Queued try 1"),
            "b": TaskInstanceStatus(),  # created: not a change the log records
        },
    )
    changes = state_changes(old, new)
    assert [(c.task, c.old, c.new) for c in changes] == [
        (None, "queued", "running"),
        ("a", "none", "queued"),
    ]
    assert (changes[1].try_number, changes[1].reason) == (1, "Queued try 1")
    assert state_changes(new, new) == []


def test_task_outcomes_fold_into_one_event_with_every_message_in_order_and_the_weightiest_reason() -> None:
    from zonda.passes.events import fits, fold, foldable

    succeeded = RunEvent("TaskSucceeded", "task a succeeded")
    skipped = RunEvent("TaskSkipped", "task b skipped")
    assert foldable(succeeded) and foldable(skipped)
    assert not foldable(RunEvent("TaskFailed", "task c failed", warning=True)), "a warning stands alone"
    assert not foldable(RunEvent("RunSucceeded", "done")), "the run's own story stands alone"
    assert fold([succeeded]) == succeeded
    assert fold([succeeded, skipped]) == RunEvent("TaskSkipped", "task a succeeded; task b skipped")
    long = RunEvent("TaskSucceeded", "x" * 600)
    assert fits([long], RunEvent("TaskSucceeded", "y" * 400))
    assert not fits([long], RunEvent("TaskSucceeded", "y" * 500)), "a full note starts the next Event"


def test_a_run_whose_whole_life_is_one_pass_posts_one_event_telling_it_all() -> None:
    one_pass = [
        RunEvent("RunStarted", "Run r started"),
        RunEvent("TaskQueued", "Task e (scheduled -> queued)"),
        RunEvent("TaskSucceeded", "Task e (queued -> success)"),
        RunEvent("RunSucceeded", "Run r succeeded"),
    ]
    assert events_to_post(one_pass) == [
        RunEvent(
            "RunSucceeded",
            "Run r started; Task e (scheduled -> queued); Task e (queued -> success); Run r succeeded",
        )
    ]
    failed = [*one_pass[:2], RunEvent("TaskFailed", "Task e failed", warning=True), one_pass[3]]
    assert reasons(events_to_post(failed)) == ["RunStarted", "TaskFailed", "RunSucceeded"], "a warning: apart"
