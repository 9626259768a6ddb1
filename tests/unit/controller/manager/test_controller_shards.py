"""`zonda controller --shards`: which replica reconciles which work-queue key, against FakeKube.

Two `ControllerProcess`es share one fake API: their shard Leases split the shards, each key (a DAG, its
runs and Backfills by the DAG's shard; Pools by their own name) is served by exactly one of them, a
takeover enqueues everything of the shards taken, and the work queue's gate refuses the rest.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from controller.coordination.shards import dag_shard
from controller.kube import DAGRUNS
from controller.kube import DAGS as DAGS_PLURAL
from controller.kube.cache import ObjectCache
from controller.kube.fake import FakeKube
from controller.manager.main import ControllerProcess, Services
from controller.manager.settings import DEFAULTS
from controller.manager.shards import ControllerShards
from controller.manager.workqueue import WorkQueue
from controller.reconcilers.pools import POOLS, Sharding
from controller.reconcilers.reconcilers import Reconcilers
from tests.unit.controller.reconcilers.test_pool_reconcilers import SlowExecutor
from tests.unit.fake_world import dag_body, run_body

NS = "team"
DAGS = [f"dag-{i}" for i in range(12)]


class Clock:
    now = 100.0

    def __call__(self) -> float:
        return self.now


def process(kube: FakeKube, identity: str, clock: Clock) -> ControllerProcess:
    proc = ControllerProcess(replace(DEFAULTS, shards=2, identity=identity))
    reconcilers = Reconcilers(kube, SlowExecutor())
    shards = ControllerShards(
        kube,
        namespace="zonda",
        identity=identity,
        shard_count=2,
        lease_duration=3.0,
        on_acquired=proc.shards_acquired,
        monotonic=clock,
    )
    reconcilers.runs.admission.sharding = Sharding(2, shards.served, shards.ledger)
    proc.services = Services(
        kube=kube,  # type: ignore[arg-type]
        executor=SlowExecutor(),
        reconcilers=reconcilers,
        queue=WorkQueue(proc.reconcile),
        shards=shards,
    )
    return proc


def queued(proc: ControllerProcess) -> set[Any]:
    assert proc.services is not None
    return set(proc.services.queue._waiting)


async def step(proc: ControllerProcess) -> None:
    """One shard Lease cycle of `proc` (its lease loop, without the sleeping)."""
    assert proc.services is not None and proc.services.shards is not None
    await proc.services.shards.step()


def know(proc: ControllerProcess) -> None:
    """What the watches would have delivered: the runs, one per DAG, and a Backfill of dag-0."""
    assert proc.services is not None
    for name in DAGS:
        body = run_body(f"{name}-run", name)
        body["metadata"]["namespace"] = NS
        proc.services.reconcilers.index.update(body)
    proc.backfill_dags[(NS, "fill-0")] = "dag-0"


async def test_two_replicas_serve_every_key_exactly_once_and_a_takeover_enqueues_the_shard() -> None:
    kube, clock = FakeKube(), Clock()
    cache = kube.cache = ObjectCache(frozenset({DAGS_PLURAL, DAGRUNS, POOLS}))  # type: ignore[attr-defined]
    for name in DAGS:  # what the DAG watch delivered
        cache.observed(DAGS_PLURAL, {"metadata": {"namespace": NS, "name": name, "resourceVersion": "1"}})
    a, b = process(kube, "a", clock), process(kube, "b", clock)
    know(a)
    know(b)
    await step(a)
    assert all(a.serves("dag", NS, name) for name in DAGS), "alone, a serves every shard"
    await step(b)
    await step(a)
    await step(b)
    for kind, name, dag in [
        *(("dag", name, name) for name in DAGS),
        *(("run", f"{name}-run", name) for name in DAGS),
        ("backfill", "fill-0", "dag-0"),
    ]:
        served = [proc for proc in (a, b) if proc.serves(kind, NS, name)]
        assert len(served) == 1, (kind, name)
        assert served[0] is (a if dag_shard(NS, dag, 2) == 0 else b), (kind, name)
    assert [a.serves("pool", NS, "p"), b.serves("pool", NS, "p")].count(True) == 1
    assert not a.serves("run", NS, "unknown-run"), "a run no watch delivered yet waits for its event"
    # b took shard 1 from a: everything of shard 1 that b knows is queued on b
    shard_1 = {name for name in DAGS if dag_shard(NS, name, 2) == 1}
    assert {("run", NS, f"{name}-run") for name in shard_1} <= queued(b)
    assert not {key for key in queued(b) if key[0] == "run" and key[2].removesuffix("-run") not in shard_1}

    # a dies: after a lease duration of silence b serves everything, and enqueued shard 0's keys
    for _ in range(4):
        clock.now += 1.0
        await step(b)
    assert all(b.serves("run", NS, f"{name}-run") for name in DAGS)
    assert {("run", NS, f"{name}-run") for name in DAGS} <= queued(b)
    assert {("dag", NS, name) for name in DAGS} <= queued(b)
    assert ("backfill", NS, "fill-0") in queued(b)
    # and a, by its own clock, no longer serves anything: its passes stop before b's start (it looks
    # again after its next cycle, which finds the Leases b's and gives the shards up: then never)
    assert not any(a.serves("dag", NS, name) for name in DAGS)
    kept = next(name for name in DAGS if dag_shard(NS, name, 2) == 0)  # a still holds shard 0
    written = dict(kube.writes)
    assert await a.reconcile(("dag", NS, kept)) is not None
    assert kube.writes == written, "no pass, nothing written"
    await step(a)
    assert await a.reconcile(("dag", NS, kept)) is None


async def test_replicas_started_with_different_shard_counts_do_not_act_until_one_leaves() -> None:
    kube, clock = FakeKube(), Clock()
    acquired: list[frozenset[int]] = []

    def shards(identity: str, count: int) -> ControllerShards:
        return ControllerShards(
            kube,
            namespace="zonda",
            identity=identity,
            shard_count=count,
            lease_duration=3.0,
            on_acquired=acquired.append,
            monotonic=clock,
        )

    old, new = shards("old", 2), shards("new", 4)
    await old.step()
    assert old.served() == {0, 1}
    await new.step()  # a rolling update: a replica with --shards 4 beside one with 2
    await old.step()
    assert old.served() == frozenset() and new.served() == frozenset(), "both would act on one DAG"
    assert "run another --shards" in new.describe()
    await old.release()  # the old replica stops (SIGTERM): Leases released, member Lease deleted
    acquired.clear()
    await new.step()
    await new.step()
    assert new.served() == {0, 1, 2, 3}
    assert acquired, "what was skipped while waiting is looked at again"


async def test_a_key_met_while_its_shards_renewal_is_late_is_looked_at_again_not_dropped() -> None:
    """A busy loop (1,000 DAGs due at once at load 20) renews a Lease late: a DAG's wake-up that fires
    then must come back, or the DAG creates no run again until its shard changes hands."""
    kube, clock = FakeKube(), Clock()
    kube.cache = ObjectCache(frozenset({DAGS_PLURAL}))  # type: ignore[attr-defined]
    a = process(kube, "a", clock)
    await step(a)
    await kube.create_custom(DAGS_PLURAL, NS, dag_body("dag-0", schedule="@daily"))
    assert await a.reconcile(("dag", NS, "dag-0")) is not None  # a positive control: a pass, a wake-up
    written = dict(kube.writes)

    clock.now += 3.5  # past the lease duration (3 s) by a's own clock; its cycle has not run since
    assert not a.serves("dag", NS, "dag-0")
    retry = await a.reconcile(("dag", NS, "dag-0"))
    assert retry is not None, "looked at again, not dropped"
    assert kube.writes == written, "no pass while the renewal is late"
    assert (retry - clock_now_utc()).total_seconds() <= 1.0 + 0.5  # after the next cycle (every 1 s)

    await step(a)  # the late renewal: the shard is a's again
    assert a.serves("dag", NS, "dag-0")
    assert await a.reconcile(("dag", NS, "dag-0")) is not None


async def test_a_run_key_met_while_its_shards_renewal_is_late_is_looked_at_again() -> None:
    """In a chain, a run's only wake-up is its task pod's event (`on_task_pod` enqueues the run key):
    dropped while the renewal was late, the run never moved again (100 runs on two replicas stalled
    with their first task done, both replicas idle)."""
    kube, clock = FakeKube(), Clock()
    kube.cache = ObjectCache(frozenset({DAGS_PLURAL}))  # type: ignore[attr-defined]
    a = process(kube, "a", clock)
    know(a)
    await step(a)
    key = ("run", NS, "dag-0-run")
    assert a.serves(*key)  # a positive control: a's shard, renewed now
    clock.now += 3.5  # past the lease duration (3 s) by a's own clock; its cycle has not run since
    assert not a.serves(*key)
    retry = await a.reconcile(key)
    assert retry is not None, "looked at again, not dropped"
    assert (retry - clock_now_utc()).total_seconds() <= 1.0 + 0.5  # after the next cycle (every 1 s)
    await step(a)  # the late renewal: the shard is a's again
    assert a.serves(*key)


async def test_the_shard_leases_are_renewed_while_a_pass_holds_the_admission_lock() -> None:
    """A launching pass holds pool admission's lock across the slot ledger's API calls; the lease
    loop gives slots back under the same lock. Awaited there, a burst of passes delayed every renewal
    (this replica then skipped its own shards' keys): the loop must cycle on while the lock is held,
    and the slots be given back once it is free, by one pending release however many cycles ran."""
    kube = FakeKube()
    kube.cache = ObjectCache(frozenset({DAGS_PLURAL}))  # type: ignore[attr-defined]
    proc = process(kube, "a", Clock())
    assert proc.services is not None and proc.services.shards is not None
    shards, admission = proc.services.shards, proc.services.reconcilers.runs.admission
    shards.renew_every = 0.05
    await shards.ledger.refresh(NS)  # a namespace with a ledger: every cycle gives slots back there

    renewed: asyncio.Queue[None] = asyncio.Queue()
    step_once = shards.step

    async def counted_step() -> list[str]:
        changed = await step_once()
        renewed.put_nowait(None)
        return changed

    shards.step = counted_step  # type: ignore[method-assign]

    async def cycles(count: int) -> None:
        """Until the loop has renewed (stepped) `count` more times."""
        while not renewed.empty():
            renewed.get_nowait()
        for _ in range(count):
            await renewed.get()

    loop = asyncio.create_task(shards.run(proc.after_shard_cycle))
    try:
        await asyncio.wait_for(cycles(2), timeout=10)  # a positive control: the loop cycles
        assert shards.served() == {0, 1}
        async with admission.lock:  # a slow launching pass
            await asyncio.wait_for(cycles(3), timeout=10)  # before the fix: the first never ended
            assert list(admission._releasing) == [NS], "one release pending, not one per cycle"
        await asyncio.wait_for(asyncio.gather(*admission._releasing.values()), timeout=10)
        assert not admission._releasing, "given back once the lock was free"
    finally:
        loop.cancel()


def clock_now_utc() -> datetime:
    return datetime.now(UTC)
