"""Leader election for controller replicas, on one coordination.k8s.io Lease (client-go's algorithm).

Every replica watches all objects (warm caches, fast failover), but only the leader's work queue
runs. Expiry is judged by this replica's own monotonic clock since it last saw the Lease change, so
clock skew between nodes cannot cause two leaders; a graceful shutdown releases the Lease at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime

from controller.kube import AlreadyExists, Conflict, Kube, KubeError
from controller.triggerer.leases import LeaseObserver, LeaseRecord
from zonda.wire import format_micro_time

logger = logging.getLogger(__name__)


class LeaderElector:
    def __init__(
        self,
        kube: Kube,
        *,
        namespace: str,
        name: str,
        identity: str,
        on_started_leading: Callable[[], None],
        on_stopped_leading: Callable[[], None],
        lease_duration: float = 15.0,
        retry_period: float = 2.0,
    ) -> None:
        self.kube = kube
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.on_started_leading = on_started_leading
        self.on_stopped_leading = on_stopped_leading
        self.lease_duration = lease_duration
        self.retry_period = retry_period
        self.leading = False
        self._observer = LeaseObserver()
        self._renewed_at = 0.0

    async def run(self) -> None:
        while True:
            try:
                await self._try_acquire_or_renew()
            except (TimeoutError, KubeError, OSError) as exc:
                logger.warning("leader election: %s", exc)
            if self.leading and time.monotonic() - self._renewed_at >= self.lease_duration:
                self._set_leading(False)  # could not renew in time: someone else may lead now
            await asyncio.sleep(self.retry_period)

    def _set_leading(self, leading: bool) -> None:
        if leading != self.leading:
            self.leading = leading
            logger.info("%s %s leading", self.identity, "started" if leading else "stopped")
            (self.on_started_leading if leading else self.on_stopped_leading)()

    def _spec(self, transitions: int, acquire: datetime | None) -> dict[str, object]:
        now = datetime.now(UTC)
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": int(self.lease_duration),
            "acquireTime": format_micro_time(acquire or now),
            "renewTime": format_micro_time(now),
            "leaseTransitions": transitions,
        }

    async def _try_acquire_or_renew(self) -> None:
        now = time.monotonic()
        body = await self.kube.get_lease(self.namespace, self.name)
        if body is None:
            try:
                await self.kube.create_lease(
                    self.namespace,
                    {
                        "apiVersion": "coordination.k8s.io/v1",
                        "kind": "Lease",
                        "metadata": {"name": self.name, "namespace": self.namespace},
                        "spec": self._spec(0, None),
                    },
                )
            except AlreadyExists:
                return
            self._renewed_at = now
            self._set_leading(True)
            return
        record = LeaseRecord.from_body(body)
        self._observer.observe(record, now)
        holder = self._observer.live_holder(record, now)
        if holder not in (None, self.identity):
            self._set_leading(False)
            return
        transitions = record.transitions if record.holder == self.identity else record.transitions + 1
        acquire = record.acquire_time if record.holder == self.identity else None
        body["spec"] = self._spec(transitions, acquire)
        try:
            await self.kube.replace_lease(self.namespace, body)
        except Conflict:
            return
        self._renewed_at = now
        self._set_leading(True)

    async def release(self) -> None:
        """Give the Lease up on shutdown so another replica takes over without waiting for expiry."""
        if not self.leading:
            return
        self._set_leading(False)
        with contextlib.suppress(KubeError, OSError):
            body = await self.kube.get_lease(self.namespace, self.name)
            if body is not None and (body.get("spec") or {}).get("holderIdentity") == self.identity:
                body["spec"]["holderIdentity"] = None
                await self.kube.replace_lease(self.namespace, body)
