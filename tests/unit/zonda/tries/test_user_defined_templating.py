"""A DAG's `user_defined_macros`, `user_defined_filters` and `render_template_as_native_obj`.

Compiled to import paths and a flag in the DAG spec, carried by the task invocation, and applied by the
task runner's Jinja environment, as Airflow's `DAG.get_template_env` does. Real: the compiler, the
templating module, and one run through `dag.test()` (the controller's decisions and task runner).
"""

from __future__ import annotations

import math
import os.path
import textwrap
from datetime import datetime
from pathlib import Path
from typing import Any

import pendulum
import pytest

from controller.devtools import dag_runs
from zonda import DAG
from zonda.authoring import manifests, rendering
from zonda.operators.bash import BashOperator
from zonda.operators.python import PythonOperator
from zonda.resources.invocations import TaskInvocation
from zonda.resources.run_types import RunType
from zonda.tries.task_context import build_context
from zonda.tries.templating import TemplateError, invocation_environment, render

START = pendulum.datetime(2021, 1, 1, tz="UTC")


def invocation(**overrides: Any) -> TaskInvocation:
    fields: dict[str, Any] = {
        "dag_name": "etl",
        "run_name": "etl-manual",
        "run_type": RunType.MANUAL,
        "task_id": "load",
        "try_number": 1,
        "logical_date": datetime.fromisoformat("2024-03-05T00:00:00+00:00"),
        "data_interval_start": datetime.fromisoformat("2024-03-04T00:00:00+00:00"),
        "data_interval_end": datetime.fromisoformat("2024-03-05T00:00:00+00:00"),
        "params": {"limit": 5},
    }
    fields.update(overrides)
    return TaskInvocation(**fields)


def rendered(value: Any, **overrides: Any) -> Any:
    call = invocation(**overrides)
    return render(value, build_context(call), field="f", environment=invocation_environment(call))


def test_macros_are_globals_and_filters_are_filters() -> None:
    macros = {"hypot": "math:hypot"}
    filters = {"basename": "os.path:basename"}
    template = "{{ hypot(3, 4) }} {{ '/data/x.csv' | basename }} {{ ds | basename }}"
    assert (
        rendered(template, user_defined_macros=macros, user_defined_filters=filters) == "5.0 x.csv 2024-03-05"
    )


def test_without_settings_the_default_environment_is_used() -> None:
    assert invocation_environment(invocation()) is None
    with pytest.raises(TemplateError, match="'hypot' is undefined"):
        rendered("{{ hypot(3, 4) }}")


def test_a_macro_that_cannot_be_imported_is_an_error_naming_it() -> None:
    with pytest.raises(TemplateError, match=r"user_defined_macros\.helper.*'nowhere\.at_all:helper'"):
        invocation_environment(invocation(user_defined_macros={"helper": "nowhere.at_all:helper"}))


@pytest.mark.parametrize(
    ("template", "native", "text"),
    [
        pytest.param("{{ [1, 2] }}", [1, 2], "[1, 2]", id="a list"),
        pytest.param("{{ params.limit }}", 5, "5", id="a number stays a number"),
        pytest.param("{{ {'a': params.limit} }}", {"a": 5}, "{'a': 5}", id="a dict"),
        pytest.param("rows: {{ params.limit }}", "rows: 5", "rows: 5", id="text stays text"),
        pytest.param(["{{ params.limit }}", "x"], [5, "x"], ["5", "x"], id="inside a container"),
    ],
)
def test_native_rendering_gives_python_objects(template: Any, native: Any, text: Any) -> None:
    assert rendered(template, render_template_as_native_obj=True) == native
    assert rendered(template) == text


def test_native_rendering_is_still_sandboxed() -> None:
    with pytest.raises(TemplateError, match="unsafe"):
        rendered("{{ ''.__class__.__mro__ }}", render_template_as_native_obj=True)


def test_the_compiler_writes_import_paths_and_the_native_flag() -> None:
    built = DAG(
        "m",
        schedule=None,
        start_date=START,
        user_defined_macros={"hypot": math.hypot},
        user_defined_filters={"basename": os.path.basename},
        render_template_as_native_obj=True,
    )
    with built:
        BashOperator(task_id="t", bash_command="echo {{ hypot(3, 4) }}")
    spec = manifests.dag_manifest(built)["spec"]
    assert spec["userDefinedMacros"] == {"hypot": "math:hypot"}
    assert spec["userDefinedFilters"] == {"basename": f"{os.path.basename.__module__}:basename"}
    assert spec["renderTemplateAsNativeObj"] is True
    assert built.unsupported == {}


@pytest.mark.parametrize(
    "macros",
    [pytest.param({"f": lambda x: x}, id="a lambda"), pytest.param({"project": "acme"}, id="a constant")],
)
def test_a_macro_outside_the_dags_folder_that_is_not_importable_is_refused(macros: dict[str, Any]) -> None:
    with DAG("m", schedule=None, start_date=START, user_defined_macros=macros) as built:
        BashOperator(task_id="t", bash_command="echo")
    with pytest.raises(manifests.ManifestError, match=r"not importable .*not inside the DAGs folder"):
        manifests.dag_manifest(built)


def test_a_lambda_filter_and_a_constant_macro_of_a_dag_file_are_followed_by_reference(tmp_path: Path) -> None:
    (tmp_path / "lambdas.py").write_text(
        textwrap.dedent("""
            import pendulum
            from zonda import DAG
            from zonda.operators.bash import BashOperator

            with DAG("lambdas", schedule=None, start_date=pendulum.datetime(2021, 1, 1, tz="UTC"),
                     user_defined_macros={"project": "acme"},
                     user_defined_filters={"shout": lambda text: text.upper() + "!"}) as dag:
                BashOperator(task_id="t", bash_command="echo {{ project | shout }}")
        """)
    )
    rendered_dags = rendering.render_paths([tmp_path], safe_mode=False)
    spec = rendered_dags.dags[0].manifest["spec"]
    assert spec["userDefinedMacros"] == {"project": "dagfile:lambdas.py?dag_id=lambdas&macro=project"}
    assert spec["userDefinedFilters"] == {"shout": "dagfile:lambdas.py?dag_id=lambdas&filter=shout"}
    outcome = dag_runs.test_file(tmp_path / "lambdas.py")
    assert (outcome.task_states, outcome.xcoms) == ({"t": "success"}, {"t": "ACME!"})


def test_dags_test_runs_a_dag_with_macros_filters_and_native_rendering() -> None:
    with DAG(
        "native",
        schedule=None,
        start_date=START,
        params={"numbers": [1, 2, 3]},
        user_defined_macros={"hypot": math.hypot},
        user_defined_filters={"basename": os.path.basename},
        render_template_as_native_obj=True,
    ) as built:
        total = PythonOperator(task_id="total", python_callable=sum, op_args=["{{ params.numbers }}"])
        echo = BashOperator(task_id="echo", bash_command="echo {{ hypot(3, 4) }} {{ '/d/x.csv' | basename }}")
        total >> echo
    outcome = built.test()
    assert outcome.task_states == {"total": "success", "echo": "success"}
    assert outcome.xcoms == {"total": 6, "echo": "5.0 x.csv"}


def running_run(dag_spec: dict[str, Any]) -> dict[str, Any]:
    """A DagRun body (as the UI reads it) of `dag_spec`, every task running its first try."""
    return {
        "metadata": {"name": "m-manual-1", "namespace": "data"},
        "spec": {"dagName": "m", "runType": "manual"},
        "status": {
            "logicalDate": "2026-11-29T06:00:00Z",
            "dataIntervalStart": "2026-11-28T06:00:00Z",
            "dataIntervalEnd": "2026-11-29T06:00:00Z",
            "dagSpec": dag_spec,
            "taskInstances": {t["id"]: {"state": "running", "tryNumber": 1} for t in dag_spec["tasks"]},
        },
    }


def test_the_ui_renders_fields_with_the_dags_macros_filters_and_native_types() -> None:
    from zonda.tries.rendered_fields import RenderedField, RenderingUnavailable, render_task_fields

    dag_spec: dict[str, Any] = {
        "userDefinedMacros": {"hypot": "math:hypot"},
        "userDefinedFilters": {"basename": "os.path:basename"},
        "renderTemplateAsNativeObj": True,
        "tasks": [{"id": "t", "operator": "PythonOperator",
                   "args": {"python_callable": "builtins.sum", "op_args": ["{{ [hypot(3, 4)] }}"],
                            "op_kwargs": {"f": "{{ '/d/x.csv' | basename }}"}}}],
    }  # fmt: skip
    body = running_run(dag_spec)
    fields = {field.name: field for field in render_task_fields(body, "t", 1)}
    assert fields["op_args"] == RenderedField("op_args", [[5.0]])
    assert fields["op_kwargs"] == RenderedField("op_kwargs", {"f": "x.csv"})
    dag_spec["userDefinedFilters"] = {"basename": "nowhere:basename"}
    with pytest.raises(RenderingUnavailable, match="nowhere:basename"):
        render_task_fields(body, "t", 1)


def test_the_uis_rendered_fields_show_a_template_files_rendered_text() -> None:
    """The task instance page renders the fields as the try does: the file the manifest carries
    (`spec.templateFiles`, Airflow's `template_ext` / `templates_exts`), not its name."""
    from zonda.tries.rendered_fields import RenderedField, render_task_fields

    body = running_run(
        {
            "templateFiles": {"q.sql": "select {{ ds }}", "run.sh": "echo {{ ds_nodash }}"},
            "tasks": [
                {"id": "py", "operator": "PythonOperator", "args": {"python_callable": "builtins.print",
                 "templates_exts": [".sql"], "templates_dict": {"q": "q.sql"}}},
                {"id": "sh", "operator": "BashOperator", "args": {"bash_command": "run.sh"}},
            ],
        }
    )  # fmt: skip
    assert render_task_fields(body, "py", 1)[0] == RenderedField("templates_dict", {"q": "select 2026-11-29"})
    assert render_task_fields(body, "sh", 1)[0] == RenderedField("bash_command", "echo 20261129")
