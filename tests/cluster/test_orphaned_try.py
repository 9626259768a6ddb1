"""The controller killed right after it created a try's pod, before the status write that records the
try: the pod is orphaned (alive, no status entry naming it). `ZONDA_FAULT_EXIT_AT=try-launched` exits
there as a SIGKILL would, deterministically.

The restarted controller must not launch that try a second time: when its pass launches the same try
it adopts the pod (same deterministic name), and when it no longer launches it (here the DAG lost the
task meanwhile) it deletes the pod with an Event naming why. Pod creations are counted from etcd by a
watch of the test's own (`fault_audit.EtcdKeys`), started before the first controller; the
creation the killed controller made is the positive control that this watch sees the counted pods.

Real: the apiserver, etcd, kwok's nodes running the pods, the controller processes.
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

from controller.devtools.devcluster import Cluster
from tests.cluster.fault_audit import EtcdKeys as PodCreations
from tests.cluster.test_faults import pod_task
from tests.cluster.zonda_processes import apply, controller, get, trigger, wait_for, wait_run_finished
from zonda.resources.names import attempt_name

DAG = "orphaned"
FAULT = {"ZONDA_FAULT_EXIT_AT": "try-launched"}


def dag(tasks: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "zonda.dev/v1alpha1",
        "kind": "DAG",
        "metadata": {"name": DAG},
        "spec": {"schedule": None, "tasks": tasks},
    }


def events_of(cluster: Cluster, namespace: str, run: str, reason: str) -> list[dict[str, Any]]:
    items = get(cluster, namespace, "events")["items"]
    return [e for e in items if e["involvedObject"]["name"] == run and e["reason"] == reason]


def adoptions(cluster: Cluster, namespace: str, run: str) -> list[dict[str, Any]]:
    """The Events telling an adoption: `AttemptAdopted`, or a pass's aggregate that includes it (the
    adopted try had finished: `TaskSucceeded` then leads it, `zonda.passes.events`)."""
    items = get(cluster, namespace, "events")["items"]
    return [e for e in items if e["involvedObject"]["name"] == run and "adopted as this try" in e["message"]]


def pods_now(cluster: Cluster, namespace: str) -> list[str]:
    return sorted(pod["metadata"]["name"] for pod in get(cluster, namespace, "pods")["items"])


def crash_after_the_first_pod(cluster: Cluster, namespace: str, tmp_path: Path, pods: PodCreations) -> str:
    """Trigger a run under a controller that exits right after creating its first try's pod."""
    with controller(cluster, namespace, tmp_path, env=FAULT) as first:
        run = trigger(cluster, namespace, DAG)
        assert first.process is not None
        wait_for(lambda: first.process.poll() is not None, "the controller to exit after the launch")
        assert first.process.returncode == -signal.SIGKILL, "killed, not exited"
        assert "exiting at try-launched" in first.log()
    orphan = attempt_name(run, "a", 1)
    wait_for(lambda: pods.created.get(orphan) == 1, "the watch to count the pod the killed controller made")
    assert pods_now(cluster, namespace) == [orphan]
    status = get(cluster, namespace, "dagrun", run).get("status") or {}
    assert not status.get("taskInstances"), f"no status records the try: {status}"
    return run


def test_a_try_whose_pod_was_created_just_before_a_kill_is_adopted_and_launched_once(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    # `a` runs long enough to be alive when the next controller looks at it
    apply(cluster, namespace, dag([pod_task("a", [], 6000), pod_task("b", ["a"], 500)]))
    with PodCreations(cluster, namespace) as pods:
        run = crash_after_the_first_pod(cluster, namespace, tmp_path, pods)
        orphan = attempt_name(run, "a", 1)
        with controller(cluster, namespace, tmp_path):
            [adopted] = wait_for(lambda: adoptions(cluster, namespace, run), "the adoption's Event")
            assert orphan in adopted["message"]
            body = wait_run_finished(cluster, namespace, run, timeout=120)
        created = dict(pods.created)
    assert body["status"]["state"] == "success"
    tis = body["status"]["taskInstances"]
    assert {task: ti["tryNumber"] for task, ti in tis.items()} == {"a": 1, "b": 1}
    assert tis["a"]["podName"] == orphan
    assert created == {orphan: 1, attempt_name(run, "b", 1): 1}, "each try's pod created once"
    assert not events_of(cluster, namespace, run, "OrphanedAttemptStopped")


def test_an_orphaned_pod_the_restarted_pass_does_not_launch_is_deleted_with_an_event(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    held = pod_task("a", [], 500)  # runs until deleted: alive when the next controller looks
    held["podOverride"]["metadata"]["annotations"]["kwok.zonda.dev/hold"] = "true"
    apply(cluster, namespace, dag([held, pod_task("b", [], 500)]))
    with PodCreations(cluster, namespace) as pods:
        run = crash_after_the_first_pod(cluster, namespace, tmp_path, pods)
        orphan = attempt_name(run, "a", 1)
        # while no controller runs, the DAG loses `a`: the run, never started, snapshots that DAG
        apply(cluster, namespace, dag([pod_task("b", [], 500)]))
        with controller(cluster, namespace, tmp_path):
            stopped = wait_for(
                lambda: events_of(cluster, namespace, run, "OrphanedAttemptStopped"), "the stop's Event"
            )[0]
            body = wait_run_finished(cluster, namespace, run, timeout=120)
            wait_for(lambda: orphan not in pods_now(cluster, namespace), "the orphaned pod to be deleted")
            # a pass that still saw the pod alive (its deletion not yet watched) says it again
            print(
                f"OrphanedAttemptStopped Events: {len(events_of(cluster, namespace, run, stopped['reason']))}"
            )
        created = dict(pods.created)
    assert orphan in stopped["message"] and "no task instance a" in stopped["message"]
    assert stopped["type"] == "Warning"
    assert body["status"]["state"] == "success"
    assert set(body["status"]["taskInstances"]) == {"b"}
    assert created == {orphan: 1, attempt_name(run, "b", 1): 1}
