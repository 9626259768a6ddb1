"""`RunIndex.of_dag`, `siblings` and `occupying`: a DAG's runs, and a namespace's runs holding or waiting
for pool slots, from entries of their own, however many runs are held."""

from __future__ import annotations

from typing import Any

import pytest

from controller.reconcilers import index as index_module
from controller.reconcilers.index import RunIndex, RunSummary
from tests.unit.fake_world import dag_body, run_body
from zonda.passes.pools import SlotHolder
from zonda.resources.models import TaskInstanceState as S

NS = "team"


def body(name: str, dag: str, namespace: str = NS, state: str = "running") -> dict[str, Any]:
    run = run_body(name, dag)
    run["metadata"]["namespace"] = namespace
    run["status"] = {"state": state}
    return run


class Unscannable(dict[tuple[str, str], RunSummary]):
    """The runs held, refusing to be walked: a lookup of one DAG's runs must not read every run."""

    def __iter__(self) -> Any:
        raise AssertionError("every run held was scanned")

    def items(self) -> Any:
        raise AssertionError("every run held was scanned")

    def values(self) -> Any:
        raise AssertionError("every run held was scanned")


def test_a_dags_runs_follow_updates_removals_and_a_changed_dag_name() -> None:
    index = RunIndex()
    for name, dag, namespace in [("a-1", "a", NS), ("b-1", "b", NS), ("a-2", "a", NS), ("a-1", "a", "other")]:
        index.update(body(name, dag, namespace))
    assert list(index.of_dag(NS, "a")) == ["a-1", "a-2"]
    assert list(index.of_dag("other", "a")) == ["a-1"]
    assert index.of_dag(NS, "nothing") == {}

    index.update(body("a-1", "a", state="success"))  # an update keeps its place, with the new summary
    assert [s.state for s in index.of_dag(NS, "a").values()] == ["success", "running"]
    assert list(index.siblings(NS, "a", "a-1")) == ["a-2"]

    index.update(body("a-2", "b"))  # its spec names another DAG now
    assert (list(index.of_dag(NS, "a")), list(index.of_dag(NS, "b"))) == (["a-1"], ["b-1", "a-2"])

    index.remove(NS, "a-1")
    index.remove(NS, "a-1")  # twice: a DELETED after a relist
    assert index.of_dag(NS, "a") == {}
    index.reserve(body("a-3", "a"))
    index.record(body("a-4", "a"), written_version="7")
    assert list(index.of_dag(NS, "a")) == ["a-3", "a-4"]


def test_a_dags_runs_are_found_without_scanning_every_run_held() -> None:
    index = RunIndex()
    index.runs = Unscannable()
    for n in range(50):
        index.update(body(f"d{n}-1", f"d{n}"))
    with pytest.raises(AssertionError, match="scanned"):  # a positive control: the guard sees a scan
        index.in_namespace(NS)
    assert list(index.of_dag(NS, "d7")) == ["d7-1"]
    assert list(index.siblings(NS, "d7", "other")) == ["d7-1"]


def occupying_summary(dag: str, *, holding: bool) -> RunSummary:
    holder = SlotHolder(run="r", dag=dag, task_id="t", pool="default_pool", slots=1, state=S.RUNNING)
    return RunSummary(dag, None, "running", None, 1, {}, holders=(holder,) if holding else ())


def test_the_runs_occupying_slots_are_found_without_scanning_every_run_held() -> None:
    """Every run pass asks, under the admission lock, which runs hold or wait for a slot: with 1,000
    DAGs and their finished runs, selecting them from every run held was 20 % of the busy loop."""
    index = RunIndex()
    index.runs = Unscannable()
    for n in range(50):
        index.update(body(f"d{n}-1", f"d{n}", state="success"))  # finished: holds nothing
    index.put((NS, "busy"), occupying_summary("busy", holding=True))
    index.put(("other", "busy"), occupying_summary("busy", holding=True))
    with pytest.raises(AssertionError, match="scanned"):  # a positive control: the guard sees a scan
        index.in_namespace(NS)
    assert list(index.occupying(NS)) == ["busy"]
    index.put((NS, "busy"), occupying_summary("busy", holding=False))  # its task ended
    assert index.occupying(NS) == {}
    index.put((NS, "again"), occupying_summary("again", holding=True))
    index.remove(NS, "again")
    assert index.occupying(NS) == {} and list(index.occupying("other")) == ["busy"]


class UnscannableDags(dict[tuple[str, str], Any]):
    """The runs' resolved DAG snapshots, refusing to be walked."""

    def __iter__(self) -> Any:
        raise AssertionError("every snapshot held was scanned")


def test_a_runs_dag_snapshot_is_resolved_once_per_uid_and_dropped_without_a_scan(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A run's snapshot is resolved once (it never changes), again for a run made anew under its name
    (a new uid), and dropped with the run: removing one scanned every snapshot held."""
    resolved: list[str] = []
    real = index_module.resolve_dag

    def counted(name: str, spec: Any) -> Any:
        resolved.append(name)
        return real(name, spec)

    monkeypatch.setattr(index_module, "resolve_dag", counted)
    index = RunIndex()
    index._dags = UnscannableDags()
    spec = dag_body("etl")["spec"]
    first = index._dag((NS, "r", "uid-1"), "etl", spec)
    assert first is not None and index._dag((NS, "r", "uid-1"), "etl", spec) is first
    assert resolved == ["etl"]
    index._dag((NS, "r", "uid-2"), "etl", spec)  # the run deleted and made again
    assert resolved == ["etl", "etl"]
    with pytest.raises(AssertionError, match="scanned"):  # a positive control: the guard sees a scan
        list(index._dags)
    index.remove(NS, "r")
    index._dag((NS, "r", "uid-2"), "etl", spec)
    assert resolved == ["etl", "etl", "etl"], "dropped with the run"
