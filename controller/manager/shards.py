"""`zonda controller --shards N`: DAGs, their runs and Backfills split over N shards, each held by one
replica at a time through a fenced Lease (``zonda-controller-shard-<n>``).

The Leases, the membership cycle and the shard plan are the triggerer's
(`controller.coordination.shard_leases`, `controller.coordination.shards`): every replica renews what
it holds, advertises itself in a member Lease, and takes or gives up shards toward a fair share; a
replica that stops renewing loses its shards after the lease duration (judged by the others' own
clocks), one that stops gracefully hands them over at once.

Every replica watches everything (its caches and indexes stay warm for a takeover); the work queue
runs a key only while the key's shard is held (`owns`, by this replica's own clock: renewed less than
a lease duration ago, which the new holder cannot beat since it waits a whole duration from the
renewal it saw). A pass that started before the Lease was lost and writes after the takeover is
fenced by what fences a stopped leader's writes: runs and pods have deterministic names (a second
create is AlreadyExists) and every status write is a replace preconditioned on the resourceVersion
read (the new holder's first write makes the old one's Conflict). Pool slots, which span shards,
go through the slot ledger (`controller.coordination.slot_ledger`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from controller.coordination.shard_leases import ShardLeaseKeeper, ShardLeaseNames, ShardMembership
from controller.coordination.slot_ledger import SlotLedger
from controller.kube import KubeApi, KubeError

log = logging.getLogger(__name__)

NAMES = ShardLeaseNames("controller")


class ControllerShards:
    """This replica's controller shards: the Lease cycle, the work queue's gate, the slot ledger."""

    def __init__(
        self,
        kube: KubeApi,
        *,
        namespace: str,
        identity: str,
        shard_count: int,
        lease_duration: float,
        on_acquired: Callable[[frozenset[int]], None],
        on_lost: Callable[[int, str], None] = lambda shard, reason: None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.shard_count = shard_count
        self.renew_every = lease_duration / 3
        keeper = ShardLeaseKeeper(
            kube,
            names=NAMES,
            namespace=namespace,
            identity=identity,
            lease_duration=lease_duration,
            monotonic=monotonic,
        )
        self.membership = ShardMembership(
            keeper, shard_count=shard_count, on_lost=on_lost, on_acquired=on_acquired, monotonic=monotonic
        )
        self.ledger = SlotLedger(kube, namespace=namespace)
        self.stopping = False
        #: Monotonic time the last cycle completed (None: none yet; readiness).
        self.last_cycle: float | None = None

    def owns(self, shard: int) -> bool:
        """Held now by our own clock, and no live replica was started with another shard count (it
        would put the same DAG in another shard: both would act on it). A rolling update that changes
        `--shards` therefore pauses the new replicas until the old ones have left."""
        return not self.membership.disagreeing and self.membership.current(shard)

    def renewal_late(self, shard: int) -> bool:
        """Held, but not renewed within a lease duration by our own clock, and not given up yet: the
        renewal is late (a busy event loop, a slow apiserver) and the cycle that ends with it either
        renews the Lease (the shard is served again) or drops it (`on_lost`; the next holder enqueues
        everything of it). A key met now must be looked at again, not dropped."""
        return not self.membership.disagreeing and self.membership.renewal_late(shard)

    def served(self) -> frozenset[int]:
        """The shards held now by our own clock (none while the shard counts disagree)."""
        return frozenset(shard for shard in list(self.membership.holdings) if self.owns(shard))

    async def step(self) -> list[str]:
        """One cycle: renew, rebalance; returns the namespaces whose slot ledger another replica changed."""
        changed: list[str] = []
        try:
            disagreed = bool(self.membership.disagreeing)
            await self.membership.cycle(
                capacity=self.shard_count, may_acquire=not self.stopping and not self.membership.disagreeing
            )
            self.last_cycle = time.monotonic()
            if self.membership.disagreeing and not disagreed:
                log.error(
                    "not acting: replicas %s were started with another --shards than %d",
                    ",".join(self.membership.disagreeing),
                    self.shard_count,
                )
            elif disagreed and not self.membership.disagreeing:
                log.info("the replicas agree on --shards %d again: acting", self.shard_count)
                self.membership.on_acquired(frozenset(self.membership.holdings))
            for record in self.membership.records:
                if self.ledger.observe(record):
                    namespace = self.ledger.namespace_of(record)
                    if namespace is not None:
                        changed.append(namespace)
        except (KubeError, OSError, TimeoutError) as error:
            log.warning("controller shard cycle failed (retrying in %.1fs): %r", self.renew_every, error)
        self.membership.drop_lapsed()
        return changed

    async def run(self, after_cycle: Callable[[list[str]], None]) -> None:
        """Cycle every `renew_every` seconds on its own timer (from one cycle's start to the next's);
        `after_cycle(namespaces whose ledger changed)` after each. It returns at once: what it starts
        (enqueues, the slot ledger's release) runs beside this loop, since a renewal that waited for it
        came late (the ledger release waited for pool admission's lock, held by every launching pass
        across its ledger API calls: with a burst of runs, this replica skipped its own shards' keys)."""
        loop = asyncio.get_running_loop()
        next_cycle = loop.time()
        while True:
            try:
                after_cycle(await self.step())
            except (KubeError, OSError, TimeoutError) as error:
                log.warning("after the controller shard cycle: %s", error)
            except Exception:  # a bug must not stop the renewals: the shards would lapse unnoticed
                log.exception("controller shard cycle")
            next_cycle = max(next_cycle + self.renew_every, loop.time())  # late: no catching up
            await asyncio.sleep(next_cycle - loop.time())

    def describe(self) -> str:
        if self.membership.disagreeing:
            return f"none (waiting: {','.join(self.membership.disagreeing)} run another --shards)"
        return ",".join(str(shard) for shard in sorted(self.served())) or "none"

    async def release(self) -> list[int]:
        """Hand every shard over at once (SIGTERM): the others take them without waiting for expiry."""
        self.stopping = True
        with contextlib.suppress(KubeError, OSError, TimeoutError):
            return await self.membership.release_all()
        return []
