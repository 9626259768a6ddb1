"""`zonda dags test` and the controller agree: the seed pages' DAGs end in the same states either way.

For each DAG, the final task-instance states of one manual run under the controller (real apiserver,
local executor, the task runner re-importing the unchanged Airflow file with `--airflow-compat`) equal
those of `zonda dags test`'s in-process run. DAGs are applied paused, so only the triggered run exists.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from controller.devtools import dag_runs
from controller.devtools.devcluster import Cluster
from tests.cluster.zonda_processes import apply, controller, ti_states, trigger, wait_run_finished, zonda

SEED_DAGS = Path(__file__).parent / "seed_dags"

#: (file, dag id): the seed DAGs that run without the network or long waits.
RUNNABLE = [
    ("branch_without_trigger.py", "branch_without_trigger"),
    ("dags_branching.py", "branch_with_xcom"),
    ("dags_branching.py", "my_branch_operator"),
    ("dags_task_groups.py", "task_group_dependencies"),
    ("dags_task_groups.py", "dag1"),
    ("example_branch_labels.py", "example_branch_labels"),
    ("example_latest_only_with_trigger.py", "latest_only_with_trigger"),
    ("dags_dependencies.py", "chain_pairwise"),
    ("dags_documentation.py", "my_documented_dag"),
]


def test_the_controller_and_dags_test_end_in_the_same_states(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    rendered = zonda(cluster, "dags", "render", str(SEED_DAGS), "--airflow-compat", check=False).stdout
    by_id = {doc["metadata"]["annotations"]["zonda.dev/dag-id"]: doc for doc in yaml.safe_load_all(rendered)}
    for _, dag_id in RUNNABLE:
        manifest = by_id[dag_id]
        manifest["spec"]["paused"] = True  # no scheduled runs: only the manual one below
        apply(cluster, namespace, manifest)
    with controller(
        cluster,
        namespace,
        tmp_path,
        executor="local",
        env={"ZONDA_DAGS_FOLDER": str(SEED_DAGS)},
        log_tail=4000,
    ):
        runs = {
            dag_id: trigger(cluster, namespace, by_id[dag_id]["metadata"]["name"]) for _, dag_id in RUNNABLE
        }
        controller_states = {
            dag_id: ti_states(wait_run_finished(cluster, namespace, run, timeout=180))
            for dag_id, run in runs.items()
        }
    for file, dag_id in RUNNABLE:
        outcome = dag_runs.test_file(SEED_DAGS / file, dag_id=dag_id, airflow_compat=True)
        assert outcome.task_states == controller_states[dag_id], dag_id
    assert controller_states["branch_with_xcom"]["stop_task"] == "skipped"
    assert controller_states["branch_without_trigger"]["join"] == "skipped"


@pytest.mark.parametrize("dag_id", ["branch_with_xcom"])
def test_dags_test_reads_xcoms_like_the_controller(dag_id: str) -> None:
    outcome = dag_runs.test_file(SEED_DAGS / "dags_branching.py", dag_id=dag_id, airflow_compat=True)
    assert outcome.xcoms["start_task"] == "5" and outcome.xcoms["branch_task"] == "continue_task"
