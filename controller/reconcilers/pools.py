"""Pools in the controller: the admission critical section, wake-ups when slots free up, Pool status.

Admission (`zonda.passes.pools.admit`, called from the run's pass) must not over-admit when kopf's workers
reconcile several runs at once: a run whose pass would launch anything decides again inside
`PoolAdmission.lock`, with the pools as the controller's Pool watch keeps them
(`controller.kube.cache`: listed from the API once per namespace; a list per launching pass cost
8-57 ms under the lock) and what every other run holds from the `RunIndex`, and reserves what it
admits in the index (`RunIndex.reserve`) before the lock is released; its pods are created and its
status written outside the lock. Only the leader's work queue runs, so one process holds the lock.
With `--shards`, several replicas admit at once, each for its own shards' runs: a replica counts the
other shards' slots from the slot ledger and the watch (`Sharding`, `controller.coordination.slot_ledger`)
and declares its own shards' slots, launches included, in the ledger before it launches (`declare`).
After a restart nothing is taken from memory: the first admission in a namespace lists its DagRuns
into the index (their statuses say what is queued, running or deferred; a live attempt the status
does not name is a stray the run's pass kills), so a restart neither over-admits nor forgets a
waiting task instance.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from controller.coordination.shards import dag_shard
from controller.coordination.slot_ledger import SlotLedger
from controller.kube import DAGRUNS, POOLS, KubeApi, KubeError
from controller.reconcilers import metrics
from controller.reconcilers.common import StatusWriter
from controller.reconcilers.index import RunIndex, RunSummary
from zonda.passes import pools
from zonda.passes.pools import Concurrency, PoolLimit
from zonda.resources.pool_models import PoolSpec

log = logging.getLogger(__name__)

__all__ = ["POOLS", "PoolAdmission", "PoolReconciler", "runs_to_wake"]


@dataclass
class Sharding:
    """What admission needs of `--shards`: how many, which this replica serves now, the ledger."""

    shard_count: int
    served: Callable[[], frozenset[int]]
    ledger: SlotLedger

    def shard_of(self, namespace: str, summary: RunSummary) -> int:
        return dag_shard(namespace, summary.dag_name, self.shard_count)

    def serves_dag(self, namespace: str, dag_name: str, served: frozenset[int] | None = None) -> bool:
        """Whether this replica serves the DAG's shard (its runs and Backfills are there): held now,
        or in `served`, the shards a decision read once and judges all its runs by (read again per
        run, a shard lost halfway would count some runs as ours and others not in one decision)."""
        shard = dag_shard(namespace, dag_name, self.shard_count)
        return shard in (self.served() if served is None else served)


@dataclass
class PoolAdmission:
    """The critical section and the namespaces whose runs were listed into the index since start."""

    kube: KubeApi
    index: RunIndex
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    seeded: set[str] = field(default_factory=set)
    sharding: Sharding | None = None
    #: Namespaces with a `release_soon` pending, and its tasks (kept: the loop holds tasks weakly).
    _releasing: dict[str, asyncio.Task[None]] = field(default_factory=dict)

    async def seed(self, namespace: str) -> None:
        """List the namespace's DagRuns into the index once: the watch may not have delivered them all."""
        if namespace in self.seeded:
            return
        for run in await self.kube.list_custom(DAGRUNS, namespace):
            self.index.update(run)
        self.seeded.add(namespace)

    async def limits(self, namespace: str) -> dict[str, PoolLimit]:
        """The namespace's Pools by resource name (a Pool whose spec does not parse counts as absent)."""
        limits: dict[str, PoolLimit] = {}
        for pool in await self.kube.list_custom(POOLS, namespace):
            try:
                spec = PoolSpec.model_validate(pool.get("spec") or {})
            except ValidationError:
                continue
            limits[pool["metadata"]["name"]] = PoolLimit(spec.slots, spec.include_deferred)
        return limits

    async def concurrency(self, namespace: str, run_name: str) -> Concurrency:
        """Pools, and what every other run in the namespace holds and waits for. Call under `lock`.

        Sharded, the runs of the shards served here count as holders and waiting (exact: only this
        replica launches for them), the other shards as slots `elsewhere` (ledger and watch, the
        larger); their waiting task instances are not ranked against ours (priority order holds
        within a replica's shards, not across them).
        """
        await self.seed(namespace)
        pool_limits = await self.limits(namespace)
        runs = self.index.occupying(namespace)  # the others hold and wait for nothing
        sharding = self.sharding
        if sharding is None:
            others = [s for name, s in runs.items() if name != run_name]
            return Concurrency(
                pools=pool_limits,
                holders=tuple(h for s in others for h in s.holders),
                waiting=tuple(c for s in others for c in s.waiting),
            )
        served = sharding.served()
        declared = await sharding.ledger.entries(namespace)
        observed = self.shard_slots(namespace, pool_limits, None)
        if _ahead(declared, observed, served):  # another replica may have given slots back since
            declared = await sharding.ledger.refresh(namespace)
        mine = [
            s
            for name, s in runs.items()
            if name != run_name and sharding.serves_dag(namespace, s.dag_name, served)
        ]
        elsewhere = pools.slots_elsewhere(declared, observed, served)
        return Concurrency(
            pools=pool_limits,
            holders=tuple(h for s in mine for h in s.holders),
            waiting=tuple(c for s in mine for c in s.waiting),
            elsewhere=elsewhere,
        )

    def shard_slots(
        self, namespace: str, pool_limits: Mapping[str, PoolLimit], shards: frozenset[int] | None
    ) -> dict[int, dict[str, int]]:
        """The slots each shard's runs hold by the index (`shards`: only those; None: all)."""
        assert self.sharding is not None
        by_shard: dict[int, list[pools.SlotHolder]] = {}
        for summary in self.index.in_namespace(namespace).values():
            shard = self.sharding.shard_of(namespace, summary)
            if shards is None or shard in shards:
                by_shard.setdefault(shard, []).extend(summary.holders)
        return {shard: pools.slots_held(holders, pool_limits) for shard, holders in by_shard.items()}

    async def declare(self, namespace: str, run_shard_of: str | None = None) -> bool:
        """Sharded: write the slots our shards hold (the index, reservations included) into the
        ledger, conditional on the version admission decided with. Call under `lock`, after
        `RunIndex.reserve`. False: do not launch (the ledger moved, or the run's shard is not ours
        any more); True unsharded."""
        sharding = self.sharding
        if sharding is None:
            return True
        served = sharding.served()
        if run_shard_of is not None:
            summary = self.index.runs.get((namespace, run_shard_of))
            if summary is None or not sharding.serves_dag(namespace, summary.dag_name, served):
                return False
        ours = self.shard_slots(namespace, await self.limits(namespace), served)
        return await sharding.ledger.declare(namespace, ours, served)

    def release_soon(self, namespace: str, delay: float = 0.05) -> None:
        """Sharded: declare again shortly (a pass freed slots): one write for a burst of passes."""
        if self.sharding is None or namespace in self._releasing:
            return

        async def later() -> None:
            try:
                await asyncio.sleep(delay)
                async with self.lock:
                    await self.declare(namespace)
            except (KubeError, OSError, TimeoutError) as error:
                log.warning("slot ledger of %s not written (the lease loop retries): %s", namespace, error)
            finally:
                self._releasing.pop(namespace, None)

        self._releasing[namespace] = asyncio.get_running_loop().create_task(later())

    def release_in_background(self) -> None:
        """`release` without waiting: one `release_soon` per namespace with a ledger (at most one
        pending per namespace, however long the lock is held). The lease loop calls it once per cycle
        and must not wait for the lock, which launching passes hold across the ledger's API calls."""
        if self.sharding is None:
            return
        for namespace in self.sharding.ledger.namespaces():
            self.release_soon(namespace, delay=0.0)

    async def release(self) -> None:
        """`release_in_background`, then wait until each namespace's declaration is written: slots our
        shards no longer hold (tries that ended, shards handed over) are given back to the other
        replicas; a write only where our entries changed."""
        self.release_in_background()
        await asyncio.gather(*self._releasing.values())


def _ahead(
    declared: Mapping[int, Mapping[str, int]],
    observed: Mapping[int, Mapping[str, int]],
    served: frozenset[int],
) -> bool:
    """Whether another shard declared more than its runs show: its replica may have released since."""
    return any(
        slots > observed.get(shard, {}).get(pool, 0)
        for shard, by_pool in declared.items()
        if shard not in served
        for pool, slots in by_pool.items()
    )


def runs_to_wake(
    index: RunIndex, namespace: str, run_name: str, previous: RunSummary | None, current: RunSummary | None
) -> tuple[set[str], set[str]]:
    """(runs, pools) to look at again after a run changed: waiting runs may start if it freed
    slots (in a pool, its DAG's max_active_tasks, a task's max_active_tis_*), and the Pools whose
    numbers it changed show new ones. A queued task instance starting to run frees nothing, but
    moves its pool's queued and running numbers."""
    before, after = _usage(previous), _usage(current)
    freed = {key for key, used in before.items() if after[key] < used}
    touched_pools = {name for kind, name in (before.keys() | after.keys())
                     if kind in ("pool", "waiting") or kind.startswith("pool:")
                     if before[(kind, name)] != after[(kind, name)]}  # fmt: skip
    if not freed:
        return set(), touched_pools
    runs = {
        name
        for name, summary in index.occupying(namespace).items()
        if name != run_name
        and any(
            ("pool", c.pool) in freed or ("dag", c.dag) in freed or ("task", f"{c.dag}/{c.task}") in freed
            for c in summary.waiting
        )
    }
    return runs, touched_pools


def _usage(summary: RunSummary | None) -> Counter[tuple[str, str]]:
    """What a run holds (pool slots; DAG and task instances queued or running) and waits for."""
    usage: Counter[tuple[str, str]] = Counter()
    for holder in summary.holders if summary is not None else ():
        usage[("pool", holder.pool)] += holder.slots  # deferred too: it frees slots of include_deferred pools
        usage[(f"pool:{holder.state.value}", holder.pool)] += holder.slots  # the Pool's status per state
        if holder.state in pools.ACTIVE_STATES:
            usage[("dag", holder.dag)] += 1
            usage[("task", f"{holder.dag}/{holder.task}")] += 1
    for candidate in summary.waiting if summary is not None else ():
        usage[("waiting", candidate.pool)] += candidate.slots
    return usage


@dataclass
class PoolReconciler:
    """Writes a Pool's status (occupancy from the runs' statuses); the spec is the user's."""

    kube: KubeApi
    writer: StatusWriter
    admission: PoolAdmission

    plural = POOLS

    async def reconcile_object(self, pool: Mapping[str, Any], now: datetime) -> datetime | None:
        namespace, name = pool["metadata"]["namespace"], pool["metadata"]["name"]
        try:
            spec = PoolSpec.model_validate(pool.get("spec") or {})
        except ValidationError:
            return None  # the CRD schema refuses such specs; one from an older schema is left alone
        await self.admission.seed(namespace)
        runs = self.admission.index.occupying(namespace).values()
        status = pools.pool_status(
            PoolLimit(spec.slots, spec.include_deferred),
            [h for s in runs for h in s.holders],
            [c for s in runs for c in s.waiting],
            name,
            generation=pool["metadata"].get("generation"),
        )
        wire = status.to_wire()
        await self.writer.write_status(POOLS, pool, pool.get("status") or {}, wire)
        metrics.record_pool(namespace, name, wire)
        return None
