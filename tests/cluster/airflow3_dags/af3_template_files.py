"""An Airflow 3 DAG file, unchanged, with template files: a BashOperator's script (`.sh`) and a Python
task's SQL (`templates_exts`) that includes another, all in a `template_searchpath` folder outside the
DAGs folder. The test removes that folder once the DAG is applied: each try renders the text its
manifest carries (`spec.templateFiles`)."""

import os

import pendulum

from airflow.providers.standard.operators.bash import BashOperator
from airflow.sdk import DAG, task

#: Beside the DAGs folder, as the test lays them out.
TEMPLATES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "templates")

with DAG(
    "af3_template_files",
    start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
    schedule=None,
    template_searchpath=[TEMPLATES],
    params={"table": "events"},
):
    check = BashOperator(task_id="check", bash_command="check_table.sh")

    @task(templates_exts=[".sql"])
    def query(sql: str) -> str:
        if not sql.startswith("select * from events where run_id = "):
            raise ValueError(f"not the rendered template file: {sql!r}")
        return sql

    check >> query(sql="query.sql")
