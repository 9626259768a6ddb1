"""Task-instance times come from the runner's own clock (sub-second), never before the try was queued.

A pod's status says when its container started and finished in whole seconds, truncated: durations
read 0 or 1 s and a start can precede the instance's queued time. The runner reports its own start
and end in its `TaskResult`; the executors prefer them, and `decide` never dates a start before the
queueing.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from controller.executors import pods
from tests.unit.pure_runs import Run, make_dag, started
from zonda.passes.decisions import AttemptPhase, ObservedAttempt
from zonda.resources.invocations import TaskOutcome, TaskResult
from zonda.resources.models import TaskInstanceState

MS = timedelta(milliseconds=1)


def whole_second(moment: Any) -> str:
    return moment.replace(microsecond=0).isoformat().replace("+00:00", "Z")


def finished_pod(started_at: Any, finished_at: Any, result: TaskResult | None) -> dict[str, Any]:
    terminated: dict[str, Any] = {
        "exitCode": 0,
        "reason": "Completed",
        "startedAt": whole_second(started_at),
        "finishedAt": whole_second(finished_at),
    }
    if result is not None:
        terminated["message"] = result.encode().decode()
    return {
        "metadata": {"name": "pod"},
        "status": {
            "phase": "Succeeded",
            "startTime": whole_second(started_at),
            "containerStatuses": [{"name": pods.BASE_CONTAINER, "state": {"terminated": terminated}}],
        },
    }


def test_a_pods_times_are_the_runners_own_when_it_reported_them() -> None:
    run = started(make_dag({"t": {}}))
    queued = run.ti("t").queued_at
    assert queued is not None
    began, ended = queued + 250 * MS, queued + 370 * MS
    result = TaskResult(outcome=TaskOutcome.SUCCESS, started_at=began, ended_at=ended)
    observed = pods.observe_pod(finished_pod(began, ended, result), task_id="t", try_number=1)
    assert (observed.started_at, observed.finished_at) == (began, ended)
    without = pods.observe_pod(finished_pod(began, ended, None), task_id="t", try_number=1)
    assert without.started_at == began.replace(microsecond=0), "no result: the pod's whole seconds"


def test_a_task_instance_keeps_sub_second_times_from_its_attempt() -> None:
    run = started(make_dag({"t": {}}))
    ti = run.ti("t")
    assert ti.queued_at is not None and ti.pod_name is not None
    began, ended = ti.queued_at + 120 * MS, ti.queued_at + 450 * MS
    pod_start = began.replace(microsecond=0) + timedelta(seconds=1)  # a pod's own, later, whole second
    running = ObservedAttempt(
        task_id="t",
        try_number=ti.try_number,
        name=ti.pod_name,
        phase=AttemptPhase.RUNNING,
        started_at=pod_start,
    )
    run.step(running)
    assert run.ti("t").start_date == pod_start, "while it runs, the pod's start is all there is"
    run.step(
        ObservedAttempt(
            task_id="t",
            try_number=ti.try_number,
            name=ti.pod_name,
            phase=AttemptPhase.SUCCEEDED,
            result=TaskResult(outcome=TaskOutcome.SUCCESS),
            exit_code=0,
            started_at=began,
            finished_at=ended,
        ),
        after=timedelta(seconds=1),
    )
    done = run.ti("t")
    assert done.state is TaskInstanceState.SUCCESS
    assert (done.start_date, done.end_date) == (began, ended)
    assert done.duration_seconds is not None and abs(done.duration_seconds - 0.33) < 1e-6


def queued_within_a_second() -> tuple[Run, datetime, str]:
    """A run whose task was queued at .700 of a second: its pod's whole-second times truncate to .000.
    The run, the queued time and the pod's name."""
    run = Run(make_dag({"t": {}}))
    run.now = run.now + 700 * MS
    run.step()
    ti = run.ti("t")
    assert ti.queued_at is not None and ti.pod_name is not None
    return run, ti.queued_at, str(ti.pod_name)


def pod_ended(pod: str, phase: AttemptPhase, started_at: datetime, finished_at: datetime) -> ObservedAttempt:
    """The pod's report of its end, in its own whole seconds (no runner's result)."""
    code = 0 if phase is AttemptPhase.SUCCEEDED else 1
    return ObservedAttempt("t", 1, pod, phase, exit_code=code, started_at=started_at, finished_at=finished_at)


def test_a_start_in_whole_seconds_is_never_before_the_queued_time() -> None:
    run, queued, pod = queued_within_a_second()
    truncated = queued.replace(microsecond=0)
    running = ObservedAttempt(
        task_id="t", try_number=1, name=pod, phase=AttemptPhase.RUNNING, started_at=truncated
    )
    run.step(running, after=timedelta(seconds=1))
    assert run.ti("t").start_date == queued
    run.step(
        pod_ended(pod, AttemptPhase.FAILED, truncated, queued + timedelta(seconds=2)),
        after=timedelta(seconds=2),
    )
    assert run.ti("t").start_date == queued


def test_a_finish_in_whole_seconds_is_never_before_the_start() -> None:
    """A plain container's pod (no runner's result) that ran within one second: its finish truncates
    to the second, before the start floored to the queued time. Airflow's duration is end - start,
    never negative; kwok's `true` pods showed -0.65 s."""
    run, queued, pod = queued_within_a_second()
    truncated = queued.replace(microsecond=0)
    run.step(pod_ended(pod, AttemptPhase.SUCCEEDED, truncated, truncated), after=timedelta(seconds=1))
    done = run.ti("t")
    assert done.state is TaskInstanceState.SUCCESS
    assert done.start_date == queued
    assert done.end_date == done.start_date, "the finish is not dated before the start"
    assert done.duration_seconds == 0.0
