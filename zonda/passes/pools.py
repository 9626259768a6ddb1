"""Airflow's pools and task concurrency limits: the admission of task instances (the `Pool` resource's
shape is `zonda.resources.pool_models`).

A task instance ready to run (``scheduled``) is *admitted* (queued and launched) only while its pool
has open slots, its DAG is under `max_active_tasks`, and the task under `max_active_tis_per_dag` and
`max_active_tis_per_dagrun`. `admit` is Airflow's `_executable_task_instances_to_queued` as a pure
function: every waiting task instance of every run the controller serves (in one namespace) is
considered, highest `priority_weight` (after `weight_rule`) first, then the oldest run (logical
date); one that does not fit is skipped, so a smaller one behind it may still start, as in Airflow.

Pools are namespaced `Pool` resources. Airflow's pool names may hold ``_`` and capitals, Kubernetes
names may not: a task's ``pool="my_pool"`` is the `Pool` named ``my-pool`` (`pool_resource_name`).
Airflow's `default_pool` (the pool of every task that names none) is ``default-pool``; while no such
resource exists it has Airflow's 128 slots.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from zonda.resources.models import TaskInstanceState
from zonda.resources.pool_models import (
    DEFAULT_POOL,
    DEFAULT_POOL_SLOTS,
    UNLIMITED,
    PoolStatus,
    pool_resource_name,
)
from zonda.specs import mapping

S = TaskInstanceState

#: States that hold a slot: queued and running always, deferred only in pools that include it.
ACTIVE_STATES = frozenset({S.QUEUED, S.RUNNING})
_FAR_FUTURE = datetime.max.replace(tzinfo=None)
#: How the reason of a task instance whose pool does not exist starts.
MISSING_POOL = "Not scheduling: pool"


# ----------------------------------------------------------------------------------- admission


@dataclass(frozen=True)
class PoolLimit:
    slots: int  # UNLIMITED: never full
    include_deferred: bool = False


@dataclass(frozen=True)
class SlotHolder:
    """A task instance holding (or, deferred, perhaps holding) a slot."""

    run: str
    dag: str
    task_id: str  # the task instance's key: ``task``, or ``task[i]`` for a mapped instance
    pool: str  # the Pool resource name
    slots: int
    state: TaskInstanceState

    @functools.cached_property
    def task(self) -> str:
        """The task id (without a mapped instance's ``[i]``)."""
        return mapping.split_key(self.task_id)[0]


@dataclass(frozen=True)
class Candidate:
    """A scheduled task instance waiting to be queued."""

    run: str
    dag: str
    task_id: str  # the task instance's key: ``task``, or ``task[i]`` for a mapped instance
    pool: str  # the Pool resource name
    slots: int
    weight: int  # the effective priority weight (after weight_rule)
    logical_date: datetime | None  # of its run: the older run first at equal weight
    max_active_tasks: int = 16  # its DAG's
    max_active_tis_per_dag: int | None = None
    max_active_tis_per_dagrun: int | None = None

    @property
    def key(self) -> tuple[str, str]:
        return self.run, self.task_id

    @functools.cached_property
    def task(self) -> str:
        """The task id (without a mapped instance's ``[i]``)."""
        return mapping.split_key(self.task_id)[0]


@dataclass(frozen=True)
class Concurrency:
    """What every *other* run the controller serves in this namespace holds and waits for, and the pools.

    `pools` maps Pool resource names to their limits; `default-pool` missing means 128 slots.
    `elsewhere` is the pool slots held by runs another controller replica serves (`--shards`), by
    pool: they count against open slots like holders (see `slots_elsewhere`).
    """

    pools: Mapping[str, PoolLimit] = field(default_factory=dict)
    holders: tuple[SlotHolder, ...] = ()
    waiting: tuple[Candidate, ...] = ()
    elsewhere: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Admission:
    admitted: tuple[Candidate, ...]
    #: Why each candidate not admitted waits, by (run, task id) — Airflow's scheduler log lines.
    reasons: Mapping[tuple[str, str], str]


def pool_limits(pools: Mapping[str, PoolLimit]) -> dict[str, PoolLimit]:
    """The pools, with `default-pool` at Airflow's 128 slots unless a resource says otherwise."""
    return {pool_resource_name(DEFAULT_POOL): PoolLimit(DEFAULT_POOL_SLOTS), **pools}


def admission_order(candidate: Candidate) -> tuple[int, datetime, str, str, int, str]:
    """Airflow's `ORDER BY -priority_weight, execution_date, map_index` (names break the other ties;
    a task's ``[i]`` keys sort by map index as by length, then text)."""
    moment = candidate.logical_date.replace(tzinfo=None) if candidate.logical_date else _FAR_FUTURE
    return -candidate.weight, moment, candidate.run, candidate.task, len(candidate.task_id), candidate.task_id


def holds_slot(holder: SlotHolder, limit: PoolLimit | None) -> bool:
    return holder.state in ACTIVE_STATES or (
        holder.state is S.DEFERRED and limit is not None and limit.include_deferred
    )


def admit(
    candidates: Iterable[Candidate],
    holders: Iterable[SlotHolder],
    pools: Mapping[str, PoolLimit],
    elsewhere: Mapping[str, int] | None = None,
) -> Admission:
    """Which waiting task instances start now, and why the others wait. Pure.

    `candidates` are every scheduled task instance (of all runs), `holders` every task instance
    queued, running or deferred, `pools` the pools by resource name (see `pool_limits`), `elsewhere`
    the slots of each pool held by task instances another replica admitted (`Concurrency.elsewhere`).
    """
    limits = pool_limits(pools)
    holders = list(holders)
    open_slots = {name: _open(limit, holders, name) for name, limit in limits.items()}
    for name, used in (elsewhere or {}).items():
        if open_slots.get(name, UNLIMITED) != UNLIMITED:
            open_slots[name] -= used
    active = [h for h in holders if h.state in ACTIVE_STATES]
    dag_active = Counter(h.dag for h in active)
    task_active = Counter((h.dag, h.task) for h in active)
    task_run_active = Counter((h.run, h.task) for h in active)
    admitted: list[Candidate] = []
    reasons: dict[tuple[str, str], str] = {}
    for candidate in sorted(candidates, key=admission_order):
        reason = _why_not(candidate, limits, open_slots, dag_active, task_active, task_run_active)
        if reason is not None:
            reasons[candidate.key] = reason
            continue
        admitted.append(candidate)
        if open_slots[candidate.pool] != UNLIMITED:
            open_slots[candidate.pool] -= candidate.slots
        dag_active[candidate.dag] += 1
        task_active[(candidate.dag, candidate.task)] += 1
        task_run_active[(candidate.run, candidate.task)] += 1
    return Admission(admitted=tuple(admitted), reasons=reasons)


def _open(limit: PoolLimit, holders: Sequence[SlotHolder], pool: str) -> int:
    if limit.slots == UNLIMITED:
        return UNLIMITED
    used = sum(h.slots for h in holders if h.pool == pool and holds_slot(h, limit))
    return limit.slots - used


def _why_not(
    candidate: Candidate,
    limits: Mapping[str, PoolLimit],
    open_slots: Mapping[str, int],
    dag_active: Counter[str],
    task_active: Counter[tuple[str, str]],
    task_run_active: Counter[tuple[str, str]],
) -> str | None:
    """Airflow's checks, in Airflow's order, with Airflow's words."""
    pool = candidate.pool
    limit = limits.get(pool)
    if limit is None:
        return (
            f"{MISSING_POOL} {pool!r} does not exist (create a Pool named {pool!r}; "
            "Airflow leaves such task instances waiting too)"
        )
    available = open_slots[pool]
    if available != UNLIMITED:
        if available <= 0:
            return f"Not scheduling since there are {available} open slots in pool {pool}"
        if candidate.slots > limit.slots:
            return (
                f"Not executing: requested pool slots ({candidate.slots}) are greater than total "
                f"pool slots: '{limit.slots}' for pool: {pool}"
            )
        if candidate.slots > available:
            return (
                f"Not executing since it requires {candidate.slots} slots but there are {available} "
                f"open slots in the pool {pool}"
            )
    if dag_active[candidate.dag] >= candidate.max_active_tasks:
        return (
            f"Not executing since the number of tasks running or queued from DAG {candidate.dag} is "
            f">= to the DAG's max_active_tasks limit of {candidate.max_active_tasks}"
        )
    per_dag = candidate.max_active_tis_per_dag
    if per_dag is not None and task_active[(candidate.dag, candidate.task)] >= per_dag:
        return (
            f"Not executing since the task concurrency for this task has been reached "
            f"(max_active_tis_per_dag={per_dag})"
        )
    per_run = candidate.max_active_tis_per_dagrun
    if per_run is not None and task_run_active[(candidate.run, candidate.task)] >= per_run:
        return (
            f"Not executing since the task concurrency per DAG run for this task has been reached "
            f"(max_active_tis_per_dagrun={per_run})"
        )
    return None


def slots_held(holders: Iterable[SlotHolder], pools: Mapping[str, PoolLimit]) -> dict[str, int]:
    """Slots each pool's limit counts as held by `holders` (deferred only in include_deferred pools);
    pools with nothing held are left out. What a replica declares in the slot ledger for one shard."""
    limits = pool_limits(pools)
    held: Counter[str] = Counter()
    for holder in holders:
        if holds_slot(holder, limits.get(holder.pool)):
            held[holder.pool] += holder.slots
    return {pool: slots for pool, slots in sorted(held.items()) if slots > 0}


def slots_elsewhere(
    declared: Mapping[int, Mapping[str, int]],
    observed: Mapping[int, Mapping[str, int]],
    served: Iterable[int],
) -> dict[str, int]:
    """The slots, by pool, held by the shards this replica does not serve. Pure.

    `declared` is the slot ledger: what each shard's holder wrote it holds, *before* launching (so it
    is never less than what it launched); `observed` the same counted from the runs' statuses as the
    watch delivered them (behind the launches, but right after a holder died before writing the
    ledger). The larger of the two, per shard and pool, can only over-count: slots are never given
    out twice, at worst a released slot waits for its holder's next ledger write.
    """
    mine = set(served)
    total: Counter[str] = Counter()
    for shard in (declared.keys() | observed.keys()) - mine:
        pools_of_shard = declared.get(shard, {}).keys() | observed.get(shard, {}).keys()
        for pool in pools_of_shard:
            total[pool] += max(declared.get(shard, {}).get(pool, 0), observed.get(shard, {}).get(pool, 0))
    return {pool: slots for pool, slots in sorted(total.items()) if slots > 0}


# -------------------------------------------------------------------------------------- status


def pool_status(
    limit: PoolLimit,
    holders: Iterable[SlotHolder],
    waiting: Iterable[Candidate],
    pool: str,
    *,
    generation: int | None = None,
) -> PoolStatus:
    """The Pool's status from the task instances of every run (Airflow's `slots_stats`)."""
    mine = [h for h in holders if h.pool == pool]

    def slots_in(state: TaskInstanceState) -> int:
        return sum(h.slots for h in mine if h.state is state)

    running, queued, deferred = slots_in(S.RUNNING), slots_in(S.QUEUED), slots_in(S.DEFERRED)
    occupied = running + queued + (deferred if limit.include_deferred else 0)
    unlimited = limit.slots == UNLIMITED
    return PoolStatus(
        observed_generation=generation,
        total_slots=limit.slots,
        occupied_slots=occupied,
        running_slots=running,
        queued_slots=queued,
        deferred_slots=deferred,
        scheduled_slots=sum(c.slots for c in waiting if c.pool == pool),
        open_slots=UNLIMITED if unlimited else limit.slots - occupied,
        used=f"{occupied}/{'unlimited' if unlimited else limit.slots}",
    )
