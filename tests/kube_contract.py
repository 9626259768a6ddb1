"""What the controller relies on the Kubernetes API to do, as scenarios both APIs must pass.

`FakeKube` stands in for the apiserver in every unit test, so where it differs the unit tier proves
the wrong thing. Each scenario here is run twice, on the same terms: against `FakeKube`
(tests/unit/controller/kube/test_fake_kube_contract.py) and against a real kube-apiserver with
Zonda's CRDs through `controller.kube.client.Kube` (tests/cluster/test_fake_kube_contract.py). A
scenario uses only the `KubeApi` protocol and asserts what the real API does; when the real API
fails one, the scenario is wrong, and when FakeKube fails one, FakeKube is.

Covered: the fields the server sets on create, 404 and 409 (AlreadyExists, Conflict) with the real
API's messages, resourceVersion preconditions on status patches and replaces and on Leases, JSON
merge patch of the status subresource, a status given on create being dropped, status writes leaving
spec, metadata and generation alone, a write that changes nothing keeping the resourceVersion, label
selectors (every operator the API has), list order and cluster-wide lists, deletion, Pods, Leases,
a pod's finalizer holding its deletion until a JSON patch (with `test` preconditions) removes it, a
big DagRun read and written whole across its DagRunShards (`controller.kube.run_shards`), and a
watch from a list's resourceVersion or any event's (each change once, in order, by label selector).
Not covered, because FakeKube does not model them (its docstring says so): schema validation
and pruning, admission, garbage collection, pod life cycles, etcd's size limit; a watch's expiry
(410) and bookmarks are the fake's test hooks, as the apiserver gives them only in its own time.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from contextlib import aclosing

import pytest

from controller.kube.errors import AlreadyExists, Conflict, KubeError, NotFound
from controller.kube.protocol import Body, KubeApi
from zonda.resources.models import API_VERSION, DAGRUNS

Scenario = Callable[[KubeApi, str], Awaitable[None]]
SCENARIOS: dict[str, Scenario] = {}
#: What the apiserver calls a DagRun in its messages (`<plural>.<group>`).
DAGRUN_RESOURCE = f"{DAGRUNS}.zonda.dev"
LEASE_RESOURCE = "leases.coordination.k8s.io"
#: A node selector no node matches: the contract's pods are never scheduled, so they delete at once.
NOWHERE = {"zonda.dev/contract": "nowhere"}


def scenario(function: Scenario) -> Scenario:
    """Registers a scenario under its function's name (the test id on both sides)."""
    SCENARIOS[function.__name__] = function
    return function


def dagrun(name: str, *, labels: dict[str, str] | None = None, status: Body | None = None) -> Body:
    body: Body = {
        "apiVersion": API_VERSION,
        "kind": "DagRun",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"dagName": "contract", "conf": {"k": "v"}},
    }
    if status is not None:
        body["status"] = status
    return body


def lease(name: str, holder: str, labels: dict[str, str]) -> Body:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "labels": labels},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15},
    }


def pod(name: str, labels: dict[str, str], *, status: Body | None = None) -> Body:
    body: Body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "nodeSelector": NOWHERE,
            "containers": [{"name": "base", "image": "busybox", "command": ["true"]}],
        },
    }
    if status is not None:
        body["status"] = status
    return body


def rv(body: Body) -> str:
    version = body["metadata"]["resourceVersion"]
    assert isinstance(version, str) and version, f"no resourceVersion in {body['metadata']}"
    return version


def names(bodies: list[Body], namespace: str | None = None) -> list[str]:
    return [
        b["metadata"]["name"] for b in bodies if namespace is None or b["metadata"]["namespace"] == namespace
    ]


# ------------------------------------------------------------------------------------ create, 404


@scenario
async def create_sets_the_server_fields(kube: KubeApi, namespace: str) -> None:
    created = await kube.create_custom(DAGRUNS, namespace, dagrun("r"))
    meta = created["metadata"]
    assert meta["namespace"] == namespace
    assert meta["generation"] == 1
    assert re.fullmatch(r"[0-9a-f-]{36}", meta["uid"]), meta["uid"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", meta["creationTimestamp"])
    stored = await kube.get_custom(DAGRUNS, namespace, "r")
    assert stored is not None
    assert rv(stored) == rv(created) and stored["metadata"]["uid"] == meta["uid"]
    assert stored["spec"] == {"dagName": "contract", "conf": {"k": "v"}}


@scenario
async def a_taken_name_is_already_exists_and_keeps_the_first(kube: KubeApi, namespace: str) -> None:
    first = await kube.create_custom(DAGRUNS, namespace, dagrun("r"))
    second = dagrun("r")
    second["spec"]["conf"] = {"k": "other"}
    with pytest.raises(AlreadyExists) as refused:
        await kube.create_custom(DAGRUNS, namespace, second)
    assert refused.value.status == 409
    assert refused.value.api_message == f'{DAGRUN_RESOURCE} "r" already exists'
    stored = await kube.get_custom(DAGRUNS, namespace, "r")
    assert stored is not None and stored["spec"]["conf"] == {"k": "v"} and rv(stored) == rv(first)


@scenario
async def a_missing_object_is_none_false_or_not_found(kube: KubeApi, namespace: str) -> None:
    assert await kube.get_custom(DAGRUNS, namespace, "gone") is None
    assert await kube.delete_custom(DAGRUNS, namespace, "gone") is False
    with pytest.raises(NotFound) as patched:
        await kube.patch_custom_status(DAGRUNS, namespace, "gone", {"state": "running"})
    assert patched.value.status == 404
    assert patched.value.api_message == f'{DAGRUN_RESOURCE} "gone" not found'
    body = dagrun("gone", status={"state": "running"})
    body["metadata"]["resourceVersion"] = "1"
    with pytest.raises(NotFound):
        await kube.replace_custom_status(DAGRUNS, namespace, body)
    assert await kube.get_lease(namespace, "gone") is None
    assert await kube.delete_lease(namespace, "gone") is False
    assert await kube.delete_pod(namespace, "gone", grace_period_seconds=0) is False


@scenario
async def delete_removes_and_a_new_object_of_the_name_is_another(kube: KubeApi, namespace: str) -> None:
    first = await kube.create_custom(DAGRUNS, namespace, dagrun("r"))
    assert await kube.delete_custom(DAGRUNS, namespace, "r") is True
    assert await kube.get_custom(DAGRUNS, namespace, "r") is None
    second = await kube.create_custom(DAGRUNS, namespace, dagrun("r"))
    assert second["metadata"]["uid"] != first["metadata"]["uid"]
    assert second["metadata"]["generation"] == 1


@scenario
async def a_delete_with_preconditions_is_of_the_object_as_read(kube: KubeApi, namespace: str) -> None:
    """DeleteOptions.preconditions: a stale resourceVersion or another uid is 409 Conflict and the
    object stays (a stale leader cannot delete what changed since it read it); the current ones delete."""
    read = await kube.create_custom(DAGRUNS, namespace, dagrun("r"))
    changed = await kube.patch_custom_status(DAGRUNS, namespace, "r", {"state": "running"})
    assert rv(changed) != rv(read)
    with pytest.raises(Conflict) as stale:
        await kube.delete_custom(DAGRUNS, namespace, "r", resource_version=rv(read))
    message = stale.value.api_message
    assert stale.value.status == 409 and "ResourceVersion in the precondition" in message, message
    with pytest.raises(Conflict) as other:
        await kube.delete_custom(DAGRUNS, namespace, "r", uid="00000000-0000-0000-0000-000000000000")
    assert "UID in the precondition" in other.value.api_message, other.value.api_message
    assert await kube.get_custom(DAGRUNS, namespace, "r") is not None
    uid = changed["metadata"]["uid"]
    assert await kube.delete_custom(DAGRUNS, namespace, "r", resource_version=rv(changed), uid=uid) is True
    assert await kube.delete_custom(DAGRUNS, namespace, "r", resource_version=rv(changed)) is False
    await kube.create_pod(namespace, pod("p", {"run": "one"}))
    with pytest.raises(Conflict):
        await kube.delete_pod(namespace, "p", grace_period_seconds=0, uid=uid)
    assert names(await kube.list_pods(namespace, "run=one")) == ["p"]


# ------------------------------------------------------------------------------ status subresource


@scenario
async def a_status_given_on_create_is_dropped(kube: KubeApi, namespace: str) -> None:
    """With the status subresource, create ignores `status` (only the status endpoint writes it)."""
    created = await kube.create_custom(DAGRUNS, namespace, dagrun("r", status={"state": "running"}))
    assert "status" not in created
    stored = await kube.get_custom(DAGRUNS, namespace, "r")
    assert stored is not None and "status" not in stored


@scenario
async def a_status_patch_is_a_json_merge_patch(kube: KubeApi, namespace: str) -> None:
    await kube.create_custom(DAGRUNS, namespace, dagrun("r"))
    condition = {
        "type": "Ready",
        "status": "False",
        "reason": "Starting",
        "lastTransitionTime": "2024-01-01T00:00:00Z",
    }
    await kube.patch_custom_status(
        DAGRUNS,
        namespace,
        "r",
        {
            "state": "running",
            "message": "first",
            "taskInstances": {"a": {"state": "queued", "tryNumber": 1}, "b": {"state": "queued"}},
            "conditions": [condition, {**condition, "type": "Other"}],
        },
    )
    patched = await kube.patch_custom_status(
        DAGRUNS,
        namespace,
        "r",
        {
            "message": None,  # null removes a key
            "taskInstances": {"a": {"state": "running"}, "b": None},  # maps merge key by key
            "conditions": [{**condition, "type": "Last"}],  # lists are replaced whole
        },
    )
    assert patched["status"] == {
        "state": "running",
        "taskInstances": {"a": {"state": "running", "tryNumber": 1}},
        "conditions": [{**condition, "type": "Last"}],
    }
    stored = await kube.get_custom(DAGRUNS, namespace, "r")
    assert stored is not None and stored["status"] == patched["status"] and rv(stored) == rv(patched)


@scenario
async def a_status_patch_with_a_stale_resource_version_conflicts(kube: KubeApi, namespace: str) -> None:
    created = await kube.create_custom(DAGRUNS, namespace, dagrun("r"))
    first = await kube.patch_custom_status(
        DAGRUNS, namespace, "r", {"state": "queued"}, resource_version=rv(created)
    )
    assert rv(first) != rv(created)
    with pytest.raises(Conflict) as refused:
        await kube.patch_custom_status(
            DAGRUNS, namespace, "r", {"state": "failed"}, resource_version=rv(created)
        )
    assert refused.value.status == 409
    assert refused.value.api_message == (
        f'Operation cannot be fulfilled on {DAGRUN_RESOURCE} "r": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )
    again = await kube.patch_custom_status(
        DAGRUNS, namespace, "r", {"state": "running"}, resource_version=rv(first)
    )
    assert again["status"] == {"state": "running"}


@scenario
async def a_status_replace_checks_the_resource_version_and_replaces_only_the_status(
    kube: KubeApi, namespace: str
) -> None:
    created = await kube.create_custom(DAGRUNS, namespace, dagrun("r", labels={"a": "1"}))
    first = await kube.patch_custom_status(DAGRUNS, namespace, "r", {"state": "queued", "message": "m"})
    stale = {**created, "status": {"state": "failed"}}
    with pytest.raises(Conflict):
        await kube.replace_custom_status(DAGRUNS, namespace, stale)
    body = dict(first)
    body["status"] = {"state": "running"}
    body["spec"] = {"dagName": "changed"}  # the status endpoint ignores everything but status
    body["metadata"] = {**first["metadata"], "labels": {"a": "2"}}
    replaced = await kube.replace_custom_status(DAGRUNS, namespace, body)
    assert replaced["status"] == {"state": "running"}  # the whole status: `message` is gone
    assert replaced["spec"]["dagName"] == "contract"
    assert replaced["metadata"]["labels"] == {"a": "1"}
    assert replaced["metadata"]["generation"] == 1
    assert rv(replaced) != rv(first)


@scenario
async def status_writes_leave_spec_and_generation_alone(kube: KubeApi, namespace: str) -> None:
    created = await kube.create_custom(DAGRUNS, namespace, dagrun("r"))
    patched = await kube.patch_custom_status(DAGRUNS, namespace, "r", {"state": "running"})
    assert patched["metadata"]["generation"] == 1
    assert patched["spec"] == created["spec"]
    assert patched["metadata"]["uid"] == created["metadata"]["uid"]
    assert patched["metadata"]["creationTimestamp"] == created["metadata"]["creationTimestamp"]


@scenario
async def a_write_that_changes_nothing_keeps_the_resource_version(kube: KubeApi, namespace: str) -> None:
    """The apiserver does not write an unchanged object: no new resourceVersion, no watch event."""
    await kube.create_custom(DAGRUNS, namespace, dagrun("r"))
    changed = await kube.patch_custom_status(DAGRUNS, namespace, "r", {"state": "running"})
    same = await kube.patch_custom_status(
        DAGRUNS, namespace, "r", {"state": "running"}, resource_version=rv(changed)
    )
    assert rv(same) == rv(changed)
    replaced = await kube.replace_custom_status(DAGRUNS, namespace, same)
    assert rv(replaced) == rv(changed)
    stored = await kube.get_custom(DAGRUNS, namespace, "r")
    assert stored is not None and rv(stored) == rv(changed)
    # the positive control: a change does get a new one
    moved = await kube.patch_custom_status(DAGRUNS, namespace, "r", {"state": "success"})
    assert rv(moved) != rv(changed)


# --------------------------------------------------------------------------------- lists, selectors


SELECTOR_CASES: list[tuple[str, list[str]]] = [
    ("", ["both", "neither", "only-a", "other-a"]),
    ("a=x", ["both", "only-a"]),
    ("a==x", ["both", "only-a"]),
    ("a!=x", ["neither", "other-a"]),  # an object without the label matches `!=`
    ("a in (x,y)", ["both", "only-a", "other-a"]),
    ("a notin (x)", ["neither", "other-a"]),  # and `notin`
    ("a", ["both", "only-a", "other-a"]),
    ("!a", ["neither"]),
    ("a=x,b=y", ["both"]),
    ("a in (x, y), !b", ["only-a", "other-a"]),
    ("a=nothing", []),
]


@scenario
async def label_selectors_select_as_the_api_does(kube: KubeApi, namespace: str) -> None:
    labelled = {
        "both": {"a": "x", "b": "y"},
        "only-a": {"a": "x"},
        "other-a": {"a": "y"},
        "neither": {"c": "z"},
    }
    for name, labels in labelled.items():
        await kube.create_custom(DAGRUNS, namespace, dagrun(name, labels=labels))
    found = {
        selector: names(await kube.list_custom(DAGRUNS, namespace, label_selector=selector or None))
        for selector, _ in SELECTOR_CASES
    }
    assert found == dict(SELECTOR_CASES)  # in name order, as etcd keeps them


@scenario
async def a_malformed_selector_is_a_bad_request(kube: KubeApi, namespace: str) -> None:
    await kube.create_custom(DAGRUNS, namespace, dagrun("r", labels={"a": "x"}))
    for selector in ("a in x", "a=(x)", "=x"):
        with pytest.raises(KubeError) as refused:
            await kube.list_custom(DAGRUNS, namespace, label_selector=selector)
        assert refused.value.status == 400, selector


@scenario
async def lists_are_per_namespace_or_cluster_wide_with_a_version(kube: KubeApi, namespace: str) -> None:
    for name in ("b", "a", "c"):
        await kube.create_custom(DAGRUNS, namespace, dagrun(name, labels={"contract": namespace}))
    items, version = await kube.list_custom_with_version(DAGRUNS, namespace)
    assert names(items) == ["a", "b", "c"]
    assert isinstance(version, str) and version
    everywhere = await kube.list_custom(DAGRUNS, None, label_selector=f"contract={namespace}")
    assert names(everywhere, namespace) == ["a", "b", "c"]
    assert await kube.list_custom(DAGRUNS, f"{namespace}-elsewhere") == []


# ------------------------------------------------------------------------------------------ leases


@scenario
async def a_lease_is_replaced_whole_only_at_its_resource_version(kube: KubeApi, namespace: str) -> None:
    created = await kube.create_lease(namespace, lease("l", "one", {"app": "contract"}))
    with pytest.raises(AlreadyExists) as taken:
        await kube.create_lease(namespace, lease("l", "two", {"app": "contract"}))
    assert taken.value.api_message == f'{LEASE_RESOURCE} "l" already exists'
    body = {**created, "metadata": {**created["metadata"], "labels": {"app": "contract", "held": "yes"}}}
    body["spec"] = {**created["spec"], "holderIdentity": "two"}
    replaced = await kube.replace_lease(namespace, body)
    assert replaced["spec"]["holderIdentity"] == "two"
    assert replaced["metadata"]["labels"] == {"app": "contract", "held": "yes"}  # metadata too
    assert rv(replaced) != rv(created)
    with pytest.raises(Conflict):
        await kube.replace_lease(
            namespace, {**created, "spec": {**created["spec"], "holderIdentity": "three"}}
        )
    stored = await kube.get_lease(namespace, "l")
    assert stored is not None and stored["spec"]["holderIdentity"] == "two"
    assert names(await kube.list_leases(namespace, "held=yes")) == ["l"]
    assert names(await kube.list_leases(namespace, "held=no")) == []
    assert await kube.delete_lease(namespace, "l") is True
    assert await kube.get_lease(namespace, "l") is None


@scenario
async def a_lease_replaced_unchanged_keeps_its_resource_version(kube: KubeApi, namespace: str) -> None:
    created = await kube.create_lease(namespace, lease("l", "one", {"app": "contract"}))
    same = await kube.replace_lease(namespace, created)
    assert rv(same) == rv(created)


# -------------------------------------------------------------------------------------------- pods


@scenario
async def pods_are_created_listed_by_label_and_deleted(kube: KubeApi, namespace: str) -> None:
    created = await kube.create_pod(namespace, pod("p", {"run": "one"}, status={"phase": "Succeeded"}))
    assert created["metadata"]["namespace"] == namespace and created["metadata"]["uid"]
    assert created["status"]["phase"] == "Pending"  # the status given on create is not the pod's
    with pytest.raises(AlreadyExists) as taken:
        await kube.create_pod(namespace, pod("p", {"run": "one"}))
    assert taken.value.api_message == 'pods "p" already exists'
    await kube.create_pod(namespace, pod("q", {"run": "two"}))
    assert names(await kube.list_pods(namespace, "run=one")) == ["p"]
    assert names(await kube.list_pods(namespace, "run in (one,two)")) == ["p", "q"]
    assert await kube.delete_pod(namespace, "p", grace_period_seconds=0) is True
    assert names(await kube.list_pods(namespace, "run in (one,two)")) == ["q"]


@scenario
async def a_pod_with_a_finalizer_stays_deleted_until_a_patch_removes_it(
    kube: KubeApi, namespace: str
) -> None:
    body = pod("held", {"run": "held"})
    body["metadata"]["finalizers"] = ["zonda.dev/try-tracking"]
    created = await kube.create_pod(namespace, body)
    assert await kube.delete_pod(namespace, "held", grace_period_seconds=0) is True
    [marked] = await kube.list_pods(namespace, "run=held")  # still there, marked
    assert marked["metadata"]["deletionTimestamp"], marked["metadata"]
    assert marked["metadata"]["finalizers"] == ["zonda.dev/try-tracking"]
    assert rv(marked) != rv(created)
    assert await kube.delete_pod(namespace, "held") is True  # deleted again: still marked
    assert names(await kube.list_pods(namespace, "run=held")) == ["held"]
    path = "/metadata/finalizers/0"
    stale = [{"op": "test", "path": "/metadata/uid", "value": "another"}, {"op": "remove", "path": path}]
    with pytest.raises(KubeError) as refused:  # a failed test is a 422, and nothing is patched
        await kube.patch_pod(namespace, "held", stale)
    assert refused.value.status == 422, refused.value
    assert names(await kube.list_pods(namespace, "run=held")) == ["held"]
    release = [
        {"op": "test", "path": "/metadata/uid", "value": created["metadata"]["uid"]},
        {"op": "test", "path": path, "value": "zonda.dev/try-tracking"},
        {"op": "remove", "path": path},
    ]
    await kube.patch_pod(namespace, "held", release)
    assert names(await kube.list_pods(namespace, "run=held")) == []  # the last finalizer gone: deleted
    assert await kube.patch_pod(namespace, "held", release) is None  # a gone pod: None


async def _watched(
    kube: KubeApi, plural: str, namespace: str, version: str, count: int, label_selector: str | None = None
) -> list[Body]:
    """The first `count` events of a watch from `version`, as (type, name, resourceVersion)."""
    seen: list[Body] = []
    async with aclosing(
        kube.watch_objects(plural, namespace, label_selector=label_selector, resource_version=version)
    ) as events:
        async for kind, body in events:
            seen.append({"type": kind, "name": body["metadata"]["name"], "rv": rv(body)})
            if len(seen) == count:
                break
    return seen


@scenario
async def a_watch_delivers_each_change_once_in_order_and_resumes_after_any_event(
    kube: KubeApi, namespace: str
) -> None:
    await kube.create_custom(DAGRUNS, namespace, dagrun("w1"))
    items, version = await kube.list_objects(DAGRUNS, namespace)
    assert names(items) == ["w1"] and items[0]["kind"] == "DagRun" and version
    await kube.create_custom(DAGRUNS, namespace, dagrun("w2"))
    patched = await kube.patch_custom_status(DAGRUNS, namespace, "w1", {"state": "running"})
    await kube.delete_custom(DAGRUNS, namespace, "w2")
    seen = await _watched(kube, DAGRUNS, namespace, version, 3)
    assert [(e["type"], e["name"]) for e in seen] == [("ADDED", "w2"), ("MODIFIED", "w1"), ("DELETED", "w2")]
    assert seen[1]["rv"] == rv(patched)
    assert await _watched(kube, DAGRUNS, namespace, seen[0]["rv"], 2) == seen[1:]  # from any event on

    await kube.create_pod(namespace, pod("other", {}))
    listed, version = await kube.list_objects("pods", namespace, "zonda.dev/contract-watch")
    assert listed == []
    await kube.create_pod(namespace, pod("other-2", {}))
    await kube.create_pod(namespace, pod("labelled", {"zonda.dev/contract-watch": "x"}))
    events = await _watched(
        kube, "pods", namespace, str(version), 1, label_selector="zonda.dev/contract-watch"
    )
    assert [(e["type"], e["name"]) for e in events] == [("ADDED", "labelled")]


def _instances(count: int, state: str = "scheduled") -> Body:
    return {f"wide[{i}]": {"state": state, "tryNumber": 1} for i in range(count)}


@scenario
async def a_big_run_is_read_and_written_whole_its_instances_in_owned_shards(
    kube: KubeApi, namespace: str
) -> None:
    """Past the inline limit a DagRun's task instances go to DagRunShards the run owns, `<run>-<k>`,
    each written only when its instances changed; every read (GET, list) has them all."""
    from zonda.resources import run_shards

    created = await kube.create_custom(DAGRUNS, namespace, dagrun("big"))
    count = run_shards.DEFAULT_INLINE_TASK_INSTANCES + run_shards.SHARD_INSTANCES + 1
    tis = _instances(count)
    written = await kube.replace_custom_status(
        DAGRUNS, namespace, {**created, "status": {"state": "running", "taskInstances": tis}}
    )
    assert written["status"]["taskInstances"] == tis  # the answer is whole
    shards = await kube.list_custom(run_shards.PLURAL, namespace)
    expected = [run_shards.shard_name("big", k) for k in range(-(-count // run_shards.SHARD_INSTANCES))]
    assert sorted(s["metadata"]["name"] for s in shards) == sorted(expected)
    owner = shards[0]["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("DagRun", "big", created["metadata"]["uid"])
    read = await kube.get_custom(DAGRUNS, namespace, "big")
    assert read is not None and read["status"]["taskInstances"] == tis
    assert read["status"]["state"] == "running" and "taskCounts" not in read["status"]
    refs = {ref["name"]: ref["resourceVersion"] for ref in read["status"]["taskInstanceShards"]}
    assert refs == {s["metadata"]["name"]: rv(s) for s in shards}  # each shard at the version read
    (listed,) = [r for r in await kube.list_custom(DAGRUNS, namespace) if r["metadata"]["name"] == "big"]
    assert listed["status"]["taskInstances"] == tis
    versions = {s["metadata"]["name"]: rv(s) for s in shards}
    # one instance changes: one shard is written, the others keep their resourceVersion
    changed = {**tis, "wide[3]": {"state": "success", "tryNumber": 1}}
    await kube.replace_custom_status(
        DAGRUNS, namespace, {**read, "status": {**read["status"], "taskInstances": changed}}
    )
    after = {s["metadata"]["name"]: rv(s) for s in await kube.list_custom(run_shards.PLURAL, namespace)}
    moved = sorted(name for name in after if after[name] != versions[name])
    assert moved == [run_shards.shard_name("big", 0)], moved
    again = await kube.get_custom(DAGRUNS, namespace, "big")
    assert again is not None and again["status"]["taskInstances"]["wide[3]"]["state"] == "success"
    # a write on the version read before (the first read) conflicts
    with pytest.raises(Conflict):
        await kube.replace_custom_status(
            DAGRUNS, namespace, {**read, "status": {**read["status"], "taskInstances": tis}}
        )
