"""A mapped KubernetesPodOperator's items (`zonda.passes.container_mapping`): picked by the controller from
the run's status and from the XCom backend values it read; an instance whose items cannot be picked
(a `.map()` function, an unreadable value) fails, and the run goes on by trigger rules.

Real: the scheduler core; the reconciler with the stored-value reader over `FakeKube` XComChunks.
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

from controller.kube import DAGRUNS, DAGS
from controller.kube.fake import FakeKube
from controller.reconcilers.reconcilers import Reconcilers
from controller.reconcilers.stored_xcoms import StoredXComReader
from tests.unit.fake_world import NS, FakeExecutor, run_body, settle
from tests.unit.pure_runs import Run, make_dag
from zonda.passes import container_mapping
from zonda.passes.decisions import AttemptPhase, ObservedAttempt
from zonda.resources import xcom_chunks, xcom_refs
from zonda.resources.dagrun_models import DagRunStatus, TaskInstanceStatus
from zonda.resources.invocations import TaskOutcome, TaskResult
from zonda.resources.models import DagRunState, ExpandSpec, TaskInstanceState, TriggerRule
from zonda.specs import mapping
from zonda.tries import xcoms

S = TaskInstanceState
URL = "file:///xcom/make/return_value"
STORED = xcoms.stored_reference(URL, 5000)


def pod_dag(source: Any, *, rule: TriggerRule = TriggerRule.ALL_DONE) -> Any:
    dag = make_dag({
        "make": {},
        "pod": {"upstream": ["make"], "operator": "KubernetesPodOperator",
                "expand": ExpandSpec(kwargs={"arguments": source})},
        "after": {"upstream": ["pod"], "trigger_rule": rule},
    })  # fmt: skip
    pod = dataclasses.replace(dag.tasks["pod"], args={"image": "busybox"})
    return dataclasses.replace(dag, tasks={**dag.tasks, "pod": pod})


def made(run: Run, xcom: Any, length: int, **observation: Any) -> Run:
    run.step()
    run.step(run.succeeded("make", xcom=xcom, xcom_lengths={"return_value": length}), **observation)
    return run


def test_items_in_the_xcom_backend_come_from_what_the_controller_read() -> None:
    task = pod_dag(xcom_refs.reference("make")).tasks["pod"]
    status = DagRunStatus(task_instances={"make": TaskInstanceStatus(state=S.SUCCESS, xcom=STORED)})
    stored = {URL: [["echo", "a"], ["echo", "b"]]}
    args = container_mapping.mapped_container_args(task, 1, status, stored)
    assert args == {"image": "busybox", "arguments": ["echo", "b"]}
    dag = pod_dag(xcom_refs.reference("make"))
    assert container_mapping.stored_urls(dag, status) == {URL: 5000}


def test_nothing_is_read_once_every_instance_finished() -> None:
    dag = pod_dag(xcom_refs.reference("make"))
    done = TaskInstanceStatus(state=S.SUCCESS)
    status = DagRunStatus(
        task_instances={"make": TaskInstanceStatus(state=S.SUCCESS, xcom=STORED), "pod[0]": done}
    )
    assert container_mapping.stored_urls(dag, status) == {}


def test_a_stored_list_launches_one_pod_per_item() -> None:
    run = made(Run(pod_dag(xcom_refs.reference("make"))), STORED, 2, stored_xcoms={URL: [["a"], ["b"]]})
    assert run.ti("pod[0]").state is S.QUEUED and run.ti("pod[1]").state is S.QUEUED


def test_an_unreadable_value_fails_each_instance_saying_why_and_the_run_goes_on() -> None:
    run = made(
        Run(pod_dag(xcom_refs.reference("make"))),
        STORED,
        2,
        unreadable_xcoms={URL: "XComChunk ns/x-0 is gone"},
    )
    plan = run.plans[-1]
    for key in ("pod[0]", "pod[1]"):
        reason = run.ti(key).reason or ""
        assert run.ti(key).state is S.FAILED, run.states()
        assert "Cannot pick this mapped KubernetesPodOperator instance's arguments" in reason
        assert "XComChunk ns/x-0 is gone" in reason and URL in reason
    assert not [launch for launch in plan.launches if launch.task_id == "pod"]
    assert [e for e in plan.events if e.reason == "TaskFailed" and "pod[0]" in e.message]
    assert run.ti("after").state is S.QUEUED  # all_done: decided in the same pass
    run.step(run.succeeded("after"))
    assert run.status.state is DagRunState.SUCCESS  # the leaf `after` succeeded


def test_a_map_function_fails_the_instances_and_the_downstream_is_upstream_failed() -> None:
    source = mapping.map_source(xcom_refs.reference("make"), "dags.words:upper")
    run = made(Run(pod_dag(source, rule=TriggerRule.ALL_SUCCESS)), [["a"], ["b"]], 2)
    assert run.ti("pod[0]").state is S.FAILED and ".map()" in (run.ti("pod[0]").reason or "")
    assert run.ti("after").state is S.UPSTREAM_FAILED
    assert run.status.state is DagRunState.FAILED


async def write_chunks(kube: FakeKube, data: bytes) -> str:
    """What the Kubernetes XCom backend writes for `make`'s return value in run pods-1."""
    base = xcom_chunks.base_name("pods-1", "make", -1, 1, "return_value")
    specs = xcom_chunks.chunk_specs(
        data, run_name="pods-1", task_id="make", map_index=-1, try_number=1, key="return_value"
    )
    for spec in specs:
        await kube.create_custom(xcom_chunks.PLURAL, NS, xcom_chunks.manifest(NS, base, spec, "pods-1", None))
    return xcom_chunks.reference_url(NS, base, len(specs))


def pods_dag() -> dict[str, Any]:
    make = {"id": "make", "operator": "BashOperator", "args": {"bash_command": "true"}}
    pod = {
        "id": "pod",
        "operator": "KubernetesPodOperator",
        "args": {"image": "busybox"},
        "dependsOn": ["make"],
        "expand": {"kwargs": {"arguments": xcom_refs.reference("make")}},
    }
    return {"apiVersion": "zonda.dev/v1alpha1", "kind": "DAG", "metadata": {"name": "pods"},
            "spec": {"tasks": [make, pod]}}  # fmt: skip


def test_the_reconciler_reads_xcomchunks_once_and_gives_each_pod_its_item() -> None:
    kube, executor = FakeKube(), FakeExecutor()
    reconcilers = Reconcilers(kube, executor)
    items = [["echo", f"item-{index}-" + "x" * 400] for index in range(6)]  # > 1 KiB: in the backend
    data = xcoms.serialize("return_value", items)
    launched: dict[str, Any] = {}
    record = executor.launch

    async def launch(run: Any, *, task: Any, invocation: Any, attempt_name: str) -> None:
        launched[attempt_name] = task.args
        await record(run, task=task, invocation=invocation, attempt_name=attempt_name)

    executor.launch = launch  # type: ignore[method-assign]

    async def scenario() -> None:
        await kube.create_custom(DAGS, NS, pods_dag())
        await kube.create_custom(DAGRUNS, NS, run_body("pods-1", "pods"))
        await reconcilers.reconcile("run", NS, "pods-1")
        url = await write_chunks(kube, data)
        make = executor.launched[0]
        executor.attempts[make] = ObservedAttempt(
            task_id="make", try_number=1, name=make, phase=AttemptPhase.SUCCEEDED, exit_code=0,
            result=TaskResult(outcome=TaskOutcome.SUCCESS, xcom=xcoms.stored_reference(url, len(data)),
                              xcom_lengths={"return_value": len(items)}),
        )  # fmt: skip
        reads = kube.get_custom
        chunk_reads: list[str] = []

        async def counting(plural: str, namespace: str, name: str) -> Any:
            if plural == xcom_chunks.PLURAL:
                chunk_reads.append(name)
            return await reads(plural, namespace, name)

        kube.get_custom = counting  # type: ignore[method-assign]
        await reconcilers.reconcile("run", NS, "pods-1")
        first = len(chunk_reads)
        await reconcilers.reconcile("run", NS, "pods-1")
        assert first >= 1 and len(chunk_reads) == first  # kept: not read again by the next pass
        await settle()

    asyncio.run(scenario())
    status = kube.objects[(DAGRUNS, NS, "pods-1")]["status"]
    assert {k: ti["state"] for k, ti in status["taskInstances"].items() if k != "make"} == {
        f"pod[{index}]": "queued" for index in range(6)
    }
    by_index = {status["taskInstances"][f"pod[{i}]"]["podName"]: i for i in range(6)}
    assert {name: launched[name]["arguments"] for name in by_index} == {
        name: items[index] for name, index in by_index.items()
    }


def test_a_missing_chunk_fails_the_instances_saying_so() -> None:
    kube, executor = FakeKube(), FakeExecutor()
    reconcilers = Reconcilers(kube, executor)
    base = xcom_chunks.base_name("pods-1", "make", -1, 1, "return_value")
    url = xcom_chunks.reference_url(NS, base, 2)  # never written: deleted, or another cluster's

    async def scenario() -> None:
        await kube.create_custom(DAGS, NS, pods_dag())
        await kube.create_custom(DAGRUNS, NS, run_body("pods-1", "pods"))
        await reconcilers.reconcile("run", NS, "pods-1")
        make = executor.launched[0]
        executor.attempts[make] = ObservedAttempt(
            task_id="make", try_number=1, name=make, phase=AttemptPhase.SUCCEEDED, exit_code=0,
            result=TaskResult(outcome=TaskOutcome.SUCCESS, xcom=xcoms.stored_reference(url, 3000),
                              xcom_lengths={"return_value": 2}),
        )  # fmt: skip
        await reconcilers.reconcile("run", NS, "pods-1")
        await settle()

    asyncio.run(scenario())
    status = kube.objects[(DAGRUNS, NS, "pods-1")]["status"]
    assert status["state"] == "failed"
    reason = status["taskInstances"]["pod[0]"]["reason"]
    assert "XComChunk" in reason and "is gone" in reason, reason
    assert len(executor.launched) == 1  # no pod for an instance without its items
    assert [e for e in kube.events if e.reason == "TaskFailed" and "pod[1]" in e.message]


def test_the_reader_reads_object_storage_keeps_values_and_says_what_it_cannot_read(tmp_path: Path) -> None:
    data = xcoms.serialize("return_value", [["a"], ["b"]])
    path = tmp_path / "value.json"
    path.write_bytes(data)
    good, missing = f"file://{path}", f"file://{tmp_path}/missing.json"
    reader = StoredXComReader(FakeKube())
    values, unreadable = asyncio.run(reader.read({good: len(data), missing: 10}))
    assert values == {good: [["a"], ["b"]]}
    assert list(unreadable) == [missing] and "cannot read the stored XCom" in unreadable[missing]
    path.unlink()
    values, unreadable = asyncio.run(reader.read({good: len(data)}))
    assert values == {good: [["a"], ["b"]]} and not unreadable  # kept by URL: not read again
