"""A big run's status stored split (`zonda.resources.run_shards`): the DagRun keeps a summary, the
task instances go 256 to a shard in their natural order, and the merge gives the status back whole."""

from __future__ import annotations

from typing import Any

import pytest

from zonda.resources import run_shards
from zonda.resources.dagrun_models import DagRunStatus

N = run_shards.SHARD_INSTANCES


def status(count: int, state: str = "success") -> dict[str, Any]:
    tis: dict[str, Any] = {"make": {"state": "success", "tryNumber": 1}}
    tis |= {f"work[{i}]": {"state": state, "tryNumber": 1} for i in range(count)}
    return {"state": "running", "runId": "r", "taskInstances": tis, "conditions": []}


def test_a_run_within_the_inline_limit_is_stored_as_it_is() -> None:
    small = status(10)
    stored = run_shards.split(small, "run", inline_limit=100)
    assert stored.shards == {} and stored.summary == small


def test_past_the_limit_the_summary_counts_and_the_instances_go_in_natural_order() -> None:
    big = status(1000, "running")
    big["taskInstances"]["work[7]"] = {"state": "failed", "tryNumber": 2}
    stored = run_shards.split(big, "run", inline_limit=100)
    assert list(stored.shards) == [f"run-{k}" for k in range(-(-1001 // N))]
    assert list(stored.shards["run-0"])[:4] == ["make", "work[0]", "work[1]", "work[2]"]  # not work[10]
    assert "work[255]" in stored.shards["run-1"] or "work[254]" in stored.shards["run-0"]
    assert "taskInstances" not in stored.summary and stored.summary["runId"] == "r"
    assert stored.summary["taskCounts"] == {"failed": 1, "running": 999, "success": 1}
    assert stored.summary["progress"] == "2/1001"
    refs = stored.summary["taskInstanceShards"]
    assert [r["instances"] for r in refs] == [len(s) for s in stored.shards.values()]
    assert sum(len(s) for s in stored.shards.values()) == 1001


def test_the_merge_is_the_whole_status_naming_the_versions_read() -> None:
    big = status(600)
    stored = run_shards.split(big, "run", inline_limit=100)
    versions = {name: str(k + 10) for k, name in enumerate(stored.shards)}
    summary = run_shards.with_versions(stored.summary, versions)
    whole = run_shards.merge(summary, stored.shards, versions)
    assert whole["taskInstances"] == dict(sorted(big["taskInstances"].items()))
    assert run_shards.versions_read(whole) == versions
    assert "taskCounts" not in whole and "progress" not in whole
    DagRunStatus.model_validate(whole)  # what the pure core parses
    # split again (the layout kept: it names shards), nothing moved
    again = run_shards.split(whole, "run", inline_limit=10_000)
    assert again.shards == stored.shards


def test_a_split_run_stays_split_when_it_falls_under_the_limit() -> None:
    stored = run_shards.split(status(300), "run", inline_limit=100)
    whole = run_shards.merge(stored.summary, stored.shards)
    assert run_shards.split(whole, "run", inline_limit=10_000).shards == stored.shards


def test_a_shard_the_summary_names_but_is_not_there_is_an_error_and_unnamed_ones_are_ignored() -> None:
    stored = run_shards.split(status(600), "run", inline_limit=100)
    partial = {name: tis for name, tis in stored.shards.items() if name != "run-1"}
    with pytest.raises(run_shards.MissingShard, match="run-1"):
        run_shards.merge(stored.summary, partial)
    extra = {**stored.shards, "run-9": {"ghost": {"state": "running"}}}
    assert "ghost" not in run_shards.merge(stored.summary, extra)["taskInstances"]


def test_shard_names_are_the_run_and_an_index_and_fit_a_kubernetes_name() -> None:
    assert run_shards.shard_name("etl-manual-1", 3) == "etl-manual-1-3"
    long = run_shards.shard_name("r" * 253, 12)
    assert len(long) <= 253 and long.endswith("-12") and long != run_shards.shard_name("r" * 252 + "s", 12)
