"""Which controller shard a DAG (and so its runs and Backfills) is in: stable across processes and
releases (pinned numbers: changing them would move every DAG at an upgrade), and spread."""

from __future__ import annotations

from controller.coordination.shards import dag_shard, object_shard, shard_for


def test_a_dags_shard_is_pinned() -> None:
    assert [dag_shard("default", f"dag-{i}", 4) for i in range(8)] == [0, 1, 3, 2, 3, 0, 3, 0]
    assert dag_shard("default", "anything", 1) == 0


def test_dags_spread_over_the_shards() -> None:
    spread = [dag_shard("default", f"dag-{i}", 4) for i in range(400)]
    assert all(60 <= spread.count(shard) <= 140 for shard in range(4)), spread


def test_namespace_and_kind_are_part_of_the_key() -> None:
    assert dag_shard("team-a", "etl", 16) == shard_for("team-a/etl", 16)
    assert object_shard("pool", "default", "p", 3) == shard_for("pool:default/p", 3)
