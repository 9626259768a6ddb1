"""Template files (Airflow's `template_ext`, `templates_exts`, `template_searchpath`): read when the DAG
is rendered, carried in the manifest, rendered by the try; a file not found fails the try, not the render.

Real: the render (`zonda.authoring`), `zonda dags test` in this process (the task runner's rendering and
operators); the expected behaviour is Airflow's `BaseOperator.render_template` and
`Templater.resolve_template_files` (2.10.5 and 3.3.2 alike; docs/authoring.md).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from controller.devtools import dag_runs
from zonda.authoring import rendering, template_files
from zonda.tries import templating

DAG_FILE = """
    import pendulum
    {imports}

    SEARCHPATH = {searchpath!r}

    with DAG("templated", start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), schedule=None,
             template_searchpath=SEARCHPATH, params={{"table": "events"}}):
        script = BashOperator(task_id="script", bash_command="{command}")

        @task(templates_exts=[".sql"])
        def query(sql, note):
            return {{"sql": sql, "note": note}}

        script >> query(sql="query.sql", note="{{{{ params.table }}}}")
"""


#: Each dialect's imports (`zonda.authoring.compat.file_dialect` reads the file as that Airflow).
IMPORTS = {
    "3": "from airflow.providers.standard.operators.bash import BashOperator; "
    "from airflow.sdk import DAG, task",
    "2": "from airflow import DAG; from airflow.decorators import task; from airflow.operators.bash import "
    "BashOperator",
}


def write_dag(folder: Path, searchpath: list[str], command: str = "check.sh", dialect: str = "3") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "templated.py"
    text = DAG_FILE.format(searchpath=searchpath, command=command, imports=IMPORTS[dialect])
    path.write_text(textwrap.dedent(text))
    return path


@pytest.fixture
def dags(tmp_path: Path) -> Path:
    """A DAGs folder with a script beside the DAG file, and a search-path folder outside it with a SQL
    file that includes another (and a `check.sh` that the DAG folder's shadows)."""
    (tmp_path / "dags").mkdir()
    (tmp_path / "dags" / "check.sh").write_text(
        'test "{{ params.table }}" = events && echo "from the dag folder"\n'
    )
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "check.sh").write_text("echo 'from the search path'; exit 7\n")
    (shared / "query.sql").write_text("select * from {{ params.table }}\n{% include 'where.sql' %}\n")
    (shared / "where.sql").write_text("where run_id = '{{ run_id }}'")
    write_dag(tmp_path / "dags", [str(shared)])
    return tmp_path / "dags"


def render_one(path: Path) -> rendering.RenderedDag:
    report = rendering.render_paths([path], airflow_compat=True)
    assert not report.file_errors, report.file_errors
    (dag,) = report.dags
    return dag


def test_files_are_read_from_the_dag_folder_then_the_searchpath_with_what_they_include(dags: Path) -> None:
    dag = render_one(dags / "templated.py")
    assert dag.errors == [] and dag.warnings == []
    assert dag.manifest is not None
    files = dag.manifest["spec"]["templateFiles"]
    assert sorted(files) == ["check.sh", "query.sql", "where.sql"]
    assert "from the dag folder" in files["check.sh"]  # the DAG file's folder first, as Airflow's loader
    # the field keeps the name: the try loads it through the carried files, as Airflow's get_template
    tasks = {t["id"]: t for t in dag.manifest["spec"]["tasks"]}
    assert tasks["script"]["args"]["bash_command"] == "check.sh"
    assert tasks["query"]["args"]["templates_exts"] == [".sql"]


@pytest.mark.parametrize("dialect", ["2", "3"])
def test_dags_test_renders_each_file_in_the_try(dags: Path, dialect: str) -> None:
    write_dag(dags, [str(dags.parent / "shared")], dialect=dialect)
    outcome = dag_runs.test_file(dags / "templated.py", airflow_compat=True)
    assert outcome.task_states == {"script": "success", "query": "success"}
    result = outcome.xcoms["query"]
    run_id = outcome.status.run_id  # Airflow's (manual__<date>), not the DagRun's name
    assert run_id is not None and run_id.startswith("manual__")
    assert result["sql"] == f"select * from events\nwhere run_id = '{run_id}'"
    assert result["note"] == "events"  # a string not ending in .sql is rendered as itself
    assert outcome.xcoms["script"] == "from the dag folder"


def test_a_trailing_space_runs_the_command_instead_of_reading_a_file(tmp_path: Path) -> None:
    """Airflow's documented trick: `"script.sh "` does not end with `.sh`, so it is a command."""
    folder = tmp_path / "dags"
    script = folder / "run_me.sh"
    write_dag(folder, [], command=f"bash {script} ")
    script.write_text("echo ran as a command: {{ not rendered }}\n")
    dag = render_one(folder / "templated.py")
    assert dag.manifest is not None and "templateFiles" not in dag.manifest["spec"]
    outcome = dag_runs.test_file(folder / "templated.py", airflow_compat=True)
    assert outcome.xcoms["script"] == "ran as a command: {{ not rendered }}"


def test_a_missing_file_warns_at_render_and_fails_the_try_as_airflow(tmp_path: Path) -> None:
    """Airflow's parse logs the file it cannot resolve and goes on; the task fails with TemplateNotFound."""
    folder = tmp_path / "dags"
    write_dag(folder, [str(tmp_path / "nowhere")])
    dag = render_one(folder / "templated.py")
    assert dag.errors == [] and dag.manifest is not None
    assert [w.split(" not found")[0] for w in dag.warnings] == [
        "template file 'check.sh' (named by task 'script' field 'bash_command')",
        "template file 'query.sql' (named by task 'query' field 'op_kwargs')",
    ]
    assert str(tmp_path / "nowhere") in dag.warnings[0]
    table = rendering.migration_table(rendering.RenderReport(dags=[dag]))
    assert "rendered, with warnings" in table and "TemplateNotFound" in table
    outcome = dag_runs.test_file(folder / "templated.py", airflow_compat=True)
    assert outcome.task_states == {"script": "failed", "query": "upstream_failed"}
    reason = outcome.status.task_instances["script"].message or ""  # type: ignore[union-attr]
    assert "TemplateNotFound: template file 'check.sh' was not found" in reason


def test_more_than_a_manifest_carries_fails_the_render_saying_what_to_do(dags: Path) -> None:
    big = dags.parent / "shared" / "query.sql"
    big.write_text("-- " + "x" * template_files.MAX_TEMPLATE_FILES_BYTES)
    dag = render_one(dags / "templated.py")
    assert dag.manifest is None
    assert len(dag.errors) == 1 and "'query.sql'" in dag.errors[0] and "trailing space" in dag.errors[0]


def test_render_template_and_include_use_the_carried_files() -> None:
    """Templating alone: a field ending with the operator's extension is the file; an inline template
    includes one; a name not carried is TemplateNotFound; without `template_ext` it is a string."""
    env = templating.create_environment(
        template_files={"a.sql": "select {{ x }}", "b.sql": "[{% include 'a.sql' %}]"}
    )
    render = templating.render
    assert render({"q": "b.sql"}, {"x": 1}, field="f", environment=env, template_ext=(".sql",)) == {
        "q": "[select 1]"
    }
    assert render("a.sql", {"x": 1}, environment=env) == "a.sql"
    assert render("{% include 'a.sql' %}!", {"x": 2}, environment=env) == "select 2!"
    with pytest.raises(
        templating.TemplateError, match=r"f\[0\].*TemplateNotFound.*'c.sql'.*carries 'a.sql', 'b.sql'"
    ):
        render(["c.sql"], {}, field="f", environment=env, template_ext=(".sql",))
    with pytest.raises(templating.TemplateError, match=r"TemplateNotFound.*'c.sh'.*carries none"):
        render("c.sh", {}, field="f", template_ext=(".sh",))  # the default environment: no files


def test_a_hand_written_manifest_is_held_to_the_same_bound() -> None:
    from zonda.specs.dags import DagInvalid, parse_dag_spec

    spec: dict[str, object] = {
        "tasks": [{"id": "t", "operator": "BashOperator", "args": {"bash_command": "a.sh"}}]
    }
    spec["templateFiles"] = {"a.sh": "x" * template_files.MAX_TEMPLATE_FILES_BYTES}
    assert parse_dag_spec(spec).template_files["a.sh"]
    spec["templateFiles"] = {"a.sh": "x" * (template_files.MAX_TEMPLATE_FILES_BYTES + 1)}
    with pytest.raises(DagInvalid, match=r"spec.templateFiles: .*more than 262144"):
        parse_dag_spec(spec)
