"""Pools in the controller: the admission critical section, wake-ups when slots free up, Pool status.

Admission (`zonda.passes.pools.admit`, called from the run's pass) must not over-admit when kopf's workers
reconcile several runs at once: a run whose pass would launch anything decides again inside
`PoolAdmission.lock`, with the pools as the controller's Pool watch keeps them
(`controller.kube.cache`: listed from the API once per namespace; a list per launching pass cost
8-57 ms under the lock) and what every other run holds from the `RunIndex`, and reserves what it
admits in the index (`RunIndex.reserve`) before the lock is released; its pods are created and its
status written outside the lock. Only the leader's work queue runs, so one process holds the lock.
After a restart nothing is taken from memory: the first admission in a namespace lists its DagRuns
into the index (their statuses say what is queued, running or deferred; a live attempt the status
does not name is a stray the run's pass kills), so a restart neither over-admits nor forgets a
waiting task instance.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from controller.kube import DAGRUNS, POOLS, KubeApi
from controller.reconcilers import metrics
from controller.reconcilers.common import StatusWriter
from controller.reconcilers.index import RunIndex, RunSummary
from zonda.passes import pools
from zonda.passes.pools import Concurrency, PoolLimit
from zonda.resources.pool_models import PoolSpec

__all__ = ["POOLS", "PoolAdmission", "PoolReconciler", "runs_to_wake"]


@dataclass
class PoolAdmission:
    """The critical section and the namespaces whose runs were listed into the index since start."""

    kube: KubeApi
    index: RunIndex
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    seeded: set[str] = field(default_factory=set)

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
        """Pools, and what every other run in the namespace holds and waits for. Call under `lock`."""
        await self.seed(namespace)
        others = [s for name, s in self.index.in_namespace(namespace).items() if name != run_name]
        return Concurrency(
            pools=await self.limits(namespace),
            holders=tuple(h for s in others for h in s.holders),
            waiting=tuple(c for s in others for c in s.waiting),
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
        for name, summary in index.in_namespace(namespace).items()
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
        runs = self.admission.index.in_namespace(namespace).values()
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
