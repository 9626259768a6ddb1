"""The DAGs' runs kept from the watch: what a list would say, never older, deletions kept deleted."""

from __future__ import annotations

import asyncio
from typing import Any

from controller.kube.fake import FakeKube
from controller.reconcilers.dags import DagRunRefs


def run(name: str, version: str, dag: str = "etl", state: str = "running") -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "resourceVersion": version,
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": {"dagName": dag, "runType": "manual"},
        "status": {"state": state},
    }


def states(refs: DagRunRefs, dag: str = "etl") -> dict[str, str | None]:
    return {r.name: r.state.value if r.state else None for r in refs.of_dag("ns", dag)}


def test_runs_are_kept_by_dag_and_never_replaced_by_an_older_body() -> None:
    refs = DagRunRefs()
    refs.observed(run("b", "5", state="success"))
    refs.observed(run("a", "3"))
    refs.observed(run("x", "4", dag="other"))
    refs.observed(run("b", "4", state="running"))  # late
    assert states(refs) == {"a": "running", "b": "success"}
    assert list(states(refs)) == ["a", "b"]  # by name, as the apiserver lists
    assert states(refs, "other") == {"x": "running"}


def test_a_deleted_run_is_not_brought_back_by_an_older_list_but_a_new_one_of_its_name_is() -> None:
    refs = DagRunRefs()
    refs.observed(run("a", "3"))
    refs.deleted(run("a", "6"))
    refs.observed(run("a", "3"))  # a list answered before the deletion
    assert states(refs) == {}
    refs.observed(run("a", "9", state="queued"))  # made again
    assert states(refs) == {"a": "queued"}


def test_a_namespace_is_listed_once() -> None:
    kube = FakeKube()
    asyncio.run(kube.create_custom("dagruns", "ns", run("a", "1")))
    refs = DagRunRefs()
    asyncio.run(refs.seed(kube, "ns"))
    asyncio.run(kube.create_custom("dagruns", "ns", run("b", "1")))
    asyncio.run(refs.seed(kube, "ns"))  # not listed again: the watch reports b
    assert list(states(refs)) == ["a"]


def test_the_watch_event_of_a_run_recorded_from_its_create_is_known_a_newer_one_is_not() -> None:
    refs = DagRunRefs()
    assert not refs.knows(run("a", "3")), "never seen"
    refs.observed(run("a", "3"))  # the create's answer
    assert refs.knows(run("a", "3")), "its ADDED: nothing new for the DAG"
    assert not refs.knows(run("a", "4", state="success")), "a later version is news"


def test_a_version_is_read_once_unless_it_is_not_etcds() -> None:
    """The watch's ADDED of a run a DAG pass created carries the version its create's answer had: it
    is not read again (one `run_ref` per run, not two, at a boundary of 1,000 DAGs). A version that
    is not a revision number cannot be compared, so each body of it is read."""
    refs = DagRunRefs()
    refs.observed(run("a", "3"))
    refs.observed(run("a", "3", state="success"))  # the same version: the same object, not read
    assert states(refs) == {"a": "running"}
    refs.observed(run("a", "4", state="success"))  # positive control: a newer version is read
    assert states(refs) == {"a": "success"}
    refs.observed(run("b", "x"))
    refs.observed(run("b", "x", state="success"))
    assert states(refs)["b"] == "success"
