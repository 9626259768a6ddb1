"""`ShardMembership` (the shard Lease cycle the triggerer and the controller share) against the
in-memory FakeKube: sharing, rebalancing when a replica joins, handover when one dies or stops, and
the fencing token a dead holder can no longer match, a renewal never answered. Clocks are injected:
no sleeps (but for the bound of a call never answered, which is asyncio's)."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import Any

import pytest

from controller.coordination.shard_leases import ShardLeaseKeeper, ShardLeaseNames, ShardMembership, holds
from controller.kube.fake import FakeKube

NAMES = ShardLeaseNames("controller")
SHARDS = 4
DURATION = 3.0


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Replica:
    def __init__(self, kube: FakeKube, identity: str, clock: Clock) -> None:
        self.lost: list[tuple[int, str]] = []
        self.acquired: list[frozenset[int]] = []
        keeper = ShardLeaseKeeper(
            kube,
            names=NAMES,
            namespace="zonda",
            identity=identity,
            lease_duration=DURATION,
            wall_clock=lambda: datetime(2026, 12, 2, tzinfo=UTC),
            monotonic=clock,
        )
        self.membership = ShardMembership(
            keeper,
            shard_count=SHARDS,
            on_lost=lambda shard, reason: self.lost.append((shard, reason)),
            on_acquired=self.acquired.append,
            monotonic=clock,
        )

    @property
    def held(self) -> set[int]:
        return set(self.membership.holdings)

    async def cycle(self) -> None:
        self.membership.drop_lapsed()
        await self.membership.cycle(capacity=SHARDS)


async def test_a_lone_replica_holds_every_shard_and_a_joiner_gets_half() -> None:
    kube, clock = FakeKube(), Clock()
    a = Replica(kube, "a", clock)
    await a.cycle()
    assert a.held == {0, 1, 2, 3}
    assert a.acquired == [frozenset({0, 1, 2, 3})]

    b = Replica(kube, "b", clock)
    await b.cycle()  # advertises itself; every shard is held, so it takes none yet
    assert b.held == set()
    await a.cycle()  # sees b below its floor: gives up its highest shards
    assert a.held == {0, 1}
    assert sorted(shard for shard, _ in a.lost) == [2, 3]
    await b.cycle()
    assert b.held == {2, 3}
    await a.cycle()
    await b.cycle()
    assert (a.held, b.held) == ({0, 1}, {2, 3})  # settled: no flapping


async def test_a_dead_replicas_shards_move_after_the_lease_duration_with_a_new_fencing_token() -> None:
    kube, clock = FakeKube(), Clock()
    a, b = Replica(kube, "a", clock), Replica(kube, "b", clock)
    for replica in (a, b, a, b):
        await replica.cycle()
    assert (a.held, b.held) == ({0, 1}, {2, 3})
    stale = a.membership.holdings[0]

    # a stops renewing (SIGKILL); b keeps cycling every second
    for _ in range(int(DURATION) - 1):
        clock.now += 1.0
        await b.cycle()
    assert b.held == {2, 3}, "taken over before the lease duration passed"
    clock.now += 1.0  # a's Leases unchanged for a whole duration, as b saw them
    await b.cycle()
    assert b.held == {0, 1, 2, 3}
    record = await b.membership.keeper.read(NAMES.shard_lease_name(0))
    assert record is not None and record.holder == "b"
    assert record.transitions == stale.transitions + 1
    # the dead holder's token no longer matches, even were its own clock wrong about the lease
    assert not holds(record, stale, "a", stale.renewed_at)
    # and by its own clock it stopped counting the shard as its own a lease duration after renewing
    assert not a.membership.current(0)
    a.lost.clear()
    a.membership.drop_lapsed()
    assert a.held == set() and {shard for shard, _ in a.lost} == {0, 1}


async def test_a_stopping_replica_hands_its_shards_over_at_once() -> None:
    kube, clock = FakeKube(), Clock()
    a, b = Replica(kube, "a", clock), Replica(kube, "b", clock)
    for replica in (a, b, a, b):
        await replica.cycle()
    assert await a.membership.release_all() == [0, 1]
    await b.cycle()  # no waiting for expiry: the Leases were released and the member Lease deleted
    assert b.held == {0, 1, 2, 3}


async def test_components_keep_apart() -> None:
    kube, clock = FakeKube(), Clock()
    controller = Replica(kube, "a", clock)
    await controller.cycle()
    triggerer_keeper = ShardLeaseKeeper(
        kube, names=ShardLeaseNames("triggerer"), namespace="zonda", identity="t", lease_duration=DURATION
    )
    triggerer = ShardMembership(triggerer_keeper, shard_count=SHARDS, monotonic=clock)
    await triggerer.cycle(capacity=SHARDS)
    assert set(triggerer.holdings) == {0, 1, 2, 3}  # the controller's Leases are not the triggerer's
    assert NAMES.shard_lease_name(2) == "zonda-controller-shard-2"


async def test_a_renewal_never_answered_fails_at_the_call_bound_and_the_shards_lapse_by_our_clock(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The shard Leases' replaces accepted and never answered (a half-open connection): each renewal
    fails after the Lease call's bound (1 s of a 3 s Lease) as a transient error, the cycle goes on
    (list, advertise), and the shards lapse by our own clock; answered again, the next cycle takes
    them back with a new fencing token."""
    kube, clock = FakeKube(), Clock()
    a = Replica(kube, "a", clock)
    await a.cycle()
    assert a.held == {0, 1, 2, 3}
    replace, never = kube.replace_lease, asyncio.Event()

    async def silent_for_shards(namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        if body["metadata"]["name"].startswith(NAMES.shard_prefix):
            await never.wait()
        return await replace(namespace, body)

    monkeypatch.setattr(kube, "replace_lease", silent_for_shards)
    shard = await kube.get_lease("zonda", NAMES.shard_lease_name(0))
    assert shard is not None
    with pytest.raises(TimeoutError):  # the control: the call itself never ends
        await asyncio.wait_for(kube.replace_lease("zonda", shard), 0.2)
    replaced = kube.writes.get("replace leases", 0)
    clock.now += 1
    started = time.monotonic()
    await asyncio.wait_for(a.cycle(), 10)  # the test's own guard, far past the bound
    assert 0.9 <= time.monotonic() - started < 5, "the four renewals, at once, each cut off at 1 s"
    assert a.held == {0, 1, 2, 3} and a.lost == [], "not renewed, not lost yet"
    assert kube.writes["replace leases"] == replaced + 1, "the cycle went on: the member Lease renewed"
    clock.now += DURATION
    a.membership.drop_lapsed()
    assert a.held == set() and sorted(shard for shard, _ in a.lost) == [0, 1, 2, 3]
    monkeypatch.setattr(kube, "replace_lease", replace)
    await a.cycle()
    assert a.held == {0, 1, 2, 3}
    assert all(holding.transitions == 1 for holding in a.membership.holdings.values())


async def test_a_slow_renewal_answered_while_the_shard_is_still_ours_keeps_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A renewal answered after the Lease call's bound (1 s of a 3 s Lease) but before the shard would
    lapse by our own clock renews it: a controller whose requests wait for a CPU or a connection keeps
    its shards (cut off at the call's bound, every renewal failed and the shards moved again and again)."""
    kube, clock = FakeKube(), Clock()
    a = Replica(kube, "a", clock)
    await a.cycle()
    assert a.held == {0, 1, 2, 3}
    replace = kube.replace_lease

    async def slow_for_shards(namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        if body["metadata"]["name"].startswith(NAMES.shard_prefix):
            await asyncio.sleep(1.5)  # the slow answer itself, past the 1 s call bound
        return await replace(namespace, body)

    monkeypatch.setattr(kube, "replace_lease", slow_for_shards)
    clock.now += 1  # 2 s of the Lease left by our clock
    await asyncio.wait_for(a.cycle(), 10)
    assert all(holding.renewed_at == clock.now for holding in a.membership.holdings.values()), (
        "each shard renewed by its slow answer"
    )
    clock.now += DURATION - 0.5  # past the old renewal's lapse, within the new one's
    a.membership.drop_lapsed()
    assert a.held == {0, 1, 2, 3} and a.lost == []
