"""A folder of unchanged Airflow 3 DAG files (`airflow.sdk`, the standard provider), applied with
`zonda dags apply --airflow-compat` and run by the controller: each run ends as under `zonda dags test`,
and Airflow's own example files as under Airflow 3.3.2's `dag.test()` (its committed reference).

Real: the apiserver, the controller process with the local executor (tasks are task-runner processes
re-importing the files from `$ZONDA_DAGS_FOLDER`), the CLI as a subprocess. The folder holds three
files written for this test (one with template files read when it is rendered, which the runs find in
their manifest: the folder they came from is gone by then) and five of Airflow 3.3.2's example files
copied unchanged: skips, a failing task, short-circuits, setup/teardown in task groups, XComArgs. The
outcomes are not all successes (a run fails, tasks are skipped), so equal states say which way each
task went.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from controller.devtools import dag_runs
from controller.devtools.devcluster import Cluster
from tests.airflow_examples import compare
from tests.cluster.zonda_processes import controller, get, ti_states, trigger, wait_run_finished, zonda

FOLDER = Path(__file__).parent / "airflow3_dags"
#: Written for this test: resource name -> file.
OWN = {
    "af3-example": "af3_taskflow.py",
    "af3-branching": "af3_branching.py",
    "af3-template-files": "af3_template_files.py",
}
#: af3_template_files.py's template_searchpath: copied beside the DAGs folder, removed once applied.
TEMPLATES = Path(__file__).parent / "airflow3_templates"
#: Airflow 3.3.2's own example files (tests/airflow_examples/af3/dags), unchanged: file -> DAG ids.
AIRFLOW_EXAMPLES = {
    "core/example_skip_dag.py": ["example_skip_dag"],
    "core/example_failed_dag.py": ["example_failed_dag"],
    "core/example_setup_teardown_taskflow.py": ["example_setup_teardown_taskflow"],
    "core/example_xcomargs.py": ["example_xcom_args", "example_xcom_args_with_operators"],
    "standard/example_short_circuit_decorator.py": ["example_short_circuit_decorator"],
}


def _resource(dag_id: str) -> str:
    return dag_id.replace("_", "-")


def test_unchanged_airflow3_files_run_under_the_controller_as_under_dags_test(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    folder = tmp_path / "dags"
    folder.mkdir()
    for file in OWN.values():
        shutil.copy(FOLDER / file, folder / file)
    shutil.copytree(TEMPLATES, tmp_path / "templates")
    for file in AIRFLOW_EXAMPLES:
        shutil.copy(compare.AF3 / "dags" / file, folder / Path(file).name)
    files = {name: folder / file for name, file in OWN.items()} | {
        _resource(dag_id): folder / Path(file).name
        for file, dag_ids in AIRFLOW_EXAMPLES.items()
        for dag_id in dag_ids
    }
    dag_ids = {_resource(d): d for ids in AIRFLOW_EXAMPLES.values() for d in ids}
    expected = {
        name: dag_runs.test_file(file, dag_id=dag_ids.get(name), airflow_compat=True).task_states
        for name, file in files.items()
    }
    reference = compare.reference(compare.AF3)["dags"]
    airflows = {_resource(d): reference[d]["outcome"]["tasks"] for d in dag_ids.values()}
    # `zonda dags test` is Airflow's `dag.test()` for these, and they do not all succeed
    assert {name: expected[name] for name in airflows} == airflows
    assert expected["af3-branching"]["group.right"] == "skipped"  # the branch ran, as in Airflow
    assert expected["example-failed-dag"] == {"fail_task": "failed"}
    assert "skipped" in expected["example-skip-dag"].values()
    assert expected["af3-template-files"] == {"check": "success", "query": "success"}

    zonda(cluster, "dags", "apply", str(folder), "--airflow-compat", "-n", namespace)
    dags = {d["metadata"]["name"]: d for d in get(cluster, namespace, "dags")["items"]}
    assert sorted(dags) == sorted(files)
    # The template files are in the manifest: the folder they were read from goes before any try runs.
    assert sorted(dags["af3-template-files"]["spec"]["templateFiles"]) == sorted(
        p.name for p in TEMPLATES.iterdir()
    )
    shutil.rmtree(tmp_path / "templates")
    assert {name: d["spec"]["airflowVersion"] for name, d in dags.items()} == dict.fromkeys(files, "3")
    assert dags["af3-branching"]["spec"]["timetable"]["class"].endswith("CronTriggerTimetable")
    with controller(
        cluster, namespace, tmp_path, executor="local", env={"ZONDA_DAGS_FOLDER": str(folder)}, log_tail=6000
    ):
        runs = {name: trigger(cluster, namespace, name) for name in files}
        finished = {
            name: wait_run_finished(cluster, namespace, run, timeout=240) for name, run in runs.items()
        }
    assert {name: ti_states(run) for name, run in finished.items()} == expected
    assert finished["example-failed-dag"]["status"]["state"] == "failed"
    templated = finished["af3-template-files"]["status"]["taskInstances"]
    sql = templated["query"]["xcom"]  # query.sql with where.sql included, both rendered
    run_id = sql.removeprefix("select * from events where run_id = '").removesuffix("'")
    assert run_id and "{" not in sql and "'" not in run_id, sql
    assert templated["check"]["xcom"] == f"table events in {run_id}"  # check_table.sh, rendered and run
