"""A run's status never outgrows the apiserver's object limit unnoticed (`zonda.passes.status_budget`): an
expansion that would take it past the budget fails the mapped task, and a status write the apiserver
still refuses as too large leaves a condition and one Event, with the status last written kept.

Real: the scheduler core, the size arithmetic, the run reconciler. Fake: the API (`FakeKube`, which
refuses an object over `max_object_bytes` with the 500 etcd returns, as tests/cluster shows).
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import Any

from controller.kube import DAGRUNS, DAGS
from controller.kube.fake import FakeKube
from controller.reconcilers.reconcilers import Reconcilers
from tests.unit.fake_world import NS, FakeExecutor, run_body, settle
from tests.unit.pure_runs import Run, make_dag
from zonda.passes import status_budget
from zonda.passes.limits import DEFAULT_LIMITS, PassLimits
from zonda.resources import run_shards, xcom_refs
from zonda.resources.models import Condition, DagRunState, ExpandSpec, TaskInstanceState
from zonda.specs import mapping

S = TaskInstanceState
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def wide_dag(*mapped: str) -> Any:
    """`make` feeds every task in `mapped`, each mapped over its return value."""
    tasks: dict[str, dict[str, Any]] = {"make": {}}
    for task_id in mapped:
        expand = ExpandSpec(kwargs={"x": xcom_refs.reference("make")})
        tasks[task_id] = {"upstream": ["make"], "expand": expand}
    return make_dag(tasks)


def made(run: Run, length: int) -> Run:
    run.step()
    run.step(run.succeeded("make", xcom=None, xcom_lengths={"return_value": length}))
    return run


# ------------------------------------------------------------------------------------ the estimate


def test_unfinished_instances_count_at_their_finished_size_and_new_ones_in_full() -> None:
    small = {"state": "scheduled"}
    done = {"state": "success", "reason": "x" * 900}
    wire = {"state": "running", "taskInstances": {"a[0]": small, "a[1]": done}}
    growth = status_budget.INSTANCE_BYTES - status_budget.wire_bytes({"a[0]": small})
    assert status_budget.projected_bytes(wire, 0) == status_budget.wire_bytes(wire) + growth
    three = 3 * status_budget.INSTANCE_BYTES
    assert status_budget.projected_bytes(wire, 3) == status_budget.wire_bytes(wire) + growth + three


def test_the_failure_names_the_count_the_estimated_size_and_the_budget() -> None:
    wire = {"state": "running", "taskInstances": {}}
    assert status_budget.expansion_problem(10, 10, wire, budget_bytes=10_000) is None
    message = status_budget.expansion_problem(100, 100, wire, budget_bytes=10_000)
    projected = status_budget.projected_bytes(wire, 100)
    assert message is not None
    assert "100 instances" in message and f"about {projected:,} bytes" in message
    assert "status budget of 10,000 bytes" in message and "--status-budget-bytes" in message
    assert "1,572,864 bytes" in message  # the apiserver's limit


# --------------------------------------------------------------------------------- the scheduler


def test_an_expansion_within_the_budget_goes_ahead() -> None:
    run = made(Run(wide_dag("work"), status_budget_bytes=20_000), 3)
    assert [run.ti(mapping.ti_key("work", i)).state for i in range(3)] == [S.QUEUED] * 3


def test_an_expansion_past_the_budget_fails_the_mapped_task_and_the_run_finishes() -> None:
    run = made(Run(wide_dag("work"), status_budget_bytes=20_000), 100)
    work = run.ti("work")
    assert work.state is S.FAILED
    assert "100 instances" in (work.reason or "") and "status budget of 20,000 bytes" in (work.reason or "")
    assert not any(key.startswith("work[") for key in run.status.task_instances)
    assert run.status.state is DagRunState.FAILED
    failed = [event for event in run.plans[-1].events if event.reason == "TaskFailed"]
    assert failed and "100 instances" in failed[0].message


def test_a_second_wide_task_fails_when_the_first_took_the_budget_and_the_first_still_runs() -> None:
    run = made(Run(wide_dag("first", "second"), status_budget_bytes=30_000), 40)
    assert run.ti("second").state is S.FAILED and "40 instances" in (run.ti("second").reason or "")
    first = [mapping.ti_key("first", i) for i in range(40)]
    assert {run.ti(key).state for key in first} == {S.QUEUED, S.SCHEDULED}  # max_active_tasks=16 at once
    while queued := [key for key in first if run.ti(key).state is S.QUEUED]:
        run.step(*(run.succeeded(key) for key in queued))
    assert run.status.state is DagRunState.FAILED  # settled by its leaves: first succeeded, second failed
    assert all(run.ti(mapping.ti_key("first", i)).state is S.SUCCESS for i in range(40))


def test_a_run_kept_whole_in_its_status_takes_two_tasks_of_1024_instances_and_fails_a_third() -> None:
    """The issue's case, with every instance kept in the DagRun's status (no shards: an inline limit
    above the run's size): 3 x 1,024 x 404 bytes > 1.5 MiB."""
    run = made(Run(wide_dag("a", "b", "c"), inline_task_instances=1_000_000), 1024)
    assert run.ti("a[1023]").state is S.SCHEDULED and run.ti("b[1023]").state is S.SCHEDULED
    assert run.ti("c").state is S.FAILED and "c[0]" not in run.status.task_instances
    assert "1024 instances" in (run.ti("c").reason or "")
    assert status_budget.wire_bytes(run.status.to_wire()) < status_budget.DEFAULT_STATUS_BUDGET_BYTES


def test_by_default_three_tasks_of_1024_go_to_shards_each_object_well_under_the_budget() -> None:
    """Past the inline limit the instances are stored in shards, so the budget is checked object by
    object: the third task of 1,024 expands, and the largest object stays far under the budget."""
    run = made(Run(wide_dag("a", "b", "c")), 1024)
    assert all(run.ti(f"{task}[1023]").state is S.SCHEDULED for task in "abc")
    instances = len(run.status.task_instances)
    assert instances > 3 * 1024
    stored = run_shards.split(run.status.to_wire(), "run", inline_limit=DEFAULT_LIMITS.inline_task_instances)
    assert len(stored.shards) == -(-instances // run_shards.SHARD_INSTANCES)
    largest = max(status_budget.wire_bytes(o) for o in [stored.summary, *stored.shards.values()])
    assert largest < status_budget.DEFAULT_STATUS_BUDGET_BYTES / 4


def test_a_sharded_run_still_fails_an_expansion_when_one_object_would_pass_the_budget() -> None:
    """The safety net: a budget below a full shard's estimate (256 x 448 bytes) fails the expansion,
    with the shard size named."""
    run = made(Run(wide_dag("a"), status_budget_bytes=100_000, inline_task_instances=10), 20)
    assert run.ti("a").state is S.FAILED
    assert "DagRunShards of 256 instances" in (run.ti("a").reason or "")
    assert "status budget of 100,000 bytes" in (run.ti("a").reason or "")


# -------------------------------------------------------------------------- a refused status write


def test_a_refusal_sets_a_condition_once_and_a_later_write_takes_it_back() -> None:
    error = "etcdserver: request is too large"
    refused, message = status_budget.refused_write([], 2_000_000, error, now=NOW)
    assert message is not None and "2,000,000 bytes" in message and error in message
    assert [(c.type, c.status, c.reason) for c in refused] == [("StatusWritten", "False", "StatusTooLarge")]
    again, second = status_budget.refused_write(refused, 2_100_000, error, now=NOW)
    assert second is None and again == refused
    back = status_budget.written(refused, now=NOW)
    assert [(c.type, c.status) for c in back] == [("StatusWritten", "True")]
    untouched = [Condition(type="Ready", status="True", reason="Ready", last_transition_time=NOW)]
    assert status_budget.written(untouched, now=NOW) is untouched


def test_the_apiserver_errors_of_an_object_too_large() -> None:
    assert status_budget.is_too_large(500, "etcdserver: request is too large")
    assert status_budget.is_too_large(413, "Request entity too large: limit is 3145728")
    assert not status_budget.is_too_large(500, "etcdserver: leader changed")


def test_a_refused_run_is_passed_again_soon_then_less_often_and_at_its_own_wake_up_if_sooner() -> None:
    """Found by the fault suite (`status-too-large` on the mixed workload, 10 strikes): a consumer run
    whose last pass (its task's pod done) was refused waited 5 minutes for its next pass, nothing of it
    changing any more, and a refused pass's own wake-up (a retry delay of 1 s, a sensor's next poke)
    was dropped for those 5 minutes too."""
    after = status_budget.next_pass_after_refusal
    first = status_budget.REFUSED_RETRY_FIRST
    assert [after(n, None, NOW) - NOW for n in (1, 2, 3)] == [first, 2 * first, 4 * first]
    assert after(1_000, None, NOW) - NOW == status_budget.REFUSED_RETRY_MAX  # capped
    assert after(6, NOW + timedelta(seconds=30), NOW) == NOW + timedelta(seconds=30)  # the plan's, sooner
    assert after(1, NOW + timedelta(minutes=1), NOW) == NOW + first  # the backoff's, sooner
    # a plan that asks for a pass at once (or a second from now) waits the first backoff, not a hot loop
    assert after(3, NOW, NOW) == after(3, NOW + timedelta(seconds=1), NOW) == NOW + first


def mapped_dag_body(items: int) -> dict[str, Any]:
    make = {"id": "make", "operator": "BashOperator", "args": {"bash_command": "true"}}
    work = {
        "id": "work",
        "operator": "BashOperator",
        "args": {"bash_command": "true"},
        "dependsOn": ["make"],
        "expand": {"kwargs": {"env": [{"N": str(i)} for i in range(items)]}},
    }
    return {"apiVersion": "zonda.dev/v1alpha1", "kind": "DAG", "metadata": {"name": "wide"},
            "spec": {"tasks": [make, work]}}  # fmt: skip


def test_a_status_the_apiserver_refuses_keeps_the_last_one_says_so_once_and_recovers() -> None:
    kube, executor = FakeKube(max_object_bytes=12_000), FakeExecutor()
    reconcilers = Reconcilers(
        kube, executor, limits=PassLimits(status_budget_bytes=10_000_000, inline_task_instances=100)
    )  # the budget lets it through, and the run keeps its instances in its own status

    async def scenario() -> list[Any]:
        await kube.create_custom(DAGS, NS, mapped_dag_body(60))
        await kube.create_custom(DAGRUNS, NS, run_body("wide-1", "wide"))
        await reconcilers.reconcile("run", NS, "wide-1")  # `make` launched: a small status, written
        stored = json.dumps(kube.objects[(DAGRUNS, NS, "wide-1")]["status"]["taskInstances"])
        executor.finish(executor.launched[0])
        wakes = [
            await reconcilers.reconcile("run", NS, "wide-1")
        ]  # 60 instances: too large for the fake etcd
        wakes.append(await reconcilers.reconcile("run", NS, "wide-1"))  # refused again, said once
        await settle()
        assert json.dumps(kube.objects[(DAGRUNS, NS, "wide-1")]["status"]["taskInstances"]) == stored
        kube.max_object_bytes = None  # e.g. the tries finished with less to say: the status fits again
        wakes.append(await reconcilers.reconcile("run", NS, "wide-1"))
        await settle()
        return wakes

    started = datetime.now(UTC)
    first, second, _ = asyncio.run(scenario())
    assert first is not None and second is not None  # looked at again later, not failed
    # in seconds, not minutes (it was 5 minutes, whatever refused it), then less often
    assert first - started < status_budget.REFUSED_RETRY_FIRST + timedelta(seconds=2)
    assert second - first > status_budget.REFUSED_RETRY_FIRST / 2
    status = kube.objects[(DAGRUNS, NS, "wide-1")]["status"]
    refused = [e for e in kube.events if e.reason == "StatusTooLarge"]
    assert len(refused) == 1 and refused[0].warning
    assert "etcdserver: request is too large" in refused[0].message
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["StatusWritten"]["status"] == "True"  # taken back by the write that fit
    assert len([key for key in status["taskInstances"] if key.startswith("work[")]) == 60
    # each refused pass launched the same tries under the same names (a pod's 409 is "done"), adopted
    queued = {ti["podName"] for ti in status["taskInstances"].values() if ti["state"] == "queued"}
    assert len(queued) == 16 and set(executor.launched) == queued | {executor.launched[0]}


def test_a_mapped_group_past_the_budget_fails_its_root_and_the_rest_follow() -> None:
    """Its tasks expand together (each index waits for its own upstream index); when they would not
    fit, none expands: the group's root fails with the sizes, its downstream is upstream_failed."""
    from tests.unit.zonda.passes.test_mapped_groups import group_dag

    run = Run(group_dag(), status_budget_bytes=20_000)
    run.step()
    run.step(run.succeeded("make", xcom=None, xcom_lengths={"return_value": 30}))
    assert run.ti("g.a").state is S.FAILED
    assert "30 instances (60 with the other tasks of its mapped task group g)" in (run.ti("g.a").reason or "")
    assert run.ti("g.b").state is S.UPSTREAM_FAILED and run.ti("after").state is S.UPSTREAM_FAILED
    assert not any("[" in key for key in run.status.task_instances)
    within = Run(group_dag(), status_budget_bytes=60_000)
    within.step()
    within.step(within.succeeded("make", xcom=None, xcom_lengths={"return_value": 30}))
    assert within.ti("g.a[29]").state in (S.QUEUED, S.SCHEDULED) and "g.b[29]" in within.status.task_instances
