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
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from controller.kube import AlreadyExists, Conflict, Kube, NotFound
from zonda.wire import ANNOTATION_CAPACITY, LABEL_COMPONENT, LABEL_LEASE_KIND, LABEL_SHARD, format_micro_time
from zonda.wire import parse_time as _parse_time

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

WallClock = Callable[[], datetime]
MonotonicClock = Callable[[], float]


def shard_lease_name(shard: int) -> str:
    return f"{SHARD_LEASE_PREFIX}{shard}"


def member_lease_name(identity: str) -> str:
    """``zonda-triggerer-member-<identity>``; identities that are not DNS labels get a slug and a hash."""
    if _DNS_LABEL.match(identity) and len(MEMBER_LEASE_PREFIX) + len(identity) <= 253:
        return MEMBER_LEASE_PREFIX + identity
    slug = re.sub(r"[^a-z0-9-]+", "-", identity.lower()).strip("-")[:40].strip("-") or "x"
    return f"{MEMBER_LEASE_PREFIX}{slug}-{hashlib.sha256(identity.encode()).hexdigest()[:8]}"


@dataclass(frozen=True)
class LeaseRecord:
    """A Lease as read from the API, with just the fields the triggerer reasons about."""

    name: str
    holder: str | None
    duration_seconds: float
    transitions: int
    acquire_time: datetime | None
    renew_time: datetime | None
    resource_version: str | None
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> LeaseRecord:
        metadata = body.get("metadata") or {}
        spec = body.get("spec") or {}
        return cls(
            name=metadata["name"],
            holder=spec.get("holderIdentity") or None,
            duration_seconds=float(spec.get("leaseDurationSeconds") or 0),
            transitions=int(spec.get("leaseTransitions") or 0),
            acquire_time=_parse_time(spec.get("acquireTime")),
            renew_time=_parse_time(spec.get("renewTime")),
            resource_version=metadata.get("resourceVersion"),
            labels=dict(metadata.get("labels") or {}),
            annotations=dict(metadata.get("annotations") or {}),
        )

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

    @property
    def fingerprint(self) -> tuple[str | None, datetime | None, int]:
        """What changes whenever the holder renews or changes: an unchanged fingerprint means silence."""
        return (self.holder, self.renew_time, self.transitions)


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


class LeaseObserver:
    """Tracks when this replica first saw each Lease's current fingerprint (client-go's observedTime)."""

    def __init__(self) -> None:
        self._seen: dict[str, tuple[tuple[Any, ...], float]] = {}

    def observe(self, record: LeaseRecord, now: float) -> None:
        previous = self._seen.get(record.name)
        if previous is None or previous[0] != record.fingerprint:
            self._seen[record.name] = (record.fingerprint, now)

    def silent_for(self, record: LeaseRecord, now: float) -> float:
        """Seconds since the Lease last changed, as seen from here (0 if never observed)."""
        seen = self._seen.get(record.name)
        return 0.0 if seen is None or seen[0] != record.fingerprint else now - seen[1]

    def live_holder(self, record: LeaseRecord, now: float) -> str | None:
        """The Lease's holder while its lease is unexpired by our observation, else None (free)."""
        if record.holder is None:
            return None
        if self.silent_for(record, now) >= record.duration_seconds:
            return None
        return record.holder

    def forget_except(self, names: set[str]) -> None:
        for name in set(self._seen) - names:
            del self._seen[name]


class LeaseKeeper:
    """Acquires, renews, verifies and releases this replica's Leases through `controller.kube`."""

    def __init__(
        self,
        kube: Kube,
        *,
        namespace: str,
        identity: str,
        lease_duration: float,
        wall_clock: WallClock = lambda: datetime.now(UTC),
        monotonic: MonotonicClock = time.monotonic,
    ) -> None:
        self.kube = kube
        self.namespace = namespace
        self.identity = identity
        self.lease_duration = lease_duration
        self.wall_clock = wall_clock
        self.monotonic = monotonic

    # ------------------------------------------------------------------------------------ reading

    async def list_records(self) -> list[LeaseRecord]:
        bodies = await self.kube.list_leases(self.namespace, LEASES_SELECTOR)
        return [LeaseRecord.from_body(body) for body in bodies]

    async def read(self, name: str) -> LeaseRecord | None:
        body = await self.kube.get_lease(self.namespace, name)
        return None if body is None else LeaseRecord.from_body(body)

    async def verify(self, holding: Holding) -> bool:
        """Re-read the shard's Lease and apply the fencing check (`holds`)."""
        return holds(await self.read(holding.lease_name), holding, self.identity, self.monotonic())

    # ------------------------------------------------------------------------------------ writing

    def _body(
        self,
        *,
        name: str,
        labels: Mapping[str, str],
        annotations: Mapping[str, str] | None = None,
        holder: str | None,
        transitions: int,
        acquire_time: datetime | None,
        renew_time: datetime | None,
        resource_version: str | None = None,
    ) -> dict[str, Any]:
        metadata: dict[str, Any] = {"name": name, "namespace": self.namespace, "labels": dict(labels)}
        if annotations:
            metadata["annotations"] = dict(annotations)
        if resource_version is not None:
            metadata["resourceVersion"] = resource_version
        spec: dict[str, Any] = {
            "holderIdentity": holder,
            "leaseDurationSeconds": max(1, round(self.lease_duration)),
            "leaseTransitions": transitions,
        }
        if acquire_time is not None:
            spec["acquireTime"] = format_micro_time(acquire_time)
        if renew_time is not None:
            spec["renewTime"] = format_micro_time(renew_time)
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": metadata, "spec": spec}

    @staticmethod
    def shard_labels(shard: int) -> dict[str, str]:
        return {COMPONENT_LABEL: COMPONENT, LEASE_KIND_LABEL: SHARD_KIND, SHARD_NUMBER_LABEL: str(shard)}

    async def acquire(self, shard: int, record: LeaseRecord | None) -> Holding | None:
        """Take shard `shard`'s Lease, free or expired as `record` showed it; None if another won."""
        name = shard_lease_name(shard)
        sent_at = self.monotonic()
        now = self.wall_clock()
        try:
            if record is None:
                body = await self.kube.create_lease(
                    self.namespace,
                    self._body(
                        name=name,
                        labels=self.shard_labels(shard),
                        holder=self.identity,
                        transitions=0,
                        acquire_time=now,
                        renew_time=now,
                    ),
                )
            else:
                body = await self.kube.replace_lease(
                    self.namespace,
                    self._body(
                        name=name,
                        labels={**record.labels, **self.shard_labels(shard)},
                        annotations=record.annotations,
                        holder=self.identity,
                        transitions=record.transitions + 1,
                        acquire_time=now,
                        renew_time=now,
                        resource_version=record.resource_version,
                    ),
                )
        except (AlreadyExists, Conflict):
            return None  # another replica acquired it first: that is the point of the precondition
        acquired = LeaseRecord.from_body(body)
        log.info("Acquired shard %d (lease %s, transitions %d)", shard, name, acquired.transitions)
        return Holding(
            shard=shard,
            lease_name=name,
            transitions=acquired.transitions,
            acquire_time=now,
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
                    self._body(
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
                self._body(
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
        now = self.wall_clock()
        name = member_lease_name(self.identity)
        labels = {COMPONENT_LABEL: COMPONENT, LEASE_KIND_LABEL: MEMBER_KIND}
        annotations = {CAPACITY_ANNOTATION: str(shard_capacity)}
        try:
            if current is None:
                await self.kube.create_lease(
                    self.namespace,
                    self._body(
                        name=name,
                        labels=labels,
                        annotations=annotations,
                        holder=self.identity,
                        transitions=0,
                        acquire_time=now,
                        renew_time=now,
                    ),
                )
            else:
                await self.kube.replace_lease(
                    self.namespace,
                    self._body(
                        name=name,
                        labels=labels,
                        annotations=annotations,
                        holder=self.identity,
                        transitions=current.transitions,
                        acquire_time=current.acquire_time or now,
                        renew_time=now,
                        resource_version=current.resource_version,
                    ),
                )
        except (AlreadyExists, Conflict):
            log.debug("Member lease %s changed under us; renewing next cycle", name)

    async def delete(self, name: str) -> None:
        """Delete a Lease (our member Lease on shutdown, a long-dead replica's member Lease)."""
        await self.kube.delete_lease(self.namespace, name)
