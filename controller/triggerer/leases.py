"""Shard and member Leases (coordination.k8s.io/v1): who runs which shard, and who is alive.

Shard Lease ``zonda-triggerer-shard-<n>``: its holder runs shard n's triggers. `leaseTransitions` goes
up by one every time the holder changes (including from "nobody"), so (holder, transitions) is a
fencing token: a replica that held the Lease before a takeover can no longer match it.

Member Lease ``zonda-triggerer-member-<identity>``: each replica renews one to advertise itself and its
capacity, so a replica holding nothing yet still counts when the others compute their fair share.

Expiry follows client-go's leader election: a Lease is expired when *this* replica has seen it
unchanged for `leaseDurationSeconds` of its own monotonic clock, never by comparing another machine's
`renewTime` with ours, so clock skew between nodes cannot cause a premature takeover. The price is that
a freshly started replica waits one lease duration before taking over a dead replica's Leases; Leases
released on a graceful shutdown are taken at once.
"""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass, replace
from datetime import datetime

from controller.coordination import leases
from controller.coordination.leases import LeaseObserver
from controller.kube import Conflict, NotFound
from zonda.resources.wire import ANNOTATION_CAPACITY, LABEL_COMPONENT, LABEL_LEASE_KIND, LABEL_SHARD

log = logging.getLogger(__name__)

COMPONENT_LABEL = LABEL_COMPONENT
COMPONENT = "triggerer"
LEASE_KIND_LABEL = LABEL_LEASE_KIND
SHARD_KIND = "shard"
MEMBER_KIND = "member"
SHARD_NUMBER_LABEL = LABEL_SHARD
CAPACITY_ANNOTATION = ANNOTATION_CAPACITY
SHARD_LEASE_PREFIX = "zonda-triggerer-shard-"
MEMBER_LEASE_PREFIX = "zonda-triggerer-member-"
#: Every Lease the triggerer owns, for one list call per cycle.
LEASES_SELECTOR = f"{COMPONENT_LABEL}={COMPONENT}"

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")

__all__ = ["Holding", "LeaseKeeper", "LeaseObserver", "LeaseRecord", "holds"]


def shard_lease_name(shard: int) -> str:
    return f"{SHARD_LEASE_PREFIX}{shard}"


def member_lease_name(identity: str) -> str:
    """``zonda-triggerer-member-<identity>``; identities that are not DNS labels get a slug and a hash."""
    if _DNS_LABEL.match(identity) and len(MEMBER_LEASE_PREFIX) + len(identity) <= 253:
        return MEMBER_LEASE_PREFIX + identity
    slug = re.sub(r"[^a-z0-9-]+", "-", identity.lower()).strip("-")[:40].strip("-") or "x"
    return f"{MEMBER_LEASE_PREFIX}{slug}-{hashlib.sha256(identity.encode()).hexdigest()[:8]}"


class LeaseRecord(leases.LeaseRecord):
    """A Lease as read from the API, with the triggerer's shard number and capacity."""

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


class LeaseKeeper(leases.LeaseWriter):
    """Acquires, renews, verifies and releases this replica's shard and member Leases."""

    async def list_records(self) -> list[LeaseRecord]:
        bodies = await self.kube.list_leases(self.namespace, LEASES_SELECTOR)
        return [LeaseRecord.from_body(body) for body in bodies]

    async def read(self, name: str) -> LeaseRecord | None:
        body = await self.kube.get_lease(self.namespace, name)
        return None if body is None else LeaseRecord.from_body(body)

    async def verify(self, holding: Holding) -> bool:
        """Re-read the shard's Lease and apply the fencing check (`holds`)."""
        return holds(await self.read(holding.lease_name), holding, self.identity, self.monotonic())

    @staticmethod
    def shard_labels(shard: int) -> dict[str, str]:
        return {COMPONENT_LABEL: COMPONENT, LEASE_KIND_LABEL: SHARD_KIND, SHARD_NUMBER_LABEL: str(shard)}

    async def acquire(self, shard: int, record: LeaseRecord | None) -> Holding | None:
        """Take shard `shard`'s Lease, free or expired as `record` showed it; None if another won.

        Always a transition, even from our own identity: a previous process of this identity must
        not be able to match the new fencing token.
        """
        name = shard_lease_name(shard)
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
            try:
                body = await self.kube.replace_lease(
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
            await self.kube.replace_lease(
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
            log.info("Released shard %d", holding.shard)
        except (Conflict, NotFound):
            log.info("Shard %d was no longer ours to release", holding.shard)

    # --------------------------------------------------------------------------------- membership

    async def advertise(self, current: LeaseRecord | None, *, shard_capacity: int) -> None:
        """Create or renew this replica's member Lease (holder = identity, shard capacity annotated)."""
        name = member_lease_name(self.identity)
        written = await self.hold(
            name,
            current,
            labels={COMPONENT_LABEL: COMPONENT, LEASE_KIND_LABEL: MEMBER_KIND},
            annotations={CAPACITY_ANNOTATION: str(shard_capacity)},
            renewal=True,
        )
        if written is None:
            log.debug("Member lease %s changed under us; renewing next cycle", name)

    async def delete(self, name: str) -> None:
        """Delete a Lease (our member Lease on shutdown, a long-dead replica's member Lease)."""
        await self.kube.delete_lease(self.namespace, name)
