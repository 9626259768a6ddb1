"""Leader election for controller replicas, on one coordination.k8s.io Lease (client-go's algorithm).

Every replica watches all objects (warm caches, fast failover), but only the leader's work queue
runs. The Lease algorithm is `controller.coordination.leases` (shared with the triggerer's shard Leases):
expiry is judged by this replica's own monotonic clock since it last saw the Lease change, so clock
skew between nodes cannot cause two leaders; a graceful shutdown releases the Lease at once.

A leader that has not renewed for the renew deadline (client-go's `RenewDeadline`: two thirds of the
lease duration, 10 s of 15) stops leading, and each round is cut off at that deadline: a renewal
stuck on a connection the apiserver accepted and never answered cannot keep a replica leading past
the point where another may take the Lease (before the rounds were bounded, it led for as long as
the call hung).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from controller.coordination.leases import (
    LeaseObserver,
    LeaseWriter,
    MonotonicClock,
    WallClock,
    renew_deadline,
    utc_now,
)
from controller.kube import KubeApi, KubeError

logger = logging.getLogger(__name__)


class LeaderElector:
    def __init__(
        self,
        kube: KubeApi,
        *,
        namespace: str,
        name: str,
        identity: str,
        on_started_leading: Callable[[], None],
        on_stopped_leading: Callable[[], None],
        lease_duration: float = 15.0,
        retry_period: float = 2.0,
        wall_clock: WallClock = utc_now,
        monotonic: MonotonicClock = time.monotonic,
    ) -> None:
        self.name = name
        self.identity = identity
        self.on_started_leading = on_started_leading
        self.on_stopped_leading = on_stopped_leading
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline(lease_duration)
        self.retry_period = retry_period
        self.monotonic = monotonic
        self.leading = False
        self._leases = LeaseWriter(
            kube,
            namespace=namespace,
            identity=identity,
            lease_duration=lease_duration,
            wall_clock=wall_clock,
            monotonic=monotonic,
        )
        self._observer = LeaseObserver()
        self._renewed_at = 0.0

    async def run(self) -> None:
        while True:
            await self.step()
            await asyncio.sleep(self.retry_period)

    async def step(self) -> None:
        """One round: try to acquire or renew, for at most what is left of the renew deadline while
        leading; stop leading once no renewal succeeded within it."""
        self._stop_if_overdue()
        budget = self.renew_deadline
        if self.leading:
            budget = self._renewed_at + self.renew_deadline - self.monotonic()
        try:
            async with asyncio.timeout(budget):
                await self._try_acquire_or_renew()
        except (TimeoutError, KubeError, OSError) as exc:
            logger.warning("leader election: %r", exc)
        self._stop_if_overdue()

    def _stop_if_overdue(self) -> None:
        if self.leading and self.monotonic() - self._renewed_at >= self.renew_deadline:
            self._set_leading(False)  # could not renew in time: someone else may lead soon

    def _set_leading(self, leading: bool) -> None:
        if leading != self.leading:
            self.leading = leading
            logger.info("%s %s leading", self.identity, "started" if leading else "stopped")
            (self.on_started_leading if leading else self.on_stopped_leading)()

    async def _try_acquire_or_renew(self) -> None:
        now = self.monotonic()
        record = await self._leases.read(self.name)
        if record is not None:
            self._observer.observe(record, now)
            holder = self._observer.live_holder(record, now)
            if holder not in (None, self.identity):
                self._set_leading(False)
                return
        written = await self._leases.hold(self.name, record)
        if written is None:
            return  # another replica wrote first
        self._renewed_at = now
        self._set_leading(True)

    async def release(self) -> None:
        """Give the Lease up on shutdown so another replica takes over without waiting for expiry."""
        if not self.leading:
            return
        self._set_leading(False)
        with contextlib.suppress(KubeError, OSError, TimeoutError):
            record = await self._leases.read(self.name)
            if record is not None and record.holder == self.identity:
                await self._leases.let_go(record)
