"""Rendered template fields on the task-instance page: the runner's context and sandbox, escaped output.

Real: zonda's DAG resolution, invocation builder, template context and Jinja sandbox; the UI's own
Jinja environment and task.html template.
"""

from __future__ import annotations

from typing import Any

import pytest

from controller.ui import pages
from zonda.tries.rendered_fields import RenderedField, RenderingUnavailable, render_task_fields

SCRIPT = "<script>alert('xss')</script>"


def run_body(
    args: dict[str, Any], *, operator: str = "BashOperator", conf: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {
        "metadata": {"name": "etl-manual-1", "namespace": "data", "uid": "u1"},
        "spec": {"dagName": "etl", "runType": "manual", "conf": conf or {}},
        "status": {
            "state": "running",
            "logicalDate": "2026-11-29T06:00:00Z",
            "dataIntervalStart": "2026-11-28T06:00:00Z",
            "dataIntervalEnd": "2026-11-29T06:00:00Z",
            "dagSpec": {
                "params": {"x": "from-dag", "y": "kept"},
                "tasks": [
                    {"id": "up", "operator": "PythonOperator", "args": {"python_callable": "json.dumps"}},
                    {"id": "t", "operator": operator, "args": args, "dependsOn": ["up"]},
                ],
            },
            "taskInstances": {
                "up": {"state": "success", "tryNumber": 1, "xcom": {"rows": 3}},
                "t": {"state": "running", "tryNumber": 2, "maxTries": 3},
            },
        },
    }


def test_a_bash_command_is_rendered_with_the_runs_date_params_and_conf() -> None:
    body = run_body({"bash_command": "echo {{ ds }} {{ params.x }} {{ params.y }} try {{ ti.try_number }}"},
                    conf={"x": "from-conf"})  # fmt: skip
    fields = render_task_fields(body, "t", 2)
    assert fields == [RenderedField("bash_command", "echo 2026-11-29 from-conf kept try 2")]


def test_upstream_xcoms_are_pulled_from_the_runs_status() -> None:
    body = run_body(
        {"bash_command": "echo {{ ti.xcom_pull(task_ids='up')['rows'] }}", "env": {"D": "{{ ds_nodash }}"}}
    )
    assert render_task_fields(body, "t", 1) == [
        RenderedField("bash_command", "echo 3"),
        RenderedField("env", {"D": "20261129"}),
    ]


def test_a_failing_template_shows_its_error_and_the_other_fields_still_render() -> None:
    body = run_body({"bash_command": "echo {{ params.missing.deeper }}", "env": {"A": "{{ ds }}"}})
    bash, env = render_task_fields(body, "t", 1)
    assert bash.value is None and bash.error is not None
    assert "bash_command" in bash.error and "missing" in bash.error
    assert env == RenderedField("env", {"A": "2026-11-29"})


def test_variables_are_not_read_from_the_ui_process_environment(monkeypatch: Any) -> None:
    monkeypatch.setenv("AIRFLOW_VAR_SECRET", "ui-process-secret")
    (field,) = render_task_fields(run_body({"bash_command": "echo {{ var.value.secret }}"}), "t", 1)
    assert field.error is not None and "ui-process-secret" not in field.error
    assert "not rendered by the UI" in field.error


def test_the_task_page_escapes_rendered_values_and_errors() -> None:
    body = run_body(
        {"bash_command": "echo " + SCRIPT + " {{ params.x }}", "env": {"A": "{{ nope }}" + SCRIPT}}
    )
    rendered = render_task_fields(body, "t", 1)
    html = pages.environment().get_template("task.html").render(
        run=body, ti=body["status"]["taskInstances"]["t"], task_id="t", task_spec={}, attempts=[], tries=[],
        chosen_try=0, rendered=rendered, rendered_note=None, viewer="v", csrf="c", read_only=True,
    )  # fmt: skip
    assert "<script>alert" not in html
    assert "echo &lt;script&gt;alert(&#39;xss&#39;)&lt;/script&gt; from-dag" in html
    assert "Rendered env" in html and "nope" in html and "is undefined" in html


def test_the_task_page_says_why_nothing_is_rendered() -> None:
    body = run_body({"image": "busybox"}, operator="my_pkg.operators.Custom")
    with pytest.raises(RenderingUnavailable, match="does not import it"):
        render_task_fields(body, "t", 1)  # a user's module is never imported by the UI process
    html = pages.environment().get_template("task.html").render(
        run=body, ti={}, task_id="t", task_spec={}, attempts=[], tries=[], chosen_try=0, rendered=[],
        rendered_note="my_pkg.operators.Custom is a user's import path: the UI does not import it",
        viewer="v", csrf="c", read_only=True,
    )  # fmt: skip
    assert "the UI does not import it" in html
