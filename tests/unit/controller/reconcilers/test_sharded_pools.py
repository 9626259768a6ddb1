"""Pool slots stay exact with the controller sharded (`--shards`): two replicas, each admitting for
its own shard's runs, share one pool through the slot ledger (`controller.coordination.slot_ledger`).

Each replica has its own run index, which does not see the other's runs change (no watch here: the
harshest case, a watch that lags until the test delivers it), so only the ledger stands between
them and a pool admitted twice over; the control without it shows the over-admission it prevents.
"""

from __future__ import annotations

import asyncio
import dataclasses

from controller.coordination.shard_leases import LeaseRecord
from controller.coordination.shards import dag_shard
from controller.coordination.slot_ledger import SlotLedger, decode
from controller.kube import DAGRUNS, DAGS
from controller.kube.fake import FakeKube
from controller.reconcilers.pools import POOLS, Sharding
from controller.reconcilers.reconcilers import Reconcilers
from tests.unit.controller.reconcilers.test_pool_reconcilers import (
    NS,
    SlowExecutor,
    YieldingKube,
    dag_body,
    pool_body,
    queued,
)
from tests.unit.fake_world import run_body
from zonda.passes.decisions import AttemptPhase

SHARD_OF = {"light": 0, "heavy": 0, "middle": 1, "d": 1}


def replica(kube: FakeKube, executor: SlowExecutor, shard: int, *, ledger: bool = True) -> Reconcilers:
    reconcilers = Reconcilers(kube, executor)
    if ledger:
        reconcilers.runs.admission.sharding = Sharding(
            shard_count=2, served=lambda: frozenset({shard}), ledger=SlotLedger(kube, namespace="zonda")
        )
    return reconcilers


async def world(kube: FakeKube, slots: int) -> None:
    assert {dag: dag_shard(NS, dag, 2) for dag in SHARD_OF} == SHARD_OF
    await kube.create_custom(POOLS, NS, pool_body(slots))
    for name in SHARD_OF:
        await kube.create_custom(DAGS, NS, dag_body(name, 1))
        await kube.create_custom(DAGRUNS, NS, run_body(f"{name}-1", name))


async def both_pass(a: Reconcilers, b: Reconcilers) -> None:
    """Every run's pass at once, each by the replica serving its shard."""
    await asyncio.gather(
        *((a if shard == 0 else b).reconcile("run", NS, f"{name}-1") for name, shard in SHARD_OF.items())
    )


def test_two_replicas_never_admit_more_than_the_pool_has() -> None:
    kube, executor = YieldingKube(), SlowExecutor()
    a, b = replica(kube, executor, 0), replica(kube, executor, 1)

    async def scenario() -> None:
        await world(kube, 3)
        for _ in range(3):
            await both_pass(a, b)
            assert executor.alive() <= 3
        assert executor.alive() == 3
        assert sum(len(tasks) for tasks in (await queued(kube)).values()) == 3
        ledger = await kube.get_lease("zonda", "zonda-controller-slots-ns")
        assert ledger is not None
        declared = decode(ledger["metadata"]["annotations"])
        assert sum(declared.get(0, {}).values()) + sum(declared.get(1, {}).values()) == 3

    asyncio.run(scenario())


def test_without_the_ledger_each_replica_would_fill_the_pool_again() -> None:
    """The control: the same two replicas, each counting only what its own index shows (each lists
    the runs once, before the other's launches are written)."""
    kube, executor = YieldingKube(), SlowExecutor()
    a, b = replica(kube, executor, 0, ledger=False), replica(kube, executor, 1, ledger=False)

    async def scenario() -> None:
        await world(kube, 3)
        await both_pass(a, b)  # the same passes at once as with the ledger
        assert executor.alive() > 3

    asyncio.run(scenario())


def test_slots_freed_on_one_shard_go_to_the_other_once_its_replica_declares_again() -> None:
    kube, executor = YieldingKube(), SlowExecutor()
    a, b = replica(kube, executor, 0), replica(kube, executor, 1)

    def running(shard: int) -> int:
        return sum(
            1
            for run, attempts in executor.attempts.items()
            if SHARD_OF[run.removesuffix("-1")] == shard
            for attempt in attempts.values()
            if attempt.phase is AttemptPhase.RUNNING
        )

    def succeed(shard: int) -> None:
        for run, attempts in executor.attempts.items():
            if SHARD_OF[run.removesuffix("-1")] == shard:
                for name, attempt in attempts.items():
                    attempts[name] = dataclasses.replace(attempt, phase=AttemptPhase.SUCCEEDED)

    async def scenario() -> None:
        await world(kube, 2)
        await asyncio.gather(*(a.reconcile("run", NS, f"{n}-1") for n in ("light", "heavy")))
        for _ in range(3):  # a's four task instances, two at a time, to the end of a's runs
            await asyncio.gather(*(b.reconcile("run", NS, f"{n}-1") for n in ("middle", "d")))
            assert (running(0), running(1)) == (running(0), 0) and running(0) <= 2
            succeed(0)
            await asyncio.gather(*(a.reconcile("run", NS, f"{n}-1") for n in ("light", "heavy")))
        states = {
            run["metadata"]["name"]: run["status"]["state"] for run in await kube.list_custom(DAGRUNS, NS)
        }
        assert (states["light-1"], states["heavy-1"]) == ("success", "success")
        await asyncio.gather(*(b.reconcile("run", NS, f"{n}-1") for n in ("middle", "d")))
        assert running(1) == 0, "a's last declaration still holds the slots: b must wait"
        await a.runs.admission.release()  # a's lease loop: nothing held on shard 0 any more
        ledger = b.runs.admission.sharding
        assert ledger is not None
        for body in await kube.list_leases("zonda", "zonda.dev/component=controller"):  # b's lease loop
            assert ledger.ledger.observe(LeaseRecord.from_body(body))
        await asyncio.gather(*(b.reconcile("run", NS, f"{n}-1") for n in ("middle", "d")))
        assert running(1) == 0, "b's index still shows a's runs' last tries as queued"
        for run in await kube.list_custom(DAGRUNS, NS):  # b's watch delivers a's last writes
            b.runs.index.update(run)
        await asyncio.gather(*(b.reconcile("run", NS, f"{n}-1") for n in ("middle", "d")))
        assert running(1) == 2

    asyncio.run(scenario())


def test_serves_dag_asks_the_held_shards_now_or_those_one_decision_read() -> None:
    held = {0}
    sharding = Sharding(
        shard_count=2, served=lambda: frozenset(held), ledger=SlotLedger(FakeKube(), namespace="z")
    )
    assert [sharding.serves_dag(NS, dag) for dag in ("light", "middle")] == [True, False]
    read_once = sharding.served()
    held.clear()
    held.add(1)  # the shard moved after the decision read its shards
    assert sharding.serves_dag(NS, "middle") and not sharding.serves_dag(NS, "light")
    assert sharding.serves_dag(NS, "light", read_once) and not sharding.serves_dag(NS, "middle", read_once)
