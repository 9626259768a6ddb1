"""What run id a try sees in Airflow (`{{ run_id }}`, `context["run_id"]`, `dag_run.run_id`, `ti.run_id`).

Run with the Python of a venv holding Airflow (2.x, or 3.x with the standard provider), NOT Zonda's:

    ~/.cache/zonda/airflow-3.3.2/bin/python hack/airflow_reference/run_ids.py
    ~/.cache/zonda/airflow-2.10.5/bin/python hack/airflow_reference/run_ids.py

It runs `dag.test(logical_date=2024-01-01)` of a DAG whose task prints the four, and prints the run ids
Airflow's own generators give each run type (`DagRunType.generate_run_id`, the timetable's), for a
logical date of 2024-01-01 and a run_after of 2024-01-02. On 2026-12-05 2.10.5 printed
`CONTEXT=manual__2024-01-01T00:00:00+00:00` (three times, `TEMPLATED=` alike), `GENERATED scheduled
scheduled__2024-01-01T00:00:00+00:00`, `... dataset_triggered__2024-01-01T00:00:00+00:00`; 3.3.2 printed
`CONTEXT=manual__<the moment dag.test() ran>` (its run_after, not the logical date), `GENERATED scheduled
scheduled__2024-01-02T00:00:00+00:00 scheduled__2024-01-02T00:00:00+00:00_iYvkFZ3F` (without a logical
date, a random suffix), `asset_triggered__2024-01-02...`, `backfill__2024-01-02...`. Zonda's counterpart:
tests/unit/zonda/tries/test_run_ids.py.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

# beside this file: run it as a script, as af3_reference.py
from af3_reference import dialect_imports, prepare_home

DAG = """
import pendulum
{imports}

with DAG("ids", start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), schedule="@daily"):
    BashOperator(
        task_id="templated",
        bash_command="echo TEMPLATED={{{{ run_id }}}} {{{{ dag_run.run_id }}}} {{{{ ti.run_id }}}}",
    )

    @task
    def context_keys(**context):
        print("CONTEXT=" + context["run_id"], context["dag_run"].run_id, context["ti"].run_id)

    context_keys()
"""


def main() -> None:
    import importlib.metadata

    version = importlib.metadata.version("apache-airflow")
    root = Path(tempfile.mkdtemp(prefix="airflow-run-ids-"))
    dags = root / "home" / "dags"
    dags.mkdir(parents=True)
    (dags / "ids.py").write_text(DAG.format(imports=dialect_imports(version)))
    prepare_home(root / "home", dags)
    import pendulum

    try:
        from airflow.dag_processing.dagbag import DagBag  # Airflow 3
    except ImportError:
        from airflow.models.dagbag import DagBag  # type: ignore[no-redef]  # Airflow 2
    from airflow.models.dagrun import DagRun
    from airflow.utils.types import DagRunType

    print("AIRFLOW", version)
    logical, after = pendulum.datetime(2024, 1, 1, tz="UTC"), pendulum.datetime(2024, 1, 2, tz="UTC")
    bag = DagBag(str(dags))
    dag = bag.dags["ids"]
    for kind in DagRunType:
        if version.startswith("3"):
            with_date = DagRun.generate_run_id(run_type=kind, logical_date=logical, run_after=after)
            without = DagRun.generate_run_id(run_type=kind, logical_date=None, run_after=after)
            print("GENERATED", kind.value, with_date, without)
        else:
            print("GENERATED", kind.value, DagRun.generate_run_id(kind, logical))
    run = dag.test(logical_date=logical) if version.startswith("3") else dag.test(execution_date=logical)
    print("DAG_TEST_RUN_ID", run.run_id)
    print("STATES", {ti.task_id: ti.state for ti in run.get_task_instances()})


if __name__ == "__main__":
    main()
