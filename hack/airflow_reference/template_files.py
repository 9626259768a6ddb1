"""What Airflow itself does with template files (`template_ext`, `templates_exts`, `template_searchpath`).

Run with the Python of a venv holding Airflow (2.x, or 3.x with the standard provider), NOT Zonda's:

    ~/.cache/zonda/airflow-3.3.2/bin/python hack/airflow_reference/template_files.py
    ~/.cache/zonda/airflow-2.10.5/bin/python hack/airflow_reference/template_files.py

It lays out, in a temporary AIRFLOW_HOME, a DAG file whose BashOperators name a script in the DAG's
folder (shadowing one of the same name in `template_searchpath`), a script only in the search path, a
script that exists nowhere, and a command with a trailing space (`"bash raw.sh "`), and a `@task` with
`templates_exts=[".sql"]` whose SQL file includes another; it parses the folder with Airflow's DagBag
and prints the import errors (none: a missing file fails no parse) and each `bash_command` as parsed
(a found file's text, already read by `resolve_template_files`; the missing one's name), then runs
`dag.test()` and prints each task instance's state. Both 2.10.5 and 3.3.2 (2026-12-05) printed:

    IMPORT_ERRORS {}
    STATES {'dag_folder': 'success', 'missing': 'failed', 'query': 'success', 'searchpath': 'success',
            'trailing_space': 'success'}

with `missing` failing on `jinja2.exceptions.TemplateNotFound: 'missing.sh' not found in search paths`,
`query` printing `SQL='select * from events where run_id = ...'` and `trailing_space` printing
`raw {{ not rendered }}`. Zonda's counterpart: tests/unit/zonda/authoring/test_template_files.py.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

# beside this file: run it as a script, as af3_reference.py
from af3_reference import dialect_imports, prepare_home

DAG = """
import pendulum
{imports}

with DAG("tpl", start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), schedule=None,
         template_searchpath=[{shared!r}], params={{"table": "events"}}):
    BashOperator(task_id="dag_folder", bash_command="check.sh")
    BashOperator(task_id="searchpath", bash_command="only_shared.sh")
    BashOperator(task_id="missing", bash_command="missing.sh")
    BashOperator(task_id="trailing_space", bash_command="bash {shared}/raw.sh ")

    @task(templates_exts=[".sql"])
    def query(sql):
        print("SQL=" + repr(sql))
        assert sql.startswith("select * from events")

    query(sql="query.sql")
"""


def main() -> None:
    import importlib.metadata

    version = importlib.metadata.version("apache-airflow")  # Airflow itself is imported once env is set
    root = Path(tempfile.mkdtemp(prefix="airflow-template-files-"))
    dags, shared = root / "home" / "dags", root / "shared"
    dags.mkdir(parents=True)
    shared.mkdir()
    imports = dialect_imports(version)
    (dags / "tpl.py").write_text(DAG.format(imports=imports, shared=str(shared)))
    (dags / "check.sh").write_text('test "{{ params.table }}" = events && echo "from the dag folder"\n')
    (shared / "check.sh").write_text("echo 'shadowed'; exit 7\n")
    (shared / "only_shared.sh").write_text('echo "only shared {{ params.table }}"\n')
    (shared / "raw.sh").write_text('echo "raw {{ not rendered }}"\n')
    (shared / "query.sql").write_text("select * from {{ params.table }} {% include 'where.sql' %}")
    (shared / "where.sql").write_text("where run_id = '{{ run_id }}'")
    prepare_home(root / "home", dags)
    try:
        from airflow.dag_processing.dagbag import DagBag  # Airflow 3
    except ImportError:
        from airflow.models.dagbag import DagBag  # type: ignore[no-redef]  # Airflow 2

    bag = DagBag(str(dags))
    print("AIRFLOW", version)
    print("IMPORT_ERRORS", bag.import_errors)
    dag = bag.dags["tpl"]
    print("PARSED", {t.task_id: getattr(t, "bash_command", None) for t in dag.tasks})
    run = dag.test()
    print("STATES", {ti.task_id: ti.state for ti in run.get_task_instances()})


if __name__ == "__main__":
    main()
