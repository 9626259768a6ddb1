"""GitOps tools own a DAG's manifest, Zonda owns only status: after real runs, a sync sees no drift.

Argo CD and Flux re-apply manifests and diff the live object against them. Zonda keeps out of their
way: it writes only the `status` subresource of DAGs and DagRuns (so `metadata.generation` never
moves), adds no finalizers or annotations (kopf runs only `on.event` handlers), and never fights a
field manager for a field. Proven with real `kubectl apply` / `kubectl diff`, both server-side (the
field manager `argocd`, as Argo CD's ServerSideApply sync option) and client-side (Argo CD's default),
against the apiserver's own bookkeeping: `managedFields` and `resourceVersion`.

What is real: the apiserver, kubectl, the controller process (local executor, real task code).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from controller.devtools.devcluster import Cluster
from tests.cluster.zonda_processes import EXAMPLES, controller, get, trigger, wait_for, wait_run_finished

MANIFEST = EXAMPLES / "example_bash.yaml"
DAG = "example-bash"
#: The one annotation client-side apply keeps on the objects it applies (its record of them).
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def get_whole(cluster: Cluster, namespace: str, resource: str, name: str) -> dict[str, Any]:
    """The object with its managedFields (which `kubectl get` leaves out unless asked)."""
    shown = cluster.kubectl("get", resource, name, "-n", namespace, "-o", "json", "--show-managed-fields")
    body: dict[str, Any] = json.loads(shown.stdout)
    return body


def managed_fields(body: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The object's managedFields entries: those of the main resource, and those of `status`."""
    entries: list[dict[str, Any]] = body["metadata"].get("managedFields") or []
    status = [entry for entry in entries if entry.get("subresource") == "status"]
    return [entry for entry in entries if entry not in status], status


def top_level_fields(entry: dict[str, Any]) -> set[str]:
    return set(entry.get("fieldsV1") or {})


def assert_status_written_alone(body: dict[str, Any]) -> None:
    """The controller wrote status (else nothing was proven), through the subresource, nothing else."""
    _, status = managed_fields(body)
    assert status, "no status write was recorded: nothing was proven"
    assert all(top_level_fields(entry) == {"f:status"} for entry in status), status


@pytest.mark.parametrize(
    ("apply_flags", "manager", "reapply_says"),
    [
        # Server-side apply always says "serverside-applied": the unchanged resourceVersion tells.
        pytest.param(
            ["--server-side", "--field-manager=argocd"],
            "argocd",
            "serverside-applied",
            id="server-side apply as argocd sees no drift after a run",
        ),
        pytest.param(
            [], "kubectl-client-side-apply", "unchanged", id="client-side apply sees no drift after a run"
        ),
    ],
)
def test_a_sync_after_a_run_changes_nothing_and_finds_no_drift(
    cluster: Cluster, namespace: str, tmp_path: Path, apply_flags: list[str], manager: str, reapply_says: str
) -> None:
    def kubectl_apply() -> str:
        applied = cluster.kubectl("apply", *apply_flags, "-n", namespace, "-f", str(MANIFEST))
        return applied.stdout.strip()

    kubectl_apply()
    with controller(cluster, namespace, tmp_path, executor="local"):
        run = trigger(cluster, namespace, DAG)
        run_body = wait_run_finished(cluster, namespace, run)

        # The DAG's status learns of the run in a later pass of its own: wait for it before stopping.
        def dag_saw_the_run() -> bool:
            return (get(cluster, namespace, "dag", DAG).get("status") or {}).get("lastRunState") == "success"

        wait_for(dag_saw_the_run, "the DAG's status to record the run")
    assert run_body["status"]["state"] == "success", run_body["status"]
    before = get(cluster, namespace, "dag", DAG)

    reapplied = kubectl_apply()
    diff = cluster.kubectl("diff", *apply_flags, "-n", namespace, "-f", str(MANIFEST), check=False)
    after = get_whole(cluster, namespace, "dag", DAG)

    assert reapplied == f"dag.zonda.dev/{DAG} {reapply_says}"
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"], (
        f"re-applying the unchanged manifest wrote the DAG ({reapplied})"
    )
    assert diff.returncode == 0, f"kubectl diff found drift:\n{diff.stdout}{diff.stderr}"
    assert after["metadata"]["generation"] == 1, "only status was ever written"
    assert after["status"]["lastRunState"] == "success", "the sync left Zonda's status alone"

    assert "finalizers" not in after["metadata"]
    assert set(after["metadata"].get("annotations") or {}) <= {LAST_APPLIED}
    main, _ = managed_fields(after)
    assert {entry["manager"] for entry in main} == {manager}, "the manifest's writer alone owns the DAG"
    assert all("f:status" not in top_level_fields(entry) for entry in main), main
    assert_status_written_alone(after)

    run_body = get_whole(cluster, namespace, "dagrun", run)
    assert run_body["metadata"]["generation"] == 1
    assert "finalizers" not in run_body["metadata"]
    assert not run_body["metadata"].get("annotations")
    main, _ = managed_fields(run_body)
    # What `zonda trigger` created it with: its spec, and the labels include_prior_dates finds runs by.
    assert [top_level_fields(entry) for entry in main] == [{"f:metadata", "f:spec"}], main
    assert set(main[0]["fieldsV1"]["f:metadata"]) == {"f:labels"}, main
    assert_status_written_alone(run_body)


def test_a_pruned_dag_is_deleted_at_once_while_the_controller_is_down(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    """GitOps prunes by deleting: with no finalizer, deletion never waits for Zonda."""
    cluster.kubectl("apply", "--server-side", "--field-manager=argocd", "-n", namespace, "-f", str(MANIFEST))
    with controller(cluster, namespace, tmp_path, executor="local"):
        run = trigger(cluster, namespace, DAG)
        assert wait_run_finished(cluster, namespace, run)["status"]["state"] == "success"
    deleted = cluster.kubectl("delete", "dag", DAG, "-n", namespace, "--timeout=10s", check=False)
    assert deleted.returncode == 0, deleted.stderr
    gone = cluster.kubectl("get", "dag", DAG, "-n", namespace, check=False)
    assert gone.returncode != 0 and "NotFound" in gone.stderr
