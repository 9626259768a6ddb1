"""Every Python example of the seed pages renders into manifests the real apiserver accepts.

The examples are files in `tests/cluster/seed_dags/` (see its README), most with their `airflow` imports
unchanged, rendered with `zonda dags render --airflow-compat` exactly as a user would. What is real: the
CLI, the apiserver's schema validation (`kubectl apply --dry-run=server`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.devtools.devcluster import Cluster
from tests.cluster.zonda_processes import zonda

SEED_DAGS = Path(__file__).parent / "seed_dags"


@pytest.fixture(scope="module")
def rendered(cluster: Cluster) -> tuple[dict[str, dict[str, Any]], str, str]:
    result = zonda(cluster, "dags", "render", str(SEED_DAGS), "--airflow-compat", "--report", check=False)
    manifests = {
        doc["metadata"]["annotations"]["zonda.dev/dag-id"]: doc for doc in yaml.safe_load_all(result.stdout)
    }
    return manifests, result.stdout, result.stderr


def tasks(manifest: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {task["id"]: task for task in manifest["spec"]["tasks"]}


def test_the_apiserver_accepts_every_rendered_seed_dag(
    cluster: Cluster, namespace: str, rendered: tuple[dict[str, dict[str, Any]], str, str]
) -> None:
    manifests, text, _ = rendered
    assert len(manifests) == 29
    applied = cluster.kubectl("apply", "--dry-run=server", "-n", namespace, "-f", "-", input=text)
    assert applied.stdout.count("created (server dry run)") == 29


def test_only_the_subdag_example_fails_and_says_to_use_a_task_group(
    rendered: tuple[dict[str, dict[str, Any]], str, str],
) -> None:
    _, _, errors = rendered
    failed = [line for line in errors.splitlines() if line.startswith("error:")]
    assert failed == ["error: subdag_refused.py: import failed"]
    assert "airflow.operators.subdag is not supported by Zonda: SubDagOperator" in errors
    assert "use a TaskGroup" in errors


def test_the_pages_structures_survive_rendering(rendered: tuple[dict[str, dict[str, Any]], str, str]) -> None:
    manifests, _, _ = rendered
    assert "but_this_dag_will_not" not in manifests  # only top-level DAGs load
    pairwise = tasks(manifests["chain_pairwise"])
    assert [pairwise[f"op{i}"].get("dependsOn") for i in range(2, 7)] == [
        ["op1"], ["op1"], ["op2"], ["op3"], ["op4", "op5"],
    ]  # fmt: skip
    assert tasks(manifests["task_dependencies_explicit"])["third_task"]["dependsOn"] == [
        "first_task",
        "fourth_task",
    ]
    latest = tasks(manifests["latest_only_with_trigger"])
    assert latest["task4"]["triggerRule"] == "all_done" and latest["task3"]["dependsOn"] == ["task1", "task2"]
    assert manifests["latest_only_with_trigger"]["spec"]["schedule"] == "4h"
    labels = tasks(manifests["example_branch_labels"])
    assert labels["save"]["edgeLabels"] == {"check_integrity": "No errors"}
    groups = manifests["dag1"]["spec"]
    assert groups["defaultArgs"] == {"retries": 1}
    assert groups["taskGroups"] == [{"id": "group1", "defaultArgs": {"retries": 3}}]
    assert tasks(manifests["task_group_dependencies"])["task3"]["dependsOn"] == ["group1"]
    branch = tasks(manifests["branch_without_trigger"])["branching"]
    assert branch["args"]["python_callable"].startswith("dagfile:branch_without_trigger.py?")
    decorator = manifests["example_dag_decorator"]["spec"]
    assert decorator["params"] == {"email": "example@example.com"}
    assert tasks(manifests["example_dag_decorator"])["prepare_email"]["dependsOn"] == ["get_ip"]
    assert manifests["example_workday_timetable"]["spec"]["timetable"] == {
        "class": "examples.timetables.workday.AfterWorkdayTimetable"
    }
    assert manifests["my_documented_dag"]["spec"]["docMd"].strip() == "### My great DAG"
    assert tasks(manifests["executor_config_example"])["custom_image"]["container"] == {
        "image": "myCustomDockerImage"
    }
