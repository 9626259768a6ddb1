"""Pod garbage collection after a run (`deleteWorkerPods`), on a real apiserver with kwok pods: the
finished run's succeeded pods are deleted, the failed one is kept for debugging, and `zonda logs`
says why a deleted try has no log."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from controller.devtools.devcluster import Cluster
from tests.cluster.zonda_processes import apply, controller, get, trigger, wait_for, wait_run_finished, zonda


def kwok_task(task_id: str, exit_code: int, **extra: Any) -> dict[str, Any]:
    annotations = {"kwok.zonda.dev/exit-code": str(exit_code), "kwok.zonda.dev/duration-ms": "200"}
    return {
        "id": task_id,
        "container": {"image": "busybox", "command": ["true"]},
        "podOverride": {"metadata": {"annotations": annotations}},
        **extra,
    }


DAG = {
    "apiVersion": "zonda.dev/v1alpha1",
    "kind": "DAG",
    "metadata": {"name": "tidy"},
    "spec": {
        "schedule": None,
        "deleteWorkerPods": True,
        "tasks": [kwok_task("ok", 0), kwok_task("boom", 1, dependsOn=["ok"])],
    },
}


def test_a_finished_run_deletes_its_succeeded_pods_and_keeps_the_failed_one(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    apply(cluster, namespace, DAG)
    with controller(cluster, namespace, tmp_path):
        run = trigger(cluster, namespace, "tidy")
        finished = wait_run_finished(cluster, namespace, run)
        assert finished["status"]["state"] == "failed"

        def pods_left() -> list[str]:
            return sorted(p["metadata"]["name"] for p in get(cluster, namespace, "pods")["items"])

        boom_pod = finished["status"]["taskInstances"]["boom"]["podName"]
        ok_pod = finished["status"]["taskInstances"]["ok"]["podName"]
        wait_for(lambda: pods_left() == [boom_pod], "only the failed task's pod left", timeout=60)

        def deletions() -> list[str]:
            events = get(cluster, namespace, "events")["items"]
            return [e["message"] for e in events if e.get("reason") == "WorkerPodsDeleted"]

        # The Event follows the deletes: a pod can be gone from the list before it is posted.
        assert wait_for(deletions, "the WorkerPodsDeleted Event") == [
            f"deleted 1 finished pod(s) and their logs (deleteWorkerPods): {ok_pod}"
        ]
        gone = zonda(cluster, "logs", run, "ok", "-n", namespace, check=False)
        assert gone.returncode != 0
        assert "its DAG deletes its succeeded pods (failed ones are kept)" in gone.stderr, gone.stderr
        kept = zonda(cluster, "logs", run, "boom", "-n", namespace, check=False)
        assert f"pod/{boom_pod}" in kept.stderr, kept.stderr
