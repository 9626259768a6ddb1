"""Pool admission in the controller against `FakeKube`: concurrent reconciles, a restart, stale watch
events, the Pool's status and the wake-ups.

Real: the reconcilers, the admission critical section, the run index, the status writes (the fake
refuses stale writes with Conflict as the apiserver does). Fake: the API (`controller.kube.fake`)
and the executor, which yields to the event loop on every launch so concurrent reconciles interleave
as they do against a real apiserver. tests/cluster/test_pools.py proves it with real processes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from controller.kube import DAGRUNS, DAGS
from controller.kube.fake import FakeKube
from controller.reconcilers import metrics
from controller.reconcilers.index import RunIndex, RunSummary
from controller.reconcilers.pools import POOLS, runs_to_wake
from controller.reconcilers.reconcilers import Reconcilers
from tests.unit.fake_world import run_body
from tests.unit.zonda.passes.test_pools import candidate, holder
from zonda.passes.decisions import AttemptPhase, ObservedAttempt
from zonda.passes.pools import Candidate, SlotHolder
from zonda.resources.dagrun_models import DagRunStatus
from zonda.resources.invocations import TaskInvocation
from zonda.resources.models import TaskInstanceState as S
from zonda.specs.dags import ResolvedTask

NS = "ns"


@dataclass
class SlowExecutor:
    """Attempts by run; every launch awaits, so other reconciles run in between."""

    name: str = "slow"
    attempts: dict[str, dict[str, ObservedAttempt]] = field(default_factory=dict)

    async def observe(self, run: Mapping[str, Any]) -> dict[str, ObservedAttempt]:
        return dict(self.attempts.get(run["metadata"]["name"], {}))

    async def launch(
        self, run: Mapping[str, Any], *, task: ResolvedTask, invocation: TaskInvocation, attempt_name: str
    ) -> None:
        for _ in range(3):
            await asyncio.sleep(0)
        self.attempts.setdefault(run["metadata"]["name"], {})[attempt_name] = ObservedAttempt(
            task_id=invocation.task_id,
            try_number=invocation.try_number,
            name=attempt_name,
            phase=AttemptPhase.RUNNING,
        )

    async def kill(self, run: Mapping[str, Any], attempt_name: str, *, uid: str | None = None) -> None:
        self.attempts.get(run["metadata"]["name"], {}).pop(attempt_name, None)

    async def delete_finished(
        self, run: Mapping[str, Any], attempt_name: str, *, uid: str | None = None
    ) -> bool:
        return False

    async def release_recorded(
        self, run: Mapping[str, Any], observed: Mapping[str, ObservedAttempt], written: DagRunStatus
    ) -> int:
        return 0

    def alive(self) -> int:
        return sum(len(attempts) for attempts in self.attempts.values())


class YieldingKube(FakeKube):
    """Every read yields to the event loop, as a request to the apiserver does."""

    async def list_custom(self, plural: str, namespace: str | None, label_selector: str | None = None) -> Any:
        await asyncio.sleep(0)
        return await super().list_custom(plural, namespace, label_selector)

    async def get_custom(self, plural: str, namespace: str, name: str) -> Any:
        await asyncio.sleep(0)
        return await super().get_custom(plural, namespace, name)


def dag_body(name: str, weight: int) -> dict[str, Any]:
    return {
        "apiVersion": "zonda.dev/v1alpha1",
        "kind": "DAG",
        "metadata": {"name": name},
        "spec": {
            "defaultArgs": {"pool": "shared_pool", "priorityWeight": weight, "weightRule": "absolute"},
            "tasks": [
                {"id": f"t{i}", "operator": "BashOperator", "args": {"bash_command": "true"}} for i in (1, 2)
            ],
        },
    }


def pool_body(slots: int) -> dict[str, Any]:
    return {
        "apiVersion": "zonda.dev/v1alpha1",
        "kind": "Pool",
        "metadata": {"name": "shared-pool"},
        "spec": {"slots": slots},
    }


async def three_runs(kube: FakeKube, reconcilers: Reconcilers) -> None:
    """Three runs whose six task instances all wait for the closed pool, which then opens 2 slots."""
    await kube.create_custom(POOLS, NS, pool_body(0))
    for name, weight in (("light", 1), ("heavy", 10), ("middle", 5)):
        await kube.create_custom(DAGS, NS, dag_body(name, weight))
        await kube.create_custom(DAGRUNS, NS, run_body(f"{name}-1", name))
    await reconcile_all(reconcilers)
    assert await queued(kube) == {"light-1": [], "heavy-1": [], "middle-1": []}
    await kube.delete_custom(POOLS, NS, "shared-pool")
    await kube.create_custom(POOLS, NS, pool_body(2))


async def reconcile_all(reconcilers: Reconcilers) -> None:
    await asyncio.gather(*(reconcilers.reconcile("run", NS, f"{n}-1") for n in ("light", "heavy", "middle")))


async def queued(kube: FakeKube) -> dict[str, list[str]]:
    return {
        run["metadata"]["name"]: sorted(
            task_id
            for task_id, ti in (run.get("status") or {}).get("taskInstances", {}).items()
            if ti.get("state") in ("queued", "running")
        )
        for run in await kube.list_custom(DAGRUNS, NS)
    }


def test_concurrent_reconciles_of_three_runs_never_over_admit_and_the_heaviest_goes_first() -> None:
    kube, executor = YieldingKube(), SlowExecutor()
    woken: list[tuple[str, str, str]] = []
    reconcilers = Reconcilers(kube, executor, enqueue=lambda *key: woken.append(key))

    async def scenario() -> None:
        await three_runs(kube, reconcilers)
        for _ in range(2):  # all compete at once, twice over
            await reconcile_all(reconcilers)
            assert executor.alive() <= 2
        assert await queued(kube) == {"light-1": [], "heavy-1": ["t1", "t2"], "middle-1": []}
        light = (await kube.get_custom(DAGRUNS, NS, "light-1"))["status"]["taskInstances"]["t1"]
        assert light["reason"] == "Not scheduling since there are 0 open slots in pool shared-pool"
        await reconcilers.reconcile("pool", NS, "shared-pool")
        status = (await kube.get_custom(POOLS, NS, "shared-pool"))["status"]
        assert (status["used"], status["openSlots"], status["scheduledSlots"]) == ("2/2", 0, 4)
        gauge = metrics.POOL_SLOTS.labels(NS, "shared-pool", "scheduled")._value.get()
        assert gauge == 4, "zonda_pool_slots{kind=scheduled}"
        assert ("pool", NS, "shared-pool") in woken

    asyncio.run(scenario())


def test_runs_starting_at_once_take_no_more_than_the_pool_has() -> None:
    """No task instance waits yet: each pass would admit its own, unless it sees the others' launches."""
    kube, executor = YieldingKube(), SlowExecutor()
    reconcilers = Reconcilers(kube, executor)

    async def scenario() -> None:
        await kube.create_custom(POOLS, NS, pool_body(2))
        for name, weight in (("light", 1), ("heavy", 10), ("middle", 5)):
            await kube.create_custom(DAGS, NS, dag_body(name, weight))
            await kube.create_custom(DAGRUNS, NS, run_body(f"{name}-1", name))
        for _ in range(2):
            await reconcile_all(reconcilers)
            assert executor.alive() == 2
        assert sum(len(tasks) for tasks in (await queued(kube)).values()) == 2

    asyncio.run(scenario())


def test_a_restarted_controller_rebuilds_occupancy_from_the_runs_statuses() -> None:
    kube, executor = YieldingKube(), SlowExecutor()

    async def scenario() -> None:
        first = Reconcilers(kube, executor)
        await three_runs(kube, first)
        for _ in range(2):
            await reconcile_all(first)
        restarted = Reconcilers(kube, executor)  # an empty index: nothing remembered
        await restarted.reconcile("run", NS, "light-1")  # the lightest first: it must still wait
        assert executor.alive() == 2
        assert await queued(kube) == {"light-1": [], "heavy-1": ["t1", "t2"], "middle-1": []}

    asyncio.run(scenario())


def test_a_finished_task_wakes_the_runs_waiting_for_its_slot() -> None:
    kube, executor = YieldingKube(), SlowExecutor()
    woken: list[tuple[str, str, str]] = []
    reconcilers = Reconcilers(kube, executor, enqueue=lambda *key: woken.append(key))

    async def scenario() -> None:
        await three_runs(kube, reconcilers)
        for _ in range(2):
            await reconcile_all(reconcilers)
        heavy = executor.attempts["heavy-1"]
        name, attempt = next(iter(heavy.items()))
        heavy[name] = ObservedAttempt(
            task_id=attempt.task_id, try_number=1, name=name, phase=AttemptPhase.SUCCEEDED, exit_code=0
        )
        woken.clear()
        await reconcilers.reconcile("run", NS, "heavy-1")
        assert {("run", NS, "light-1"), ("run", NS, "middle-1")} <= set(woken)
        await reconcilers.reconcile("run", NS, "light-1")  # woken first, but the middle run weighs more
        assert await queued(kube) == {"light-1": [], "heavy-1": ["t2"], "middle-1": []}
        assert ("run", NS, "middle-1") in woken, "the run admitted ahead is woken"
        await reconcilers.reconcile("run", NS, "middle-1")
        assert await queued(kube) == {"light-1": [], "heavy-1": ["t2"], "middle-1": ["t1"]}

    asyncio.run(scenario())


def test_a_watch_event_older_than_our_own_write_does_not_free_slots_in_the_index() -> None:
    kube, executor = YieldingKube(), SlowExecutor()
    reconcilers = Reconcilers(kube, executor)

    async def scenario() -> None:
        await three_runs(kube, reconcilers)
        stale = await kube.get_custom(DAGRUNS, NS, "heavy-1")  # before anything was launched
        await reconcilers.reconcile("run", NS, "heavy-1")
        index = reconcilers.index
        assert len(index.runs[(NS, "heavy-1")].holders) == 2
        index.update(stale)  # delivered late by the watch
        assert len(index.runs[(NS, "heavy-1")].holders) == 2
        index.update(await kube.get_custom(DAGRUNS, NS, "heavy-1"))  # the watch catches up
        assert (NS, "heavy-1") not in index.awaiting

    asyncio.run(scenario())


def summary(holders: tuple[SlotHolder, ...] = (), waiting: tuple[Candidate, ...] = ()) -> RunSummary:
    return RunSummary("d", None, "running", None, 0, {}, holders=holders, waiting=waiting)


def test_only_a_freed_slot_wakes_the_runs_waiting_for_it() -> None:
    index = RunIndex()
    index.put((NS, "waits-here"), summary(waiting=(candidate("waits-here", "w"),)))
    index.put(
        (NS, "waits-elsewhere"),
        summary(waiting=(candidate("waits-elsewhere", "w", pool="other", dag="another"),)),
    )
    queued, running = (summary((holder("r", "t", state=state),)) for state in (S.QUEUED, S.RUNNING))
    starting = runs_to_wake(index, NS, "r", queued, running)
    assert starting == (set(), {"p"}), "starting frees nothing, but the Pool's queued/running numbers move"
    assert runs_to_wake(index, NS, "r", running, summary()) == ({"waits-here"}, {"p"})
    more_waiting = summary(waiting=(candidate("r", "a"), candidate("r", "b")))
    assert runs_to_wake(index, NS, "r", summary(waiting=(candidate("r", "a"),)), more_waiting) == (
        set(),
        {"p"},
    )
