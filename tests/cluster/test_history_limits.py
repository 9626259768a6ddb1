"""History limits on a real apiserver: old finished runs are deleted, and their pods with them (the
garbage collector of the real kube-controller-manager follows the runs' ownerReferences)."""

from __future__ import annotations

from pathlib import Path

from controller.devtools.devcluster import Cluster
from tests.cluster.zonda_processes import apply, controller, get, trigger, wait_for, wait_run_finished

DAG = {
    "apiVersion": "zonda.dev/v1alpha1",
    "kind": "DAG",
    "metadata": {"name": "kept"},
    "spec": {
        "schedule": None,
        "successfulRunsHistoryLimit": 2,
        "tasks": [{"id": "only", "container": {"image": "busybox", "command": ["true"]}}],
    },
}


def test_history_limits_delete_old_runs_and_their_pods(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    apply(cluster, namespace, DAG)
    with controller(cluster, namespace, tmp_path):
        runs = []
        for _ in range(4):
            runs.append(trigger(cluster, namespace, "kept"))
            wait_run_finished(cluster, namespace, runs[-1])

        def remaining() -> list[str]:
            return sorted(r["metadata"]["name"] for r in get(cluster, namespace, "dagruns")["items"])

        wait_for(lambda: remaining() == sorted(runs[2:]), "only the two newest runs", timeout=60)

        def pods_of_kept_runs_only() -> bool:
            pods = get(cluster, namespace, "pods")["items"]
            owners = {p["metadata"]["ownerReferences"][0]["name"] for p in pods}
            return owners == set(runs[2:])

        wait_for(pods_of_kept_runs_only, "the deleted runs' pods collected", timeout=60)
        # The Event follows the deletes; a stopped controller posts nothing, so wait while it runs.
        wait_for(
            lambda: any(
                e.get("reason") == "RunsDeleted" and runs[0] in e.get("message", "")
                for e in get(cluster, namespace, "events")["items"]
            ),
            f"a RunsDeleted Event naming {runs[0]}",
        )
