"""A mapped KubernetesPodOperator over a list in the Kubernetes XCom backend, on kwok: the controller
reads the XComChunks and gives each pod its own item; an instance whose items cannot be picked (a
`.map()` function, chunks that are gone) fails, saying why, and the run goes on by trigger rules.

Real: the apiserver, the controller process (Kubernetes executor), XComChunk objects, kwok's pods.
Simulated: the upstream task's try. kwok runs no code, so its result (a reference to the chunks)
comes from the pod's termination-message annotation, and the chunks are written here as the task
runner's Kubernetes XCom backend writes them (`zonda.resources.xcom_chunks`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from controller.devtools.devcluster import Cluster
from tests.cluster.zonda_processes import apply, controller, get, ti_states, trigger, wait_run_finished
from zonda.resources import xcom_chunks, xcom_refs
from zonda.resources.invocations import TaskOutcome, TaskResult
from zonda.specs import mapping
from zonda.tries import xcoms

ITEMS = [["echo", f"item-{index}-" + "x" * 300] for index in range(4)]  # > 1 KiB: in the backend


def write_chunks(cluster: Cluster, namespace: str, items: Any, name: str) -> tuple[str, int]:
    data = xcoms.serialize("return_value", items)
    base = xcom_chunks.base_name(name, "make", -1, 1, "return_value")
    specs = xcom_chunks.chunk_specs(
        data, run_name=name, task_id="make", map_index=-1, try_number=1, key="return_value"
    )
    for spec in specs:
        apply(cluster, namespace, xcom_chunks.manifest(namespace, base, spec, name, None))
    return xcom_chunks.reference_url(namespace, base, len(specs)), len(data)


def make_task(url: str, size: int, length: int) -> dict[str, Any]:
    """An upstream whose (simulated) try returned a reference to the chunks."""
    result = TaskResult(
        outcome=TaskOutcome.SUCCESS,
        xcom=xcoms.stored_reference(url, size),
        xcom_lengths={"return_value": length},
    )
    annotations = {
        "kwok.zonda.dev/exit-code": "0",
        "kwok.zonda.dev/duration-ms": "200",
        "kwok.zonda.dev/termination-message": result.encode().decode(),
    }
    return {"id": "make", "operator": "BashOperator", "args": {"bash_command": "true"},
            "podOverride": {"metadata": {"annotations": annotations}}}  # fmt: skip


def pods_dag(name: str, make: dict[str, Any], source: Any) -> dict[str, Any]:
    kwok = {"kwok.zonda.dev/exit-code": "0", "kwok.zonda.dev/duration-ms": "200"}
    pod = {
        "id": "greet",
        "operator": "KubernetesPodOperator",
        "args": {"image": "busybox", "cmds": ["sh", "-c"]},
        "dependsOn": ["make"],
        "podOverride": {"metadata": {"annotations": kwok}},
        "expand": {"kwargs": {"arguments": source}},
    }
    after = {"id": "after", "operator": "BashOperator", "args": {"bash_command": "true"},
             "dependsOn": ["greet"], "triggerRule": "all_done",
             "podOverride": {"metadata": {"annotations": kwok}}}  # fmt: skip
    return {"apiVersion": "zonda.dev/v1alpha1", "kind": "DAG", "metadata": {"name": name},
            "spec": {"schedule": None, "tasks": [make, pod, after]}}  # fmt: skip


def test_a_mapped_pod_operator_maps_over_xcomchunks_and_fails_clearly_when_it_cannot(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    url, size = write_chunks(cluster, namespace, ITEMS, "chunked")
    apply(
        cluster, namespace, pods_dag("chunked", make_task(url, size, len(ITEMS)), xcom_refs.reference("make"))
    )
    gone = xcom_chunks.reference_url(namespace, xcom_chunks.base_name("gone", "make", -1, 1, "x"), 2)
    apply(cluster, namespace, pods_dag("gone", make_task(gone, 3000, 2), xcom_refs.reference("make")))
    mapped = mapping.map_source(xcom_refs.reference("make"), "dags.words:shout")
    apply(cluster, namespace, pods_dag("mapfn", make_task(url, size, len(ITEMS)), mapped))
    with controller(cluster, namespace, tmp_path):
        runs = {dag: trigger(cluster, namespace, dag) for dag in ("chunked", "gone", "mapfn")}
        bodies = {dag: wait_run_finished(cluster, namespace, run, timeout=240) for dag, run in runs.items()}

    chunked = bodies["chunked"]
    assert ti_states(chunked) == {
        "make": "success", **{f"greet[{i}]": "success" for i in range(len(ITEMS))}, "after": "success"
    }  # fmt: skip
    pods = {p["metadata"]["name"]: p for p in get(cluster, namespace, "pods")["items"]}
    for index, item in enumerate(ITEMS):
        pod = pods[chunked["status"]["taskInstances"][f"greet[{index}]"]["podName"]]
        assert pod["spec"]["containers"][0]["args"] == item  # the instance's own item, from the chunks

    for dag, why in (("gone", "is gone"), ("mapfn", "cannot .map()")):
        body = bodies[dag]
        states = ti_states(body)
        assert states["make"] == "success" and states["after"] == "success", states  # all_done: goes on
        greets = {key: state for key, state in states.items() if key.startswith("greet")}
        assert greets and set(greets.values()) == {"failed"}, states
        reason = body["status"]["taskInstances"]["greet[0]"]["reason"]
        assert "Cannot pick this mapped KubernetesPodOperator instance's arguments" in reason, reason
        assert why in reason, reason
        assert body["status"]["state"] == "success"  # its leaf `after` succeeded
        assert not [c for c in body["status"].get("conditions") or [] if c["type"] == "Reconciled"], (
            json.dumps(body["status"].get("conditions"))
        )  # the reconcile never kept failing
    events = get(cluster, namespace, "events")["items"]
    assert any(e["reason"] == "TaskFailed" and "is gone" in e["message"] for e in events)
