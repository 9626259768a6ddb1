"""Which shard a trigger belongs to, and which shards a replica should hold: pure arithmetic, no I/O.

Triggers are spread over a fixed number of shards by a stable hash of their name; each shard has one
Lease, and a replica runs the triggers of the shards whose Leases it holds. Everything here is purely
computational (no clock, no API), so the balancing rules are tested as tables and properties.
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from zonda.resources.wire import LABEL_SHARD

#: Label every Trigger carries with its shard number, so a replica watches only its shards.
SHARD_LABEL = LABEL_SHARD


def shard_for(key: str, shards: int) -> int:
    """The shard (0..shards-1) of the trigger named or identified by `key`.

    sha256 rather than `hash()`: Python salts string hashes per process, and every controller and
    triggerer replica, across restarts and versions, must agree on the answer.
    """
    if shards < 1:
        raise ValueError(f"shards must be at least 1, not {shards}")
    digest = hashlib.sha256(key.encode()).digest()
    return int.from_bytes(digest[:8], "big") % shards


def shard_selector(shards: Iterable[int]) -> str:
    """Label selector matching the Triggers of `shards` (e.g. ``zonda.dev/shard in (0,3)``)."""
    numbers = sorted(set(shards))
    if not numbers:
        raise ValueError("a selector needs at least one shard")
    return f"{SHARD_LABEL} in ({','.join(str(number) for number in numbers)})"


def fair_share(shards: int, live_replicas: int) -> int:
    """How many shards one replica should hold when `live_replicas` share `shards`: the ceiling."""
    if live_replicas < 1:
        raise ValueError("there is always at least one live replica: the one asking")
    return math.ceil(shards / live_replicas)


def shard_capacity(
    *, running_triggers: int, trigger_capacity: int, held_shards: int, shard_count: int
) -> int:
    """How many shards a replica may hold, given Airflow's `capacity` (most triggers it runs at once).

    The unit of ownership is the shard, and a shard holds any number of triggers, so capacity cannot
    be met exactly: a replica running `trigger_capacity` triggers or more stops taking shards (and
    says so in its member Lease, so peers take more instead); below it, it may take any.
    """
    return held_shards if running_triggers >= trigger_capacity else shard_count


@dataclass(frozen=True)
class ShardPlan:
    """What a replica should do with its Leases this cycle."""

    acquire: tuple[int, ...] = ()
    release: tuple[int, ...] = ()


def plan_shards(
    *,
    identity: str,
    shard_count: int,
    capacity: int,
    holders: Mapping[int, str | None],
    capacities: Mapping[str, int],
) -> ShardPlan:
    """Decide which free shards `identity` acquires and which of its shards it gives up.

    :param holders: for each shard, the replica holding an unexpired Lease on it, or None when the
        shard is free (no Lease, released, or expired). A shard missing from the mapping is free.
    :param capacities: live replicas (besides the holders, e.g. advertised by their member Leases) and
        the most shards each holds. A holder with no entry is assumed to hold up to `shard_count`.

    Every replica applies the same rules each cycle, seeing the same Leases:
    - with k live replicas, each should hold between ``floor(shards / k)`` and the fair share
      ``ceil(shards / k)``, both capped by its capacity;
    - take free shards up to the floor; up to the fair share only from free shards that no other
      replica needs to reach its floor; beyond it (up to capacity) only from free shards that no other
      replica needs to reach its fair share, so that capacity-limited replicas leave no shard unowned;
    - give up shards above the floor only while other replicas are below *their* floor by more than
      the free shards can make up: a joining replica gets its share within a cycle or two.
    Taking above the floor needs free shards beyond the others' deficits and giving up needs deficits
    beyond the free shards, so the two never apply together and the assignment settles, not flaps.
    Acquired shards are the lowest free numbers, released ones the highest held numbers.
    """
    all_shards = range(shard_count)
    owner = {shard: holders.get(shard) for shard in all_shards}
    live = {identity, *capacities, *(holder for holder in owner.values() if holder is not None)}
    floor_share = shard_count // len(live)
    ceil_share = fair_share(shard_count, len(live))

    def limit(replica: str) -> int:
        return max(0, capacity if replica == identity else capacities.get(replica, shard_count))

    held = {replica: 0 for replica in live}
    for holder in owner.values():
        if holder is not None:
            held[holder] += 1
    others = live - {identity}
    missing_fair = sum(max(0, min(limit(r), ceil_share) - held[r]) for r in others)
    missing_floor = sum(max(0, min(limit(r), floor_share) - held[r]) for r in others)
    mine = sorted(shard for shard, holder in owner.items() if holder == identity)
    free = sorted(shard for shard, holder in owner.items() if holder is None)

    wants = [  # (how many shards to hold, free shards the others need first)
        (min(limit(identity), floor_share), 0),
        (min(limit(identity), ceil_share), missing_floor),
        (limit(identity), missing_fair),
    ]
    taking = 0
    for goal, reserved in wants:
        taking += max(0, min(goal - len(mine) - taking, len(free) - taking - reserved))
    acquire = free[:taking]

    excess = len(mine) - min(limit(identity), floor_share)
    owed = missing_floor - len(free)
    release = mine[len(mine) - min(excess, owed) :] if excess > 0 and owed > 0 else []
    return ShardPlan(acquire=tuple(acquire), release=tuple(release))


@functools.lru_cache(maxsize=1 << 16)
def dag_shard(namespace: str, dag: str, shards: int) -> int:
    """The controller shard of DAG `dag` in `namespace`: its runs and Backfills are in it too.

    One shard per DAG keeps the limits a DAG sets (maxActiveRuns, max_active_tasks,
    max_active_tis_per_dag, depends_on_past) within one replica, where they are exact.

    Remembered (a DAG's shard never changes): a sharded admission asks it of every run in the
    namespace, three times per launching pass (its concurrency, its ledger declaration, the release
    after it), and the sha256 of each was 1.5-2.7 % of a replica's busy loop with 100 runs (py-spy).
    """
    return shard_for(f"{namespace}/{dag}", shards)


def object_shard(kind: str, namespace: str, name: str, shards: int) -> int:
    """The controller shard of an object that belongs to no DAG (a Pool's status, an Asset's)."""
    return shard_for(f"{kind}:{namespace}/{name}", shards)
