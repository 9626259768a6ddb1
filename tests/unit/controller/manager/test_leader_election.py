"""Controller leader election on the shared Lease algorithm (`controller.coordination.leases`), clocks
injected.

Real: the algorithm and the Lease manifests. The API is `controller.kube.fake.FakeKube` (resourceVersion
preconditions enforced as the apiserver does); the Lease tests in the cluster tier use the real one.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta

import pytest

from controller.kube import KubeError
from controller.kube.fake import FakeKube
from controller.manager.leader import LeaderElector

T0 = datetime(2026, 1, 1, tzinfo=UTC)
LEASE = "zonda-controller"


class Clock:
    """One process's clocks: monotonic seconds, and a wall clock that moves with them."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def monotonic(self) -> float:
        return self.seconds

    def wall(self) -> datetime:
        return T0 + timedelta(seconds=self.seconds)


def elector(
    kube: FakeKube, identity: str, clock: Clock, transitions: list[str], lease_duration: float = 15
) -> LeaderElector:
    return LeaderElector(
        kube,
        namespace="zonda",
        name=LEASE,
        identity=identity,
        on_started_leading=lambda: transitions.append(f"{identity} leads"),
        on_stopped_leading=lambda: transitions.append(f"{identity} stops"),
        lease_duration=lease_duration,
        wall_clock=clock.wall,
        monotonic=clock.monotonic,
    )


@pytest.fixture
def kube() -> FakeKube:
    return FakeKube()


async def test_one_replica_leads_and_the_other_waits_while_it_renews(kube: FakeKube) -> None:
    clock, seen = Clock(), []
    a, b = elector(kube, "a", clock, seen), elector(kube, "b", clock, seen)
    await a.step()
    await b.step()
    for _ in range(10):  # 50 s of renewals, each well within the lease
        clock.seconds += 5
        await a.step()
        await b.step()
    assert (a.leading, b.leading) == (True, False)
    assert seen == ["a leads"]
    lease = await kube.get_lease("zonda", LEASE)
    assert lease is not None and lease["spec"]["holderIdentity"] == "a"
    assert lease["spec"]["leaseTransitions"] == 0


async def test_a_silent_leader_is_replaced_after_a_lease_duration_of_the_others_clock(kube: FakeKube) -> None:
    clock_a, clock_b, seen = Clock(), Clock(), []
    a, b = elector(kube, "a", clock_a, seen), elector(kube, "b", clock_b, seen)
    await a.step()
    await b.step()  # b first sees a's Lease now, by b's own clock
    clock_b.seconds += 14
    await b.step()
    assert not b.leading, "14 s of silence is within the 15 s lease"
    clock_b.seconds += 1
    await b.step()
    assert b.leading
    lease = await kube.get_lease("zonda", LEASE)
    assert lease is not None and lease["spec"]["holderIdentity"] == "b"
    assert lease["spec"]["leaseTransitions"] == 1
    clock_a.seconds += 1  # a wakes up (it was paused, say) and finds b leading
    await a.step()
    assert (a.leading, b.leading) == (False, True)
    assert seen == ["a leads", "b leads", "a stops"]


async def test_a_leader_that_finds_another_holder_stops_leading(kube: FakeKube) -> None:
    clock, seen = Clock(), []
    a = elector(kube, "a", clock, seen)
    await a.step()
    lease = await kube.get_lease("zonda", LEASE)
    assert lease is not None
    lease["spec"]["holderIdentity"] = "b"
    await kube.replace_lease("zonda", lease)
    clock.seconds += 2
    await a.step()
    assert not a.leading and seen == ["a leads", "a stops"]


async def test_a_leader_that_cannot_reach_the_api_stops_leading_at_the_renew_deadline(
    kube: FakeKube, monkeypatch: pytest.MonkeyPatch
) -> None:
    """client-go's RenewDeadline: 10 s of a 15 s Lease, so it has stopped before another replica may
    take the Lease (15 s after it last saw it renewed, by its own clock)."""
    clock, seen = Clock(), []
    a = elector(kube, "a", clock, seen)
    await a.step()

    async def unreachable(namespace: str, name: str) -> None:
        raise KubeError(503, "the apiserver is unavailable")

    monkeypatch.setattr(kube, "get_lease", unreachable)
    clock.seconds += 9
    await a.step()
    assert a.leading, "still within the renew deadline"
    clock.seconds += 1
    await a.step()
    assert not a.leading and seen == ["a leads", "a stops"]


async def test_a_lease_call_never_answered_is_cut_off_and_the_leader_stops_at_the_renew_deadline(
    kube: FakeKube, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read of the Lease the apiserver accepted and never answers (a half-open connection, a proxy
    that stopped forwarding): each round ends when the call's bound does (half the renew deadline, at
    least 1 s: here 1 s of a 3 s Lease) instead of waiting for ever, so the leader still stops leading
    at the renew deadline (2 s)."""
    clock, seen = Clock(), []
    a = elector(kube, "a", clock, seen, lease_duration=3)
    await a.step()
    never = asyncio.Event()

    async def silent(namespace: str, name: str) -> None:
        await never.wait()

    monkeypatch.setattr(kube, "get_lease", silent)
    with pytest.raises(TimeoutError):  # the control: the call itself never ends
        await asyncio.wait_for(kube.get_lease("zonda", LEASE), 0.2)
    clock.seconds += 1
    started = time.monotonic()
    await asyncio.wait_for(a.step(), 10)  # the test's own guard, far past the bound
    assert 0.9 <= time.monotonic() - started < 5
    assert a.leading, "still within the renew deadline"
    clock.seconds += 1
    await asyncio.wait_for(a.step(), 10)
    assert not a.leading and seen == ["a leads", "a stops"]


async def test_a_released_lease_is_taken_at_once(kube: FakeKube) -> None:
    clock, seen = Clock(), []
    a, b = elector(kube, "a", clock, seen), elector(kube, "b", clock, seen)
    await a.step()
    await b.step()
    await a.release()
    await b.step()
    assert (a.leading, b.leading) == (False, True)
    assert seen == ["a leads", "a stops", "b leads"]
