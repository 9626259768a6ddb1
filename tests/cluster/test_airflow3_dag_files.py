"""A folder of unchanged Airflow 3 DAG files (`airflow.sdk`, the standard provider), applied with
`zonda dags apply --airflow-compat` and run by the controller: each run ends as under `zonda dags test`.

Real: the apiserver, the controller process with the local executor (tasks are task-runner processes
re-importing the files from `$ZONDA_DAGS_FOLDER`), the CLI as a subprocess.
"""

from __future__ import annotations

from pathlib import Path

from controller.devtools import dag_runs
from controller.devtools.devcluster import Cluster
from tests.cluster.zonda_processes import controller, get, ti_states, trigger, wait_run_finished, zonda

FOLDER = Path(__file__).parent / "airflow3_dags"
DAGS = {"af3-example": "af3_taskflow.py", "af3-branching": "af3_branching.py"}


def test_unchanged_airflow3_files_run_under_the_controller_as_under_dags_test(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    expected = {
        name: dag_runs.test_file(FOLDER / file, airflow_compat=True).task_states
        for name, file in DAGS.items()
    }
    assert expected["af3-branching"]["group.right"] == "skipped"  # the branch ran, as in Airflow
    zonda(cluster, "dags", "apply", str(FOLDER), "--airflow-compat", "-n", namespace)
    dags = {d["metadata"]["name"]: d for d in get(cluster, namespace, "dags")["items"]}
    assert sorted(dags) == sorted(DAGS)
    assert {name: d["spec"]["airflowVersion"] for name, d in dags.items()} == dict.fromkeys(DAGS, "3")
    assert dags["af3-branching"]["spec"]["timetable"]["class"].endswith("CronTriggerTimetable")
    with controller(
        cluster, namespace, tmp_path, executor="local", env={"ZONDA_DAGS_FOLDER": str(FOLDER)}, log_tail=6000
    ):
        runs = {name: trigger(cluster, namespace, name) for name in DAGS}
        finished = {
            name: wait_run_finished(cluster, namespace, run, timeout=120) for name, run in runs.items()
        }
    assert {name: ti_states(run) for name, run in finished.items()} == expected
