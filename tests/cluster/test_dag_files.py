"""Python DAG files, rendered by `zonda dags render`, applied by `zonda dags apply`, run by the controller.

What is real: the apiserver (which must accept every rendered manifest), the controller process with the
local executor (tasks run as real processes of the task runner, which re-imports the DAG file for nested
callables from `$ZONDA_DAGS_FOLDER`), the CLI as a subprocess. The DAGs folder is
`tests/cluster/dag_folder`: a nested `@task` in `@dag`, a lambda PythonOperator, a `@task_group`, XComArg
passing, a custom timetable, an `.airflowignore`d file, a broken file and an unchanged Airflow file.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from controller.devtools.devcluster import REPO_ROOT, Cluster
from tests.cluster.zonda_processes import (
    controller,
    get,
    ti_states,
    trigger,
    wait_run_finished,
    zonda,
)

DAG_FOLDER = Path(__file__).parent / "dag_folder"


def render(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    return zonda(cluster, "dags", "render", *args, check=False)


def test_render_reports_the_broken_file_and_renders_the_others(cluster: Cluster) -> None:
    result = render(cluster, str(DAG_FOLDER), "--airflow-compat", "--report")
    assert result.returncode == 1
    assert "broken.py:6: NameError: name 'undefined_name' is not defined" in result.stderr
    assert "scratch" not in result.stderr  # .airflowignore'd, never imported
    names = [doc["metadata"]["name"] for doc in yaml.safe_load_all(result.stdout)]
    assert names == ["unchanged-airflow", "authoring-pipeline"]
    again = render(cluster, str(DAG_FOLDER), "--airflow-compat")
    assert again.stdout == result.stdout  # deterministic, byte for byte


def test_rendered_dags_apply_and_run_on_the_local_executor(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    applied = zonda(
        cluster, "dags", "apply", str(DAG_FOLDER), "--airflow-compat", "-n", namespace, check=False
    )
    assert applied.returncode == 1, applied.stderr  # broken.py failed; the others were applied
    assert "dag.zonda.dev/authoring-pipeline applied" in applied.stdout
    dags = {d["metadata"]["name"]: d for d in get(cluster, namespace, "dags")["items"]}
    assert sorted(dags) == ["authoring-pipeline", "unchanged-airflow"]
    shown = cluster.kubectl(
        "get", "dag", "authoring-pipeline", "-n", namespace, "-o", "json", "--show-managed-fields"
    )
    managers = {entry["manager"] for entry in json.loads(shown.stdout)["metadata"]["managedFields"]}
    assert "zonda-dags" in managers
    with controller(
        cluster,
        namespace,
        tmp_path,
        executor="local",
        env={"ZONDA_DAGS_FOLDER": str(DAG_FOLDER)},
        log_tail=6000,
    ):
        pipeline_run = trigger(cluster, namespace, "authoring-pipeline")
        airflow_run = trigger(cluster, namespace, "unchanged-airflow")
        pipeline = wait_run_finished(cluster, namespace, pipeline_run, timeout=120)
        airflow = wait_run_finished(cluster, namespace, airflow_run, timeout=120)
    assert ti_states(pipeline) == {
        task_id: "success"
        for task_id in ("extract", "add", "checks.positive", "checks.describe", "constant", "echo")
    }
    xcoms = {task_id: ti.get("xcom") for task_id, ti in pipeline["status"]["taskInstances"].items()}
    assert xcoms == {
        "extract": {"a": 1, "b": 2},
        "add": 6,
        "checks.positive": True,
        "checks.describe": "6 is positive",
        "constant": 42,
        "echo": "6",
    }
    assert ti_states(airflow) == {"hello": "success", "shout": "success"}
    assert airflow["status"]["taskInstances"]["shout"]["xcom"] == "HELLO"


def test_prune_deletes_only_dags_it_applied_that_are_gone(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    folder = tmp_path / "dags"
    folder.mkdir()
    for dag_id in ("kept", "dropped"):
        (folder / f"{dag_id}.py").write_text(
            "from zonda import DAG\nfrom zonda.operators.empty import EmptyOperator\n"
            f"with DAG({dag_id!r}, schedule=None) as dag:\n    EmptyOperator(task_id='t')\n"
        )
    zonda(cluster, "dags", "apply", str(folder), "-n", namespace)
    cluster.kubectl(
        "apply", "-n", namespace, "-f", str(REPO_ROOT / "examples" / "dags" / "example_bash.yaml")
    )  # applied by hand: not ours to prune
    (folder / "dropped.py").unlink()
    pruned = zonda(cluster, "dags", "apply", str(folder), "--prune", "-n", namespace)
    assert "dag.zonda.dev/dropped pruned" in pruned.stdout
    names = sorted(d["metadata"]["name"] for d in get(cluster, namespace, "dags")["items"])
    assert names == ["example-bash", "kept"]


@pytest.mark.parametrize("example", sorted(p.name for p in (REPO_ROOT / "examples" / "dags").glob("*.py")))
def test_rendered_examples_pass_server_side_validation(
    cluster: Cluster, namespace: str, example: str
) -> None:
    rendered = render(cluster, str(REPO_ROOT / "examples" / "dags" / example))
    assert rendered.returncode == 0, rendered.stderr
    cluster.kubectl("apply", "--dry-run=server", "-n", namespace, "-f", "-", input=rendered.stdout)


def test_zonda_dags_test_needs_no_cluster() -> None:
    """`zonda dags test` runs with no kubeconfig at all."""
    result = subprocess.run(
        [sys.executable, "-m", "controller.cli", "dags", "test", str(DAG_FOLDER / "team" / "pipeline.py"),
         "--dags-folder", str(DAG_FOLDER)],
        capture_output=True, text=True, cwd=REPO_ROOT,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO_ROOT), "HOME": "/nonexistent"},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.rstrip().endswith("DAG run authoring_pipeline: success")
