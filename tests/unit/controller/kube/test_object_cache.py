"""The controller's object cache: never older than what it kept, copies handed out, lists once listed."""

from __future__ import annotations

from typing import Any

import pytest

from controller.kube.cache import LabelledObjects, ObjectCache


def run(version: str, state: str = "running", name: str = "r") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "resourceVersion": version},
        "status": {"state": state},
    }


def test_a_watch_event_older_than_our_write_is_ignored_and_a_newer_one_kept() -> None:
    cache = ObjectCache(frozenset({"dagruns"}))
    cache.observed("dagruns", run("10", "success"))  # our write's answer
    cache.observed("dagruns", run("9", "running"))  # the watch, late
    assert cache.get("dagruns", "ns", "r") == run("10", "success")
    cache.observed("dagruns", run("11", "failed"))  # someone else, after us
    assert cache.get("dagruns", "ns", "r") == run("11", "failed")


def test_what_is_handed_out_is_a_copy() -> None:
    cache = ObjectCache(frozenset({"dagruns"}))
    cache.observed("dagruns", run("1"))
    got = cache.get("dagruns", "ns", "r")
    assert got is not None
    got["status"]["state"] = "mutated"
    assert cache.get("dagruns", "ns", "r") == run("1")


def test_a_forgotten_or_deleted_object_is_read_from_the_api_again() -> None:
    cache = ObjectCache(frozenset({"dagruns"}))
    cache.observed("dagruns", run("1"))
    cache.forget("dagruns", "ns", "r")
    assert cache.get("dagruns", "ns", "r") is None


def test_a_namespace_list_is_answered_only_once_listed_and_follows_the_watch() -> None:
    cache = ObjectCache(frozenset({"pools"}), listable=frozenset({"pools"}))
    assert cache.in_namespace("pools", "ns") is None
    cache.listed_into("pools", "ns", [run("1", name="a")])
    cache.observed("pools", run("2", name="b"))
    assert sorted(p["metadata"]["name"] for p in cache.in_namespace("pools", "ns") or []) == ["a", "b"]
    cache.deleted("pools", "ns", "a")
    assert [p["metadata"]["name"] for p in cache.in_namespace("pools", "ns") or []] == ["b"]
    assert cache.in_namespace("pools", "other") is None


def pod(name: str, version: str, uid: str = "u1", phase: str = "Running") -> dict[str, Any]:
    meta = {"name": name, "namespace": "ns", "resourceVersion": version, "labels": {"run-uid": uid}}
    return {"metadata": meta, "status": {"phase": phase}}


def test_labelled_objects_answer_by_label_once_listed_and_never_go_back_in_time() -> None:
    pods = LabelledObjects("run-uid")
    assert pods.of("ns", "u1") is None  # not listed yet: the caller lists
    pods.seed("ns", [pod("a", "3"), pod("x", "3", uid="u2")])
    pods.observed(pod("b", "5", phase="Pending"))  # one we created: its create's answer
    pods.observed(pod("a", "6", phase="Succeeded"))
    pods.observed(pod("a", "4", phase="Running"))  # late
    assert [(p["metadata"]["name"], p["status"]["phase"]) for p in pods.of("ns", "u1") or []] == [
        ("a", "Succeeded"),
        ("b", "Pending"),
    ]
    pods.deleted(pod("a", "7"))
    pods.seed("ns", [pod("a", "6")])  # a list answered before the deletion
    assert [p["metadata"]["name"] for p in pods.of("ns", "u1") or []] == ["b"]
    assert [p["metadata"]["name"] for p in pods.of("ns", "u2") or []] == ["x"]


def test_a_namespace_list_reads_only_that_kind_in_that_namespace() -> None:
    """A run pass lists its namespace's Pools: scanning every object kept (1,000 DAGs and their runs)
    for them was 5 % of the controller's busy loop."""
    cache = ObjectCache(frozenset({"pools", "dags"}), listable=frozenset({"pools"}))
    cache.listed_into("pools", "ns", [run("1", name="a")])
    for n in range(20):
        cache.observed("dags", {"metadata": {"namespace": "ns", "name": f"d{n}", "resourceVersion": "1"}})
    cache.objects = Unwalkable(cache.objects)
    assert [p["metadata"]["name"] for p in cache.in_namespace("pools", "ns") or []] == ["a"]
    with pytest.raises(AssertionError, match="walked"):  # a positive control: the guard sees a walk
        list(cache.objects.items())


class Unwalkable(dict[Any, Any]):
    def items(self) -> Any:
        raise AssertionError("every object kept was walked")

    def __iter__(self) -> Any:
        raise AssertionError("every object kept was walked")
