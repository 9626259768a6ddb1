"""One Lease algorithm (coordination.k8s.io/v1, client-go's leader election), with injected clocks.

Used by the controller's leader election (`controller.manager.leader`, one Lease) and the triggerer's shard
and member Leases (`controller.coordination.shard_leases`, which adds fencing tokens on top).

Expiry follows client-go: a Lease is expired when *this* process has seen it unchanged for
`leaseDurationSeconds` of its own monotonic clock, never by comparing another machine's `renewTime`
with ours, so clock skew between nodes cannot cause a premature takeover. `leaseTransitions` goes up
by one whenever the holder changes (from "nobody" included). Every write is a create (409 = someone
else was first) or a replace carrying the resourceVersion read (409 = the Lease changed meanwhile), so
two processes can never both believe a write made them the holder.

Every Lease call is bounded by `call_seconds` (client-go's `NewFromKubeconfig`: half the renew
deadline, at least 1 s, "to keep a single hung request from forcing a leader loss"), tighter than the
client's own bound for ordinary calls (`controller.kube.timeouts`): a renewal stuck on a connection
the apiserver accepted and never answered fails in time to be tried again before the Lease would
expire in the others' eyes, instead of holding the renewal loop for ever.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Self, TypeVar

from controller.kube.errors import AlreadyExists, Conflict
from controller.kube.protocol import KubeApi
from zonda.resources.wire import format_micro_time, parse_time

WallClock = Callable[[], datetime]
MonotonicClock = Callable[[], float]
T = TypeVar("T")


def renew_deadline(lease_duration: float) -> float:
    """Seconds a holder has to renew before it must stop acting: client-go's `RenewDeadline`, 10 s of a
    15 s Lease; the rest is the margin before another replica may take the Lease by its own clock."""
    return lease_duration * 2 / 3


def call_seconds(lease_duration: float) -> float:
    """The bound of one Lease call: half the renew deadline, at least 1 s (client-go's)."""
    return max(1.0, renew_deadline(lease_duration) / 2)


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class LeaseRecord:
    """A Lease as read from the API, with just the fields the algorithm reasons about."""

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
    def from_body(cls, body: Mapping[str, Any]) -> Self:
        metadata = body.get("metadata") or {}
        spec = body.get("spec") or {}
        return cls(
            name=metadata["name"],
            holder=spec.get("holderIdentity") or None,
            duration_seconds=float(spec.get("leaseDurationSeconds") or 0),
            transitions=int(spec.get("leaseTransitions") or 0),
            acquire_time=parse_time(spec.get("acquireTime")),
            renew_time=parse_time(spec.get("renewTime")),
            resource_version=metadata.get("resourceVersion"),
            labels=dict(metadata.get("labels") or {}),
            annotations=dict(metadata.get("annotations") or {}),
        )

    @property
    def fingerprint(self) -> tuple[str | None, datetime | None, int]:
        """What changes whenever the holder renews or changes: an unchanged fingerprint means silence."""
        return (self.holder, self.renew_time, self.transitions)


class LeaseObserver:
    """Tracks when this process first saw each Lease's current fingerprint (client-go's observedTime)."""

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


class LeaseWriter:
    """Reads and writes Leases in one namespace for one identity; clocks injected for tests."""

    def __init__(
        self,
        kube: KubeApi,
        *,
        namespace: str,
        identity: str,
        lease_duration: float,
        wall_clock: WallClock = utc_now,
        monotonic: MonotonicClock = time.monotonic,
    ) -> None:
        self.kube = kube
        self.namespace = namespace
        self.identity = identity
        self.lease_duration = lease_duration
        self.wall_clock = wall_clock
        self.monotonic = monotonic
        self.call_seconds = call_seconds(lease_duration)

    async def bounded(self, call: Awaitable[T], seconds: float | None = None) -> T:
        """Await a Lease call for at most `seconds` (default `call_seconds`): `TimeoutError` past it (a
        transient failure, tried again at the next round)."""
        async with asyncio.timeout(self.call_seconds if seconds is None else seconds):
            return await call

    async def read(self, name: str) -> LeaseRecord | None:
        body = await self.bounded(self.kube.get_lease(self.namespace, name))
        return None if body is None else LeaseRecord.from_body(body)

    def body(
        self,
        *,
        name: str,
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
        holder: str | None,
        transitions: int,
        acquire_time: datetime | None,
        renew_time: datetime | None,
        resource_version: str | None = None,
    ) -> dict[str, Any]:
        """A Lease manifest (a replace with `resource_version` is conditional on it)."""
        metadata: dict[str, Any] = {"name": name, "namespace": self.namespace}
        if labels:
            metadata["labels"] = dict(labels)
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

    async def hold(
        self,
        name: str,
        record: LeaseRecord | None,
        *,
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
        renewal: bool | None = None,
    ) -> LeaseRecord | None:
        """Take or renew Lease `name` for this identity, as `record` showed it (None: not there).

        A renewal (by default: when we are the recorded holder) keeps the transitions and acquireTime;
        a take-over counts one transition (`renewal=False` forces one, for a fencing token that a
        previous process of the same identity cannot match). Returns the Lease as written, or None
        when another process wrote first. The caller decides whether the Lease was free to take
        (`LeaseObserver.live_holder`).
        """
        now = self.wall_clock()
        if record is None:
            manifest = self.body(
                name=name,
                labels=labels,
                annotations=annotations,
                holder=self.identity,
                transitions=0,
                acquire_time=now,
                renew_time=now,
            )
            try:
                return LeaseRecord.from_body(
                    await self.bounded(self.kube.create_lease(self.namespace, manifest))
                )
            except AlreadyExists:
                return None
        ours = record.holder == self.identity if renewal is None else renewal
        manifest = self.body(
            name=name,
            labels={**record.labels, **(labels or {})},
            annotations={**record.annotations, **(annotations or {})},
            holder=self.identity,
            transitions=record.transitions if ours else record.transitions + 1,
            acquire_time=(record.acquire_time or now) if ours else now,
            renew_time=now,
            resource_version=record.resource_version,
        )
        try:
            return LeaseRecord.from_body(
                await self.bounded(self.kube.replace_lease(self.namespace, manifest))
            )
        except Conflict:
            return None

    async def let_go(self, record: LeaseRecord) -> bool:
        """Clear the holder of a Lease we hold, so another process takes it at once; False if it changed."""
        manifest = self.body(
            name=record.name,
            labels=record.labels,
            annotations=record.annotations,
            holder=None,
            transitions=record.transitions,
            acquire_time=None,
            renew_time=None,
            resource_version=record.resource_version,
        )
        try:
            await self.bounded(self.kube.replace_lease(self.namespace, manifest))
        except Conflict:
            return False
        return True
