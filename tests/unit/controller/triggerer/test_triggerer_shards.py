"""Shard arithmetic of the triggerer (`controller.coordination.shards`): pure functions, no cluster.

`plan_shards` is exercised twice: as a table of situations a replica meets, and as a simulation in
which replicas apply their plans to a shared set of Leases until nothing changes.
"""

from __future__ import annotations

import collections
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.coordination.shards import (
    ShardPlan,
    fair_share,
    plan_shards,
    shard_capacity,
    shard_for,
    shard_selector,
)


@pytest.mark.parametrize(
    ("key", "shards", "expected"),
    [
        pytest.param("a", 16, 10, id="the shard of a name never changes across processes and versions"),
        pytest.param("trigger-1", 16, 2, id="a trigger name keeps its shard"),
        pytest.param("run-1-wait-1-d1-abc123", 8, 5, id="a generated trigger name keeps its shard"),
        pytest.param("x", 1, 0, id="one shard holds everything"),
    ],
)
def test_shard_for_is_stable(key: str, shards: int, expected: int) -> None:
    assert shard_for(key, shards) == expected


@given(st.text(), st.integers(min_value=1, max_value=1024))
def test_shard_for_is_within_range(key: str, shards: int) -> None:
    assert 0 <= shard_for(key, shards) < shards


@settings(max_examples=30, deadline=None)
@given(prefix=st.text(max_size=12), shards=st.integers(min_value=2, max_value=32))
def test_shard_for_spreads_names_evenly(prefix: str, shards: int) -> None:
    keys = 200 * shards
    counts = collections.Counter(shard_for(f"{prefix}-{index}", shards) for index in range(keys))
    mean = keys / shards
    # A binomial count stays within six standard deviations of its mean for any fair hash.
    assert max(abs(counts[shard] - mean) for shard in range(shards)) < 6 * mean**0.5


def test_shard_for_refuses_zero_shards() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        shard_for("a", 0)


def test_shard_selector_lists_shards_in_order_once() -> None:
    assert shard_selector([3, 0, 3, 1]) == "zonda.dev/shard in (0,1,3)"


@pytest.mark.parametrize(
    ("shards", "replicas", "share"),
    [
        pytest.param(16, 1, 16, id="a lone replica should hold every shard"),
        pytest.param(16, 2, 8, id="two replicas split sixteen shards evenly"),
        pytest.param(16, 3, 6, id="three replicas round sixteen shards up to six"),
        pytest.param(2, 5, 1, id="more replicas than shards still get one each at most"),
    ],
)
def test_fair_share_is_the_ceiling(shards: int, replicas: int, share: int) -> None:
    assert fair_share(shards, replicas) == share


@pytest.mark.parametrize(
    ("running", "trigger_capacity", "held", "shards"),
    [
        pytest.param(999, 1000, 3, 16, id="a replica below its trigger capacity may take any shard"),
        pytest.param(1000, 1000, 3, 3, id="a replica at its trigger capacity keeps what it holds"),
        pytest.param(0, 0, 0, 0, id="a replica with capacity zero takes nothing"),
    ],
)
def test_shard_capacity_follows_airflows_trigger_capacity(
    running: int, trigger_capacity: int, held: int, shards: int
) -> None:
    assert (
        shard_capacity(
            running_triggers=running, trigger_capacity=trigger_capacity, held_shards=held, shard_count=16
        )
        == shards
    )


def holders_of(*assignment: str | None) -> dict[int, str | None]:
    return dict(enumerate(assignment))


@pytest.mark.parametrize(
    ("identity", "capacity", "holders", "capacities", "plan"),
    [
        pytest.param(
            "a",
            16,
            holders_of(*[None] * 4),
            {},
            ShardPlan(acquire=(0, 1, 2, 3)),
            id="a lone replica takes every free shard",
        ),
        pytest.param(
            "a",
            2,
            holders_of(*[None] * 4),
            {},
            ShardPlan(acquire=(0, 1)),
            id="a lone replica takes no more than its capacity",
        ),
        pytest.param(
            "a",
            16,
            holders_of(*["a"] * 8),
            {"b": 16},
            ShardPlan(release=(4, 5, 6, 7)),
            id="the holder of everything releases half when a second replica joins",
        ),
        pytest.param(
            "b",
            16,
            holders_of(*["a"] * 4, *[None] * 4),
            {"a": 16},
            ShardPlan(acquire=(4, 5, 6, 7)),
            id="the joining replica takes the released shards",
        ),
        pytest.param(
            "a",
            16,
            holders_of(*["a"] * 4, *[None] * 4),
            {"b": 16},
            ShardPlan(),
            id="no replica releases while free shards can cover the newcomer",
        ),
        pytest.param(
            "a",
            16,
            holders_of("a", "a", "a", "b", "b", "b", "c", "c", "c"),
            {"d": 16},
            ShardPlan(release=(2,)),
            id="with nine shards and a fourth replica each holder gives up one",
        ),
        pytest.param(
            "a",
            16,
            holders_of(*[None] * 8),
            {"b": 2},
            ShardPlan(acquire=(0, 1, 2, 3, 4, 5)),
            id="a replica takes more than its share when a peer's capacity is smaller",
        ),
        pytest.param(
            "a",
            3,
            holders_of(*[None] * 8),
            {"b": 3},
            ShardPlan(acquire=(0, 1, 2)),
            id="when capacities are too small some shards stay unowned",
        ),
        pytest.param(
            "b",
            16,
            holders_of("a", None, "a", None),
            {"a": 16},
            ShardPlan(acquire=(1, 3)),
            id="free and expired shards are taken lowest first",
        ),
        pytest.param(
            "a",
            16,
            holders_of("a", "a", "b", "b"),
            {"b": 16},
            ShardPlan(),
            id="a balanced assignment is left alone",
        ),
        pytest.param(
            "a",
            16,
            holders_of("a", "a", "a", "a"),
            {"b": 0},
            ShardPlan(),
            id="a replica with no capacity is not given shards",
        ),
    ],
)
def test_plan_shards(
    identity: str, capacity: int, holders: dict[int, str | None], capacities: dict[str, int], plan: ShardPlan
) -> None:
    result = plan_shards(
        identity=identity, shard_count=len(holders), capacity=capacity, holders=holders, capacities=capacities
    )
    assert result == plan


def settle(
    shard_count: int, capacities: dict[str, int], holders: dict[int, str | None], seed: int
) -> tuple[int, dict[int, str | None]]:
    """Let every replica apply its plan, in a random order each round, until nothing changes."""
    order = sorted(capacities)
    shuffle = random.Random(seed).shuffle
    for round_number in range(1, 20):
        changed = False
        shuffle(order)
        for replica in order:
            plan = plan_shards(
                identity=replica,
                shard_count=shard_count,
                capacity=capacities[replica],
                holders=holders,
                capacities=capacities,
            )
            for shard in plan.release:
                holders[shard], changed = None, True
            for shard in plan.acquire:
                if holders[shard] is None:  # the Lease precondition: only one replica wins a free shard
                    holders[shard], changed = replica, True
        if not changed:
            return round_number, holders
    raise AssertionError(f"the assignment did not settle: {holders}")


@settings(max_examples=200, deadline=None)
@given(
    shard_count=st.integers(min_value=1, max_value=24),
    capacities=st.lists(st.integers(min_value=0, max_value=30), min_size=1, max_size=6),
    first_holds_all=st.booleans(),
    seed=st.integers(min_value=0, max_value=1000),
)
def test_replicas_settle_on_a_fair_assignment(
    shard_count: int, capacities: list[int], first_holds_all: bool, seed: int
) -> None:
    replicas = {f"r{index}": capacity for index, capacity in enumerate(capacities)}
    start = "r0" if first_holds_all and capacities[0] >= shard_count else None
    rounds, holders = settle(shard_count, replicas, dict.fromkeys(range(shard_count), start), seed)

    held = collections.Counter(holder for holder in holders.values() if holder is not None)
    assert rounds <= 4
    assert all(held[replica] <= capacity for replica, capacity in replicas.items())
    if sum(replicas.values()) >= shard_count:
        assert None not in holders.values(), "enough capacity, yet a shard is unowned"
    floor_share = shard_count // len(replicas)
    for replica, capacity in replicas.items():
        assert held[replica] >= min(capacity, floor_share), f"{replica} starves: {dict(held)}"
