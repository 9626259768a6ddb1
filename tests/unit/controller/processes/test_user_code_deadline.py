"""A custom priority weight strategy's `get_weight` that never returns is stopped after
`WEIGHT_SECONDS`, in the main thread (the controller's passes) and in any other, and said on the run.

Real: the timers, `PyThreadState_SetAsyncExc`, the reconcilers and the pass (`FakeKube` and a recording
executor as the API and the executor). The positive control: unbounded, the same strategy is still
running long after the limit (a flag set by the test ends it).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from controller.kube import DAGRUNS, DAGS
from controller.kube.fake import FakeKube
from controller.processes.deadlines import any_thread_deadline
from controller.reconcilers.reconcilers import Reconcilers
from tests.unit.fake_world import NS, FakeExecutor, run_body, settle
from zonda.passes import run_slots
from zonda.resources.models import TaskInstanceState
from zonda.specs import priority_strategies
from zonda.specs.dags import ResolvedDag, parse_dag_spec, resolve_dag
from zonda.specs.params import CheckTimeout
from zonda.specs.priority_strategies import PriorityWeightStrategy

#: Set by a test to let a spinning strategy return (the unbounded control must end).
RELEASE = threading.Event()
CALLS: list[str] = []


class SpinningStrategy(PriorityWeightStrategy):
    def get_weight(self, ti: Any) -> int:
        CALLS.append(ti.task_id)
        while not RELEASE.is_set():  # a user's loop that never ends
            pass
        return 99


HERE = __name__
STRATEGY = {"class": f"{HERE}.SpinningStrategy"}
SPEC = {
    "tasks": [
        {"id": task, "operator": "BashOperator", "args": {"bash_command": "true"}, "priorityWeight": weight,
         "weightStrategy": STRATEGY}
        for task, weight in (("a", 7), ("b", 3))
    ]
}  # fmt: skip


@pytest.fixture(autouse=True)
def fresh() -> Iterator[None]:
    RELEASE.clear()
    CALLS.clear()
    priority_strategies._too_slow.clear()
    priority_strategies.take_timeouts()
    yield
    RELEASE.set()
    priority_strategies.bound_calls(priority_strategies.no_deadline)
    priority_strategies._too_slow.clear()
    priority_strategies.take_timeouts()


def _weights(dag: ResolvedDag) -> dict[str, int]:
    states = dict.fromkeys(dag.tasks, TaskInstanceState.SCHEDULED)
    return {c.task_id: c.weight for c in run_slots.candidates(dag, "run-1", states, None)}


def _in_thread(work: Any) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(work()), daemon=True)
    thread.start()
    return thread, out


@pytest.mark.parametrize("where", ["main thread", "another thread"])
def test_a_get_weight_that_never_returns_is_stopped_and_not_called_again(where: str) -> None:
    priority_strategies.bound_calls(any_thread_deadline)
    dag = resolve_dag("d", parse_dag_spec(SPEC))
    started = time.monotonic()
    if where == "main thread":
        weights = _weights(dag)
    else:
        thread, out = _in_thread(lambda: _weights(dag))
        thread.join(timeout=priority_strategies.WEIGHT_SECONDS + 10)
        assert not thread.is_alive(), "the thread's get_weight was not stopped"
        (weights,) = out
    took = time.monotonic() - started
    assert weights == {"a": 7, "b": 3}, "the tasks' own priority_weight, as Airflow's refresh_from_task"
    assert took < priority_strategies.WEIGHT_SECONDS + 5, took
    assert len(CALLS) == 1, f"stopped once, then not called again: {CALLS}"
    (said,) = priority_strategies.take_timeouts()
    assert f"{HERE}.SpinningStrategy.get_weight took more than 1 s" in said and "task 'a'" in said, said


def test_unbounded_the_same_get_weight_is_still_running_long_after_the_limit() -> None:
    """The positive control: without the deadline the thread spins on (until the test releases it)."""
    dag = resolve_dag("d", parse_dag_spec(SPEC))
    thread, out = _in_thread(lambda: _weights(dag))
    thread.join(timeout=priority_strategies.WEIGHT_SECONDS + 2)
    assert thread.is_alive() and CALLS == ["a"]
    RELEASE.set()
    thread.join(timeout=10)
    assert out == [{"a": 99, "b": 99}]


def test_a_block_that_ended_in_time_is_never_interrupted_afterwards() -> None:
    def work() -> str:
        with any_thread_deadline(0.2):
            pass
        time.sleep(0.6)  # past the deadline, outside the block
        return "done"

    thread, out = _in_thread(work)
    thread.join(timeout=10)
    assert out == ["done"]


def test_a_block_past_its_deadline_in_a_thread_raises_check_timeout() -> None:
    """The positive control of the one above: inside the block the same timer does interrupt."""

    def work() -> str:
        try:
            with any_thread_deadline(0.2):
                while True:
                    time.sleep(0.01)
        except CheckTimeout:
            return "stopped"

    thread, out = _in_thread(work)
    thread.join(timeout=10)
    assert out == ["stopped"]


def test_the_run_whose_pass_stopped_it_gets_a_warning_event_and_its_tries_launch() -> None:
    priority_strategies.bound_calls(any_thread_deadline)
    kube, executor = FakeKube(), FakeExecutor()
    body = {"apiVersion": "zonda.dev/v1alpha1", "kind": "DAG", "metadata": {"name": "w"}, "spec": SPEC}

    async def scenario() -> None:
        await kube.create_custom(DAGS, NS, body)
        await kube.create_custom(DAGRUNS, NS, run_body("w-1", "w"))
        await Reconcilers(kube, executor).reconcile("run", NS, "w-1")
        await settle()

    asyncio.run(scenario())
    said = [e for e in kube.events if e.reason == "PriorityWeightTimeout"]
    assert len(said) == 1 and said[0].warning and said[0].name == "w-1", kube.events
    assert "get_weight took more than 1 s" in said[0].message
    assert len(executor.launched) == 2, "the pass went on: both tasks launched"
