"""A try whose attempt exists but that no status records: an earlier pass launched it (pod or local
process, under its deterministic name) and the controller stopped before the status write.

The pass after it (`plans.observe` then `decide`, as the controller calls them) adopts that attempt
when it is the try it is about to launch (recorded as queued, or running or finished as reported, and
never created again), and otherwise stops it with an Event naming why.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from tests.unit.pure_runs import LOGICAL_DATE, RUN_NAME, START, make_dag
from zonda.passes import plans
from zonda.passes.decisions import AttemptPhase, ObservedAttempt, RunPlan
from zonda.passes.run_pass import decide
from zonda.resources.dagrun_models import DagRunStatus
from zonda.resources.invocations import TaskOutcome, TaskResult
from zonda.resources.models import DagRunState, TaskInstanceState
from zonda.resources.names import attempt_name
from zonda.resources.run_types import RunType

S = TaskInstanceState


def new_status() -> DagRunStatus:
    return DagRunStatus(
        state=DagRunState.QUEUED,
        logical_date=LOGICAL_DATE,
        data_interval_start=LOGICAL_DATE,
        data_interval_end=LOGICAL_DATE + timedelta(days=1),
    )


def one_pass(
    dag: Any, status: DagRunStatus, attempts: dict[str, ObservedAttempt], after: int = 0, **context: Any
) -> RunPlan:
    """A pass as the controller makes it: sort the executor's report, then decide."""
    observed = plans.observe(status, attempts, (), **context)
    return decide(
        dag,
        run_name=RUN_NAME,
        run_type=RunType.SCHEDULED,
        status=status,
        observed=observed,
        now=START + timedelta(seconds=after),
    )


def orphan(task_id: str, phase: AttemptPhase, try_number: int = 1, **fields: Any) -> ObservedAttempt:
    return ObservedAttempt(
        task_id=task_id,
        try_number=try_number,
        name=attempt_name(RUN_NAME, task_id, try_number),
        phase=phase,
        **fields,
    )


def by_name(*attempts: ObservedAttempt) -> dict[str, ObservedAttempt]:
    return {attempt.name: attempt for attempt in attempts}


def reasons(plan: RunPlan) -> list[str]:
    return [event.reason for event in plan.events]


CHAIN = {"extract": {}, "load": {"upstream": ["extract"]}}


def test_the_crashed_pass_launches_exactly_the_try_whose_attempt_is_then_found() -> None:
    """The premise: names are deterministic, so the pass after the crash computes the same name."""
    dag = make_dag(CHAIN)
    crashed = one_pass(dag, new_status(), {})
    assert [launch.attempt_name for launch in crashed.launches] == [attempt_name(RUN_NAME, "extract", 1)]


def test_a_running_orphan_that_is_the_try_to_launch_is_adopted_not_created_again() -> None:
    dag = make_dag(CHAIN)
    running = orphan("extract", AttemptPhase.RUNNING, started_at=START + timedelta(seconds=1))
    plan = one_pass(dag, new_status(), by_name(running), after=5)
    assert plan.launches == [], "nothing is created: the try exists"
    assert [a.attempt_name for a in plan.adoptions] == [running.name]
    assert plan.kills == []
    ti = plan.status.task_instances["extract"]
    assert (ti.state, ti.try_number, ti.pod_name) == (S.RUNNING, 1, running.name)
    assert ti.start_date == running.started_at and ti.queued_at == running.started_at
    adopted = next(e for e in plan.events if e.reason == "AttemptAdopted")
    assert running.name in adopted.message and not adopted.warning
    # The next pass with the same report is the usual one: the attempt is current, nothing new.
    again = one_pass(dag, plan.status, by_name(running), after=6)
    assert (again.launches, again.adoptions, again.kills) == ([], [], [])
    assert again.status.task_instances["extract"].state is S.RUNNING


def test_a_pending_orphan_is_queued_from_its_creation() -> None:
    dag = make_dag(CHAIN)
    pending = orphan("extract", AttemptPhase.PENDING, pending_since=START + timedelta(seconds=1))
    plan = one_pass(dag, new_status(), by_name(pending), after=5)
    ti = plan.status.task_instances["extract"]
    assert (ti.state, ti.pod_name, ti.queued_at) == (S.QUEUED, pending.name, pending.pending_since)
    assert plan.launches == [] and len(plan.adoptions) == 1


def test_an_orphan_that_already_succeeded_is_its_tries_result_and_its_downstream_launches() -> None:
    dag = make_dag(CHAIN)
    done = orphan(
        "extract",
        AttemptPhase.SUCCEEDED,
        result=TaskResult(outcome=TaskOutcome.SUCCESS, xcom=7),
        exit_code=0,
        started_at=START + timedelta(seconds=1),
        finished_at=START + timedelta(seconds=3),
    )
    plan = one_pass(dag, new_status(), by_name(done), after=10)
    extract = plan.status.task_instances["extract"]
    assert (extract.state, extract.try_number, extract.xcom) == (S.SUCCESS, 1, 7)
    assert extract.duration_seconds == 2.0
    assert [launch.attempt_name for launch in plan.launches] == [attempt_name(RUN_NAME, "load", 1)]
    assert plan.status.task_instances["load"].state is S.QUEUED


def test_an_orphan_that_failed_counts_as_its_try_and_the_retry_is_the_next_try() -> None:
    dag = make_dag({"extract": {"retries": 1}})
    failed = orphan("extract", AttemptPhase.FAILED, exit_code=1, finished_at=START + timedelta(seconds=2))
    plan = one_pass(dag, new_status(), by_name(failed), after=10)
    ti = plan.status.task_instances["extract"]
    assert (ti.state, ti.try_number) == (S.UP_FOR_RETRY, 1)
    assert plan.launches == [] and plan.kills == []


def test_an_attempt_reported_missing_is_launched_not_adopted() -> None:
    """A local try accepted but never started (the crash came mid-launch): launching completes it."""
    dag = make_dag(CHAIN)
    missing = orphan("extract", AttemptPhase.MISSING, message="accepted but never started")
    plan = one_pass(dag, new_status(), by_name(missing), after=5)
    assert [launch.attempt_name for launch in plan.launches] == [missing.name]
    assert plan.adoptions == []


def test_an_orphan_over_the_dags_limit_is_adopted_it_holds_its_slot_already() -> None:
    """The crashed pass had the DAG's one slot; now another run holds it too. The attempt exists, so
    stopping it would only start the same try again later under the same name (two pods for one try):
    it is adopted, as Airflow's `adopt_or_reset_orphaned_tasks` adopts a running pod whatever the
    pools say."""
    dag = make_dag({"a": {}}, max_active_tasks=1)
    running = orphan("a", AttemptPhase.RUNNING)
    plan = one_pass(dag, new_status(), by_name(running), after=5, running_in_dag=1)
    assert plan.launches == [] and plan.kills == []
    assert [a.attempt_name for a in plan.adoptions] == [running.name]
    ti = plan.status.task_instances["a"]
    assert (ti.state, ti.pod_name) == (S.RUNNING, running.name)
    assert "OrphanedAttemptStopped" not in reasons(plan)


def test_an_orphan_of_a_task_marked_meanwhile_is_stopped_naming_the_mark() -> None:
    dag = make_dag(CHAIN)
    marked = new_status().model_copy(
        update={
            "task_instances": {
                **one_pass(dag, new_status(), {}).status.task_instances,
            }
        }
    )
    # a user marked extract success while the controller was down (its pod name never recorded)
    tis = dict(marked.task_instances)
    tis["extract"] = tis["extract"].model_copy(
        update={"state": S.SUCCESS, "pod_name": None, "reason": "marked success by alice"}
    )
    status = marked.model_copy(update={"task_instances": tis, "state": DagRunState.RUNNING})
    running = orphan("extract", AttemptPhase.RUNNING)
    plan = one_pass(dag, status, by_name(running), after=5)
    assert plan.kills == [running.name] and plan.adoptions == []
    [event] = [e for e in plan.events if e.reason == "OrphanedAttemptStopped"]
    assert "task instance extract is success (marked success by alice)" in event.message


def test_a_recorded_attempt_its_task_instance_moved_on_from_is_stopped_as_a_stray() -> None:
    dag = make_dag(CHAIN)
    first = one_pass(dag, new_status(), {})
    name = first.launches[0].attempt_name
    tis = dict(first.status.task_instances)
    tis["extract"] = tis["extract"].model_copy(update={"state": S.SUCCESS, "reason": "marked success"})
    status = first.status.model_copy(update={"task_instances": tis})
    plan = one_pass(dag, status, by_name(orphan("extract", AttemptPhase.RUNNING)), after=5)
    assert plan.kills == [name]
    [event] = [e for e in plan.events if e.reason == "StrayAttemptStopped"]
    assert "task instance extract is success (marked success)" in event.message


def test_finished_attempts_nobody_records_are_left_alone() -> None:
    """Only live attempts are stopped; a finished earlier try's pod is history, not a stray."""
    dag = make_dag(CHAIN)
    first = one_pass(dag, new_status(), {})
    tis = dict(first.status.task_instances)
    tis["extract"] = tis["extract"].model_copy(update={"state": S.SUCCESS})
    status = first.status.model_copy(update={"task_instances": tis})
    old = orphan("extract", AttemptPhase.SUCCEEDED, exit_code=0)
    plan = one_pass(dag, status, by_name(old), after=5)
    assert plan.kills == [] and "OrphanedAttemptStopped" not in reasons(plan)


def test_an_orphan_is_adopted_even_when_admission_would_not_let_its_try_start_now() -> None:
    """Found by the fault suite (tests/cluster/test_faults.py, `proxy`, the mixed workload's Pool): a
    pass launched a pooled try and its status write was lost; the next pass found the Pool full (the
    slot the orphan holds is not in any status yet), did not launch that try, and so stopped its
    attempt as an orphan, then created it again under the same name once a slot was free: one try,
    two pods. An attempt that exists holds its slot already: it is adopted, and the limit applies to
    the task instances that have no attempt yet."""
    dag = make_dag({"first": {}, "second": {}}, max_active_tasks=1)
    running = orphan("second", AttemptPhase.RUNNING, started_at=START + timedelta(seconds=1))
    plan = one_pass(dag, new_status(), by_name(running), after=5)
    assert plan.kills == [], "the attempt that exists is not stopped"
    assert [a.attempt_name for a in plan.adoptions] == [running.name]
    assert plan.launches == [], "the slot is the orphan's: nothing else starts"
    tis = plan.status.task_instances
    assert (tis["second"].state, tis["second"].pod_name) == (S.RUNNING, running.name)
    assert tis["first"].state is S.SCHEDULED
    assert "OrphanedAttemptStopped" not in reasons(plan)


def _up_for_retry(dag: Any) -> DagRunStatus:
    """extract's try 1 launched (at 0 s), failed at 9 s: up for retry at 69 s (retry_delay 1 min)."""
    first = one_pass(dag, new_status(), {})
    failed = orphan("extract", AttemptPhase.FAILED, exit_code=1, finished_at=START + timedelta(seconds=9))
    plan = one_pass(dag, first.status, by_name(failed), after=10)
    ti = plan.status.task_instances["extract"]
    assert (ti.state, ti.try_number, ti.next_try_at) == (S.UP_FOR_RETRY, 1, START + timedelta(seconds=69))
    return plan.status


def test_the_orphan_of_a_retry_this_passs_clock_says_is_not_due_yet_is_adopted_not_stopped() -> None:
    """Found by the audited mixed fault run (a `clock-jump` back, then `status-too-large`): a pass whose
    clock said the retry was due launched try 2 and its status write was refused; the next pass's
    clock (stepped back) said the retry was not due, so it stopped try 2 as an orphan. Try tracking
    held its pod and a later pass adopted it as failed: try 3 ran, a try charged that no fault ended
    ("try 3, expected 2"). The try runs: it is adopted, as Airflow adopts a running task instance."""
    dag = make_dag({"extract": {"retries": 3, "retry_delay": timedelta(minutes=1)}})
    status = _up_for_retry(dag)
    # positive control: without the orphan, the retry waits for its time
    waiting = one_pass(dag, status, {}, after=20)
    assert waiting.status.task_instances["extract"].state is S.UP_FOR_RETRY
    assert waiting.launches == [] and waiting.adoptions == []
    running = orphan("extract", AttemptPhase.RUNNING, try_number=2, started_at=START + timedelta(seconds=80))
    plan = one_pass(dag, status, by_name(running), after=20)  # the clock stepped back: 20 s < 69 s
    assert plan.kills == [], "the try that runs is not stopped"
    assert "OrphanedAttemptStopped" not in reasons(plan)
    assert plan.launches == [] and [a.attempt_name for a in plan.adoptions] == [running.name]
    ti = plan.status.task_instances["extract"]
    assert (ti.state, ti.try_number, ti.pod_name) == (S.RUNNING, 2, running.name)


def test_the_orphan_of_a_reschedule_not_due_by_this_clock_is_adopted_too() -> None:
    dag = make_dag({"poke": {"retries": 0}})
    first = one_pass(dag, new_status(), {})
    rescheduled = orphan(
        "poke",
        AttemptPhase.SUCCEEDED,
        result=TaskResult(outcome=TaskOutcome.RESCHEDULE, reschedule_at=START + timedelta(seconds=60)),
        exit_code=0,
        started_at=START + timedelta(seconds=1),
        finished_at=START + timedelta(seconds=2),
    )
    status = one_pass(dag, first.status, by_name(rescheduled), after=3).status
    ti = status.task_instances["poke"]
    assert ti.state is S.UP_FOR_RESCHEDULE and ti.next_try_at == START + timedelta(seconds=60)
    name = attempt_name(RUN_NAME, f"poke~{ti.pod_name}", ti.try_number)
    poke = ObservedAttempt(task_id="poke", try_number=1, name=name, phase=AttemptPhase.RUNNING)
    plan = one_pass(dag, status, by_name(poke), after=10)
    assert plan.kills == [] and [a.attempt_name for a in plan.adoptions] == [name]
    assert plan.status.task_instances["poke"].state is S.RUNNING
