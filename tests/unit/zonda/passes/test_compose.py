"""`compose_pass`: what one pass gathered in, everything it must do out. Pure: a table of inputs -> plan.

Real: `compose_pass` over DAGs resolved from specs (`decide`, `plan_callbacks`, the invocation builder,
the status budget, the Events' order), nothing faked; reports are built by hand as the executor and the
triggerer would make them. The expected Airflow behaviour of each step is tested where the step lives
(`test_decisions`, `test_callbacks`, `test_container_mapping`, `test_status_budget`); here, that the
composition carries every input to its step and every step's output to the plan.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from zonda.passes import compose, status_budget
from zonda.passes.decisions import AttemptPhase, ObservedAttempt
from zonda.passes.limits import PassLimits
from zonda.passes.pools import Concurrency, PoolLimit
from zonda.resources import conditions, names
from zonda.resources.dagrun_models import DagRunSpec, DagRunStatus
from zonda.resources.invocations import TaskOutcome, TaskResult
from zonda.resources.models import DagRunState, DagSpec, TaskInstanceState
from zonda.resources.run_types import RunType
from zonda.specs.dags import resolve_dag
from zonda.tries import xcoms

S = TaskInstanceState
LOGICAL_DATE = datetime(2024, 1, 1, tzinfo=UTC)
NOW = LOGICAL_DATE + timedelta(days=1, minutes=1)
RUN = "etl-1"
URL = "file:///xcom/make/return_value"

CHAIN = [
    {"id": "extract", "operator": "BashOperator", "args": {"bash_command": "echo 1"}},
    {"id": "load", "operator": "BashOperator", "args": {"bash_command": "true"}, "dependsOn": ["extract"]},
]


def gathered(
    tasks: list[dict[str, Any]], status: DagRunStatus | None = None, **fields: Any
) -> compose.Gathered:
    spec = DagSpec.model_validate({"tasks": tasks, **fields.pop("dag", {})})
    return compose.Gathered(
        dag=resolve_dag("etl", spec),
        dag_spec=spec,
        spec=DagRunSpec(dag_name="etl", run_type=RunType.SCHEDULED),
        status=status
        or DagRunStatus(
            state=DagRunState.QUEUED,
            logical_date=LOGICAL_DATE,
            data_interval_start=LOGICAL_DATE,
            data_interval_end=LOGICAL_DATE + timedelta(days=1),
        ),
        run_name=RUN,
        now=NOW,
        namespace="team",
        run_uid="uid-1",
        **fields,
    )


def then(first: compose.Gathered, *reports: Callable[[DagRunStatus], ObservedAttempt]) -> compose.Gathered:
    """The next pass: the first one's status, with what the executor reports of its tries."""
    status = compose.compose_pass(first).status
    attempts = {attempt.name: attempt for attempt in (report(status) for report in reports)}
    return dataclasses.replace(first, status=status, attempts=attempts)


def finished(task_id: str, phase: AttemptPhase = AttemptPhase.SUCCEEDED, **result: Any) -> Any:
    def report(status: DagRunStatus) -> ObservedAttempt:
        ti = status.task_instances[task_id]
        assert ti.pod_name is not None
        ok = phase is AttemptPhase.SUCCEEDED
        outcome = TaskOutcome.SUCCESS if ok else TaskOutcome.FAILED
        return ObservedAttempt(
            task_id=task_id, try_number=ti.try_number, name=ti.pod_name, phase=phase,
            result=TaskResult(outcome=outcome, **result), exit_code=0 if ok else 1,
            started_at=NOW, finished_at=NOW,
        )  # fmt: skip

    return report


def missing(task_id: str) -> Any:
    def report(status: DagRunStatus) -> ObservedAttempt:
        ti = status.task_instances[task_id]
        return ObservedAttempt(
            task_id=task_id, try_number=ti.try_number, name=ti.pod_name or "", phase=AttemptPhase.MISSING
        )

    return report


def refused_before(status: DagRunStatus) -> DagRunStatus:
    """A status whose last write the apiserver refused (`status_budget.refused_write`)."""
    refused, _ = status_budget.refused_write([], 2_000_000, "etcdserver: request is too large", now=NOW)
    return status.model_copy(update={"conditions": refused})


def summary(plan: compose.PassPlan) -> dict[str, Any]:
    """What a plan says, in the words the table below uses."""
    return {
        "states": {key: ti.state.value for key, ti in plan.status.task_instances.items()},
        "run": plan.status.state.value if plan.status.state else None,
        "launches": [
            (each.launch.task_id, each.launch.try_number, each.launch.map_index) for each in plan.launches
        ],
        "callbacks": [(each.callback.request.kind, each.callback.task_id) for each in plan.callback_tries],
        "events": [event.reason for event in plan.events],
    }


SCHEDULED = gathered(CHAIN)
MAPPED_POD = [
    {"id": "make", "operator": "BashOperator", "args": {"bash_command": "true"}},
    {"id": "pod", "operator": "KubernetesPodOperator", "args": {"image": "busybox"}, "dependsOn": ["make"],
     "expand": {"kwargs": {"arguments": {"__zonda_xcom__": {"task_id": "make", "key": "return_value"}}}}},
]  # fmt: skip
STORED = xcoms.stored_reference(URL, 50)

CASES: dict[str, tuple[Callable[[], compose.Gathered], dict[str, Any]]] = {
    "a new run launches its root and says the run started": (
        lambda: SCHEDULED,
        {"states": {"extract": "queued", "load": "none"}, "run": "running", "launches": [("extract", 1, -1)],
         "callbacks": [], "events": ["RunStarted"]},
    ),
    "a success launches the downstream": (
        lambda: then(SCHEDULED, finished("extract", xcom="out")),
        {"states": {"extract": "success", "load": "queued"}, "run": "running", "launches": [("load", 1, -1)],
         "callbacks": [], "events": ["TaskSucceeded"]},
    ),
    "a failure fails the run, and the DAG's failure callback is a callback try": (
        lambda: then(
            gathered(CHAIN, dag={"onFailureCallback": ["tests.unit.zonda.passes.test_compose:summary"]}),
            finished("extract", AttemptPhase.FAILED),
        ),
        {"states": {"extract": "failed", "load": "upstream_failed"}, "run": "failed", "launches": [],
         "callbacks": [("dag_failure", "load")],
         "events": ["TaskFailed", "TaskUpstreamFailed", "RunFailed", "CallbackLaunched"]},
    ),
    "a zombie's failure callback is a callback try (its process could not run it)": (
        lambda: then(
            gathered([{**CHAIN[0], "onFailureCallback": ["tests.unit.zonda.passes.test_compose:summary"]}]),
            missing("extract"),
        ),
        {"states": {"extract": "failed"}, "run": "failed", "launches": [],
         "callbacks": [("on_failure_callback", "extract")],
         "events": ["TaskFailed", "RunFailed", "CallbackLaunched"]},
    ),
    "a pool without free slots launches nothing": (
        lambda: dataclasses.replace(
            gathered([{**CHAIN[0], "pool": "small"}]),
            concurrency=Concurrency(pools={"small": PoolLimit(slots=0)}),
        ),
        {"states": {"extract": "scheduled"}, "run": "running", "launches": [], "callbacks": [],
         "events": ["RunStarted"]},
    ),
    "max_map_length comes from the limits": (
        lambda: dataclasses.replace(
            then(gathered(MAPPED_POD), finished("make", xcom=[["a"], ["b"], ["c"]])),
            limits=PassLimits(max_map_length=2),
        ),
        {"states": {"make": "success", "pod": "failed"}, "run": "failed", "launches": [], "callbacks": [],
         "events": ["TaskFailed", "TaskSucceeded", "RunFailed"]},
    ),
    "a mapped pod's stored items, read for the pass, launch one pod each": (
        lambda: dataclasses.replace(
            then(gathered(MAPPED_POD), finished("make", xcom=STORED, xcom_lengths={"return_value": 2})),
            stored_xcoms={URL: [["a"], ["b"]]},
        ),
        {"states": {"make": "success", "pod[0]": "queued", "pod[1]": "queued"}, "run": "running",
         "launches": [("pod", 1, 0), ("pod", 1, 1)], "callbacks": [], "events": ["TaskSucceeded"]},
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", CASES)
def test_a_pass_composes_what_it_gathered_into_what_it_must_do(case: str) -> None:
    build, expected = CASES[case]
    assert summary(compose.compose_pass(build())) == expected


def test_a_task_waiting_for_a_pool_says_so() -> None:
    full = Concurrency(pools={"small": PoolLimit(slots=0)})
    plan = compose.compose_pass(
        dataclasses.replace(gathered([{**CHAIN[0], "pool": "small"}]), concurrency=full)
    )
    assert "small" in (plan.status.task_instances["extract"].reason or "")
    free = compose.compose_pass(gathered([{**CHAIN[0], "pool": "small"}]))
    assert [launch.launch.task_id for launch in free.launches] == ["extract"], "no pool limits: it launches"


def test_each_launch_carries_its_invocation_with_the_run_and_its_upstream_xcoms() -> None:
    before = then(SCHEDULED, finished("extract", xcom="out"))
    plan = compose.compose_pass(dataclasses.replace(before, previous_success=(LOGICAL_DATE, NOW)))
    (launch,) = plan.launches
    invocation = launch.invocation
    assert (invocation.task_id, invocation.try_number, invocation.run_name) == ("load", 1, RUN)
    assert (invocation.namespace, invocation.run_uid) == ("team", "uid-1")
    assert invocation.xcoms == {"extract": "out"}
    assert invocation.prev_data_interval_start_success == LOGICAL_DATE
    assert launch.launch.attempt_name == plan.status.task_instances["load"].pod_name
    assert launch.upstream_done_at == plan.status.task_instances["extract"].end_date


def test_a_mapped_pods_instance_gets_its_own_arguments_and_the_values_to_read_are_asked_for() -> None:
    before = then(gathered(MAPPED_POD), finished("make", xcom=STORED, xcom_lengths={"return_value": 2}))
    assert compose.stored_xcoms_to_read(before) == {URL: 50}
    assert compose.stored_xcoms_to_read(SCHEDULED) == {}, "no mapped pod: nothing to read"
    plan = compose.compose_pass(dataclasses.replace(before, stored_xcoms={URL: [["a"], ["b"]]}))
    assert [launch.task.args["arguments"] for launch in plan.launches] == [["a"], ["b"]]
    unread = compose.compose_pass(dataclasses.replace(before, unreadable_xcoms={URL: "gone"}))
    assert unread.launches == [] and "gone" in (unread.status.task_instances["pod[0]"].reason or "")


def test_a_callback_try_carries_its_request_in_its_invocation() -> None:
    dag = {"onFailureCallback": ["tests.unit.zonda.passes.test_compose:summary"]}
    plan = compose.compose_pass(then(gathered(CHAIN, dag=dag), finished("extract", AttemptPhase.FAILED)))
    (callback,) = plan.callback_tries
    assert callback.invocation.callback == callback.callback.request
    assert callback.invocation.callbacks == {}
    assert [record.name for record in plan.status.callbacks] == [callback.callback.name]


def test_a_refused_write_reported_before_is_taken_back_in_the_status_written_next() -> None:
    first = gathered(CHAIN)
    plan = compose.compose_pass(dataclasses.replace(first, status=refused_before(first.status)))
    (written,) = [c for c in plan.status.conditions if c.type == status_budget.STATUS_WRITTEN]
    assert written.status == "True"
    assert not conditions.condition_changed(plan.status.conditions, plan.status.conditions, "StatusWritten")


def test_a_finished_runs_pods_are_deleted_when_the_dag_says_so_and_callback_tries_are_not_strays() -> None:
    first = gathered(CHAIN[:1], dag={"deleteWorkerPods": True})
    done = then(first, finished("extract"))
    name = names.callback_name(RUN, "dag_success", "etl")
    callback_try = ObservedAttempt(task_id="extract", try_number=1, name=name, phase=AttemptPhase.RUNNING)
    plan = compose.compose_pass(dataclasses.replace(done, attempts={**done.attempts, name: callback_try}))
    assert plan.status.state is DagRunState.SUCCESS
    assert plan.pods_to_delete == list(done.attempts)
    assert plan.kills == []


def test_events_are_posted_in_a_readers_order_and_every_change_is_kept_for_dags_test() -> None:
    plan = compose.compose_pass(then(SCHEDULED, finished("extract", xcom="out")))
    assert [event.reason for event in plan.happened] == ["TaskSucceeded", "TaskQueued"]
    (posted,) = plan.events  # one Event for the pass's outcomes, every change in its note
    assert posted.reason == "TaskSucceeded" and "Task load (scheduled -> queued)" in posted.message


def test_a_pass_composed_again_on_its_own_status_launches_nothing_again() -> None:
    first = then(SCHEDULED, finished("extract", xcom="out"))
    plan = compose.compose_pass(first)
    (launch,) = plan.launches
    pending = ObservedAttempt(
        task_id="load", try_number=1, name=launch.launch.attempt_name, phase=AttemptPhase.PENDING
    )
    again = compose.compose_pass(
        dataclasses.replace(first, status=plan.status, attempts={**first.attempts, pending.name: pending})
    )
    assert again.launches == [] and again.callback_tries == [] and again.kills == []
    assert again.status.task_instances == plan.status.task_instances
