"""The CLI's long commands show progress (a bar on stderr, the result on stdout), against a real
apiserver with the controller running kwok pods: `zonda trigger --wait`, `zonda dags apply` of a
folder, `zonda dags delete` of a DAG with runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from controller.devtools.devcluster import Cluster
from tests.cluster.zonda_processes import apply, controller, get, zonda


def kwok_task(task_id: str, exit_code: int = 0, **extra: Any) -> dict[str, Any]:
    annotations = {"kwok.zonda.dev/exit-code": str(exit_code), "kwok.zonda.dev/duration-ms": "300"}
    return {
        "id": task_id,
        "container": {"image": "busybox", "command": ["true"]},
        "podOverride": {"metadata": {"annotations": annotations}},
        **extra,
    }


def dag(name: str, *tasks: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "zonda.dev/v1alpha1",
        "kind": "DAG",
        "metadata": {"name": name},
        "spec": {"schedule": None, "tasks": list(tasks)},
    }


DAG_FILE = """
from zonda import DAG
from zonda.operators.empty import EmptyOperator

with DAG("{name}", schedule=None):
    EmptyOperator(task_id="only")
"""


def test_trigger_wait_follows_the_run_to_its_end(cluster: Cluster, namespace: str, tmp_path: Path) -> None:
    apply(cluster, namespace, dag("fine", kwok_task("a"), kwok_task("b", dependsOn=["a"])))
    apply(cluster, namespace, dag("broken", kwok_task("a", exit_code=1)))
    ns = ["-n", namespace]
    with controller(cluster, namespace, tmp_path):
        fine = zonda(cluster, "trigger", "fine", "--wait", *ns, check=False)
        assert fine.returncode == 0, fine.stderr
        created, result = fine.stdout.splitlines()
        assert created.endswith(" created") and " success: " in result
        assert ": success, 0 running" in fine.stderr and "2/2" in fine.stderr
        broken = zonda(cluster, "trigger", "broken", "--wait", *ns, check=False)
        assert broken.returncode == 1 and " failed: " in broken.stdout, broken.stdout + broken.stderr
        assert "1/1" in broken.stderr


def test_dags_apply_and_delete_show_their_progress(cluster: Cluster, namespace: str, tmp_path: Path) -> None:
    folder = tmp_path / "dags"
    folder.mkdir()
    for name in ("first", "second", "third"):
        (folder / f"{name}.py").write_text(DAG_FILE.format(name=name))
    applied = zonda(cluster, "dags", "apply", str(folder), "-n", namespace)
    assert applied.stdout.count(" applied") == 3
    assert "applied DAGs" in applied.stderr and "3/3" in applied.stderr
    assert sorted(d["metadata"]["name"] for d in get(cluster, namespace, "dags")["items"]) == [
        "first", "second", "third",
    ]  # fmt: skip
    with controller(cluster, namespace, tmp_path):
        for _ in range(2):
            zonda(cluster, "trigger", "first", "--wait", "-n", namespace)
    deleted = zonda(cluster, "dags", "delete", "first", "--yes", "-n", namespace)
    assert "deleted with 2 run(s)" in deleted.stdout and "deleting the runs of first" in deleted.stderr
    assert "2/2" in deleted.stderr
