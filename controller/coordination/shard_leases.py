"""Shard and member Leases (coordination.k8s.io/v1): who runs which shard, and who is alive.

One implementation for every sharded component (the triggerer, the controller with `--shards`), told
apart by `ShardLeaseNames.component`:

Shard Lease ``zonda-<component>-shard-<n>``: its holder runs shard n's work. `leaseTransitions` goes up
by one every time the holder changes (including from "nobody"), so (holder, transitions) is a fencing
token: a replica that held the Lease before a takeover can no longer match it.

Member Lease ``zonda-<component>-member-<identity>``: each replica renews one to advertise itself and
its capacity, so a replica holding nothing yet still counts when the others compute their fair share.

Expiry follows client-go's leader election: a Lease is expired when *this* replica has seen it
unchanged for `leaseDurationSeconds` of its own monotonic clock, never by comparing another machine's
`renewTime` with ours, so clock skew between nodes cannot cause a premature takeover. The price is that
a freshly started replica waits one lease duration before taking over a dead replica's Leases; Leases
released on a graceful shutdown are taken at once.

`ShardMembership` is one replica's cycle over them (renew, advertise, plan with `shards.plan_shards`,
release, acquire): the triggerer and the controller run the same one.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from controller.coordination import leases
from controller.coordination.leases import LeaseObserver
from controller.coordination.shards import plan_shards
from controller.kube import Conflict, KubeError, NotFound
from controller.kube.protocol import KubeApi
from zonda.resources.wire import ANNOTATION_CAPACITY, LABEL_COMPONENT, LABEL_LEASE_KIND, LABEL_SHARD

log = logging.getLogger(__name__)

COMPONENT_LABEL = LABEL_COMPONENT
LEASE_KIND_LABEL = LABEL_LEASE_KIND
SHARD_KIND = "shard"
MEMBER_KIND = "member"
SHARD_NUMBER_LABEL = LABEL_SHARD
CAPACITY_ANNOTATION = ANNOTATION_CAPACITY
#: The shard count a replica was started with, on its member Lease: replicas that disagree would
#: hash the same key into different shards.
SHARD_COUNT_ANNOTATION = "zonda.dev/shard-count"
#: A member Lease silent this many lease durations belongs to a replica long gone: delete it.
STALE_MEMBER_DURATIONS = 10

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")

__all__ = [
    "Holding",
    "LeaseObserver",
    "LeaseRecord",
    "ShardLeaseKeeper",
    "ShardLeaseNames",
    "ShardMembership",
    "holds",
]


@dataclass(frozen=True)
class ShardLeaseNames:
    """The names and labels of one component's shard and member Leases."""

    component: str

    @property
    def shard_prefix(self) -> str:
        return f"zonda-{self.component}-shard-"

    @property
    def member_prefix(self) -> str:
        return f"zonda-{self.component}-member-"

    @property
    def selector(self) -> str:
        """Every Lease the component owns, for one list call per cycle."""
        return f"{COMPONENT_LABEL}={self.component}"

    def shard_lease_name(self, shard: int) -> str:
        return f"{self.shard_prefix}{shard}"

    def member_lease_name(self, identity: str) -> str:
        """The member Lease of `identity`; identities that are not DNS labels get a slug and a hash."""
        prefix = self.member_prefix
        if _DNS_LABEL.match(identity) and len(prefix) + len(identity) <= 253:
            return prefix + identity
        slug = re.sub(r"[^a-z0-9-]+", "-", identity.lower()).strip("-")[:40].strip("-") or "x"
        return f"{prefix}{slug}-{hashlib.sha256(identity.encode()).hexdigest()[:8]}"

    def shard_labels(self, shard: int) -> dict[str, str]:
        return {COMPONENT_LABEL: self.component, LEASE_KIND_LABEL: SHARD_KIND, SHARD_NUMBER_LABEL: str(shard)}

    def member_labels(self) -> dict[str, str]:
        return {COMPONENT_LABEL: self.component, LEASE_KIND_LABEL: MEMBER_KIND}


class LeaseRecord(leases.LeaseRecord):
    """A Lease as read from the API, with its shard number and advertised capacity."""

    @property
    def shard(self) -> int | None:
        """The shard a shard Lease is for (from its label), None for other Leases."""
        if self.labels.get(LEASE_KIND_LABEL) != SHARD_KIND:
            return None
        try:
            return int(self.labels[SHARD_NUMBER_LABEL])
        except (KeyError, ValueError):
            return None

    @property
    def capacity(self) -> int | None:
        try:
            return int(self.annotations[CAPACITY_ANNOTATION])
        except (KeyError, ValueError):
            return None


@dataclass(frozen=True)
class Holding:
    """A shard Lease this replica holds: the fencing token it acquired, and when it last renewed."""

    shard: int
    lease_name: str
    transitions: int
    acquire_time: datetime
    resource_version: str
    duration_seconds: float
    #: Monotonic time at which the last successful renewal was *sent* (a conservative lower bound).
    renewed_at: float

    def fencing_token(self, identity: str) -> str:
        return f"{identity}/{self.transitions}"

    def is_current(self, now: float) -> bool:
        """Whether the lease is still ours by our own clock: renewed less than a lease duration ago."""
        return now - self.renewed_at < self.duration_seconds


def holds(record: LeaseRecord | None, holding: Holding, identity: str, now: float) -> bool:
    """The fencing check before any write: the Lease as just read is still the one we acquired.

    Purely computational. Three conditions, each closing a different hole: the holder is us (nobody
    stole or took over the Lease), the transitions equal the ones we acquired with (we did not lose it
    and get it back in between, with another replica writing meanwhile), and our own renewal is recent
    (an apiserver we cannot reach may already have let another replica take it).
    """
    return (
        record is not None
        and record.holder == identity
        and record.transitions == holding.transitions
        and holding.is_current(now)
    )


class ShardLeaseKeeper(leases.LeaseWriter):
    """Acquires, renews, verifies and releases one replica's shard and member Leases."""

    def __init__(self, kube: KubeApi, *, names: ShardLeaseNames, **writer: Any) -> None:
        super().__init__(kube, **writer)
        self.names = names

    async def list_records(self) -> list[LeaseRecord]:
        bodies = await self.bounded(self.kube.list_leases(self.namespace, self.names.selector))
        return [LeaseRecord.from_body(body) for body in bodies]

    async def read(self, name: str) -> LeaseRecord | None:
        body = await self.bounded(self.kube.get_lease(self.namespace, name))
        return None if body is None else LeaseRecord.from_body(body)

    async def verify(self, holding: Holding) -> bool:
        """Re-read the shard's Lease and apply the fencing check (`holds`)."""
        return holds(await self.read(holding.lease_name), holding, self.identity, self.monotonic())

    def shard_labels(self, shard: int) -> dict[str, str]:
        return self.names.shard_labels(shard)

    async def acquire(self, shard: int, record: LeaseRecord | None) -> Holding | None:
        """Take shard `shard`'s Lease, free or expired as `record` showed it; None if another won.

        Always a transition, even from our own identity: a previous process of this identity must
        not be able to match the new fencing token.
        """
        name = self.names.shard_lease_name(shard)
        sent_at = self.monotonic()
        acquired = await self.hold(name, record, labels=self.shard_labels(shard), renewal=False)
        if acquired is None:
            return None  # another replica acquired it first: that is the point of the precondition
        log.info("Acquired shard %d (lease %s, transitions %d)", shard, name, acquired.transitions)
        return Holding(
            shard=shard,
            lease_name=name,
            transitions=acquired.transitions,
            acquire_time=acquired.acquire_time or self.wall_clock(),
            resource_version=acquired.resource_version or "",
            duration_seconds=self.lease_duration,
            renewed_at=sent_at,
        )

    async def renew(self, holding: Holding) -> Holding | None:
        """Renew; the updated holding, or None when the Lease is no longer ours (lost).

        A network or server error is neither: the holding comes back unrenewed and the caller drops it
        once `is_current` turns false.
        """
        for _ in range(2):
            sent_at = self.monotonic()
            # a renewal is worth its answer while the shard is still ours by our own clock: bounded by
            # that (at least the Lease call's bound), not cut off at the call's bound on a controller
            # whose answers wait for a CPU (2 replicas with 100 runs at once on 2 cores at load 11:
            # renewals past the 2 s bound of a 6 s Lease timed out, the shards moved 30 times in 4
            # minutes, a 40 s gap p99); a call never answered still ends when the shard lapses
            still_ours = holding.renewed_at + holding.duration_seconds - sent_at
            try:
                body = await self.bounded(
                    self.kube.replace_lease(
                        self.namespace,
                        self.body(
                            name=holding.lease_name,
                            labels=self.shard_labels(holding.shard),
                            holder=self.identity,
                            transitions=holding.transitions,
                            acquire_time=holding.acquire_time,
                            renew_time=self.wall_clock(),
                            resource_version=holding.resource_version,
                        ),
                    ),
                    max(self.call_seconds, still_ours),
                )
            except NotFound:
                return None
            except Conflict:
                current = await self.read(holding.lease_name)
                if (
                    current is None
                    or current.holder != self.identity
                    or (current.transitions != holding.transitions)
                ):
                    return None
                holding = replace(holding, resource_version=current.resource_version or "")
                continue
            return replace(holding, resource_version=body["metadata"]["resourceVersion"], renewed_at=sent_at)
        return holding

    async def release(self, holding: Holding) -> None:
        """Clear the holder so another replica takes the shard at once (graceful shutdown, rebalancing)."""
        try:
            await self.bounded(
                self.kube.replace_lease(
                    self.namespace,
                    self.body(
                        name=holding.lease_name,
                        labels=self.shard_labels(holding.shard),
                        holder=None,
                        transitions=holding.transitions,
                        acquire_time=None,
                        renew_time=None,
                        resource_version=holding.resource_version,
                    ),
                )
            )
            log.info("Released shard %d", holding.shard)
        except (Conflict, NotFound):
            log.info("Shard %d was no longer ours to release", holding.shard)

    # --------------------------------------------------------------------------------- membership

    async def advertise(
        self, current: LeaseRecord | None, *, shard_capacity: int, shard_count: int | None = None
    ) -> None:
        """Create or renew this replica's member Lease (holder = identity, shard capacity annotated)."""
        name = self.names.member_lease_name(self.identity)
        annotations = {CAPACITY_ANNOTATION: str(shard_capacity)}
        if shard_count is not None:
            annotations[SHARD_COUNT_ANNOTATION] = str(shard_count)
        written = await self.hold(
            name,
            current,
            labels=self.names.member_labels(),
            annotations=annotations,
            renewal=True,
        )
        if written is None:
            log.debug("Member lease %s changed under us; renewing next cycle", name)

    async def delete(self, name: str) -> None:
        """Delete a Lease (our member Lease on shutdown, a long-dead replica's member Lease)."""
        await self.bounded(self.kube.delete_lease(self.namespace, name))


class ShardMembership:
    """One replica's shard Leases: the holdings and the cycle that renews, rebalances and hands over.

    `on_lost(shard, reason)` runs (synchronously, before anything else happens) whenever a shard stops
    being ours, so its owner stops the shard's work before another replica can hold it;
    `on_acquired(shards)` after a cycle took new shards. `holdings` is the live dict: read it, never
    write it (`lose` removes).
    """

    def __init__(
        self,
        keeper: ShardLeaseKeeper,
        *,
        shard_count: int,
        on_lost: Callable[[int, str], None] = lambda shard, reason: None,
        on_acquired: Callable[[frozenset[int]], None] = lambda shards: None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.keeper = keeper
        self.names = keeper.names
        self.identity = keeper.identity
        self.shard_count = shard_count
        self.on_lost = on_lost
        self.on_acquired = on_acquired
        self.monotonic = monotonic
        self.observer = LeaseObserver()
        self.holdings: dict[int, Holding] = {}
        #: The Leases as the last cycle listed them (other components read theirs from here).
        self.records: list[LeaseRecord] = []
        #: Live replicas whose member Lease advertises another shard count (as of the last cycle).
        self.disagreeing: list[str] = []

    def current(self, shard: int) -> bool:
        """Whether shard `shard` is ours by our own clock right now (the check before a pass)."""
        holding = self.holdings.get(shard)
        return holding is not None and holding.is_current(self.monotonic())

    def renewal_late(self, shard: int) -> bool:
        """Held, but not renewed within a lease duration by our own clock, and not given up yet: the
        cycle under way either renews the Lease or loses the shard (`on_lost`, the next holder takes
        over its work). Work of that shard met now waits for it, rather than being dropped while the
        shard may stay ours."""
        return shard in self.holdings and not self.current(shard)

    def lose(self, shard: int, reason: str) -> None:
        if self.holdings.pop(shard, None) is not None:
            log.warning("Gave up shard %d (%s)", shard, reason)
            self.on_lost(shard, reason)

    def drop_lapsed(self) -> None:
        """Lose every shard not renewed within its lease duration (another replica may hold it now)."""
        now = self.monotonic()
        for holding in list(self.holdings.values()):
            if not holding.is_current(now):
                self.lose(holding.shard, f"not renewed for {now - holding.renewed_at:.1f}s")

    async def cycle(self, *, capacity: int, may_acquire: bool = True) -> None:
        """Renew held shards and our member Lease, then release or acquire as `plan_shards` says."""
        held = list(self.holdings.values())
        renewals = await asyncio.gather(
            *(self.keeper.renew(holding) for holding in held), return_exceptions=True
        )
        for holding, renewal in zip(held, renewals, strict=True):
            if renewal is None:
                self.lose(holding.shard, "its Lease now belongs to another replica")
            elif isinstance(renewal, BaseException):
                log.warning("Could not renew shard %d: %r", holding.shard, renewal)
            elif holding.shard in self.holdings:
                self.holdings[holding.shard] = renewal

        records = await self.keeper.list_records()
        self.records = records
        now = self.monotonic()
        for record in records:
            self.observer.observe(record, now)
        self.observer.forget_except({record.name for record in records})
        own_member = self.names.member_lease_name(self.identity)
        members = [r for r in records if r.labels.get(LEASE_KIND_LABEL) == MEMBER_KIND]
        own_record = next((record for record in members if record.name == own_member), None)
        await self.keeper.advertise(own_record, shard_capacity=capacity, shard_count=self.shard_count)
        await self._delete_stale_members(members, own_member, now)
        self.disagreeing = sorted(
            holder
            for record in members
            if (holder := self.observer.live_holder(record, now)) not in (None, self.identity)
            and record.annotations.get(SHARD_COUNT_ANNOTATION, str(self.shard_count)) != str(self.shard_count)
        )

        shard_records = {
            r.shard: r for r in records if r.shard is not None and 0 <= r.shard < self.shard_count
        }
        holders = {
            shard: self._holder(shard, shard_records.get(shard), now) for shard in range(self.shard_count)
        }
        capacities = {
            holder: record.capacity if record.capacity is not None else self.shard_count
            for record in members
            if (holder := self.observer.live_holder(record, now)) is not None and holder != self.identity
        }
        plan = plan_shards(
            identity=self.identity,
            shard_count=self.shard_count,
            capacity=capacity,
            holders=holders,
            capacities=capacities,
        )
        for shard in plan.release:
            released = self.holdings.get(shard)
            if released is not None:
                self.lose(shard, "rebalancing: another replica is below its fair share")
                await self.keeper.release(released)
        if plan.acquire and may_acquire:
            acquired = await asyncio.gather(
                *(self.keeper.acquire(shard, shard_records.get(shard)) for shard in plan.acquire),
                return_exceptions=True,
            )
            taken = set()
            for shard, acquisition in zip(plan.acquire, acquired, strict=True):
                if isinstance(acquisition, Holding):
                    self.holdings[shard] = acquisition
                    taken.add(shard)
                elif isinstance(acquisition, BaseException):
                    log.warning("Could not acquire shard %d: %s", shard, acquisition)
            if taken:
                self.on_acquired(frozenset(taken))

    def _holder(self, shard: int, record: LeaseRecord | None, now: float) -> str | None:
        if shard in self.holdings:
            return self.identity
        if record is None:
            return None
        holder = self.observer.live_holder(record, now)
        # A Lease naming us that we do not hold is a previous process of ours: take it over.
        return None if holder == self.identity else holder

    async def _delete_stale_members(self, members: Iterable[LeaseRecord], own: str, now: float) -> None:
        for record in members:
            silent = self.observer.silent_for(record, now)
            if record.name != own and silent >= STALE_MEMBER_DURATIONS * max(record.duration_seconds, 1.0):
                with contextlib.suppress(KubeError, OSError, TimeoutError):
                    await self.keeper.delete(record.name)

    async def release_all(self) -> list[int]:
        """Hand every shard over at once and delete our member Lease (graceful shutdown)."""
        holdings = list(self.holdings.values())
        self.holdings.clear()
        await asyncio.gather(*(self.keeper.release(holding) for holding in holdings), return_exceptions=True)
        with contextlib.suppress(KubeError, OSError, TimeoutError):
            await self.keeper.delete(self.names.member_lease_name(self.identity))
        return sorted(holding.shard for holding in holdings)
