"""Airflow 3 DAG files under `--airflow-compat`: `airflow.sdk` and the standard provider map onto Zonda."""

from __future__ import annotations

import importlib
import textwrap
from pathlib import Path
from typing import Any

import pytest

from zonda.authoring import compat, rendering

#: The first Airflow 3 file of issue 20, unchanged.
AF3_FILE = """
    import pendulum
    from airflow.sdk import dag, task
    from airflow.providers.standard.operators.bash import BashOperator

    @dag(schedule="@daily", start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), catchup=False)
    def af3_example():
        @task
        def extract():
            return {"a": 1}
        @task
        def load(d: dict):
            print(d)
        load(extract()) >> BashOperator(task_id="echo", bash_command="echo hi")
    af3_example()
"""


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return path


def test_the_first_airflow3_file_renders(tmp_path: Path) -> None:
    write(tmp_path, "af3_dag.py", AF3_FILE)
    report = rendering.render_paths([tmp_path], airflow_compat=True)
    assert report.file_errors == {}
    tasks = {t["id"]: t for t in report.manifests[0]["spec"]["tasks"]}
    assert tasks["echo"]["operator"] == "BashOperator"
    assert tasks["echo"]["dependsOn"] == ["load"] and tasks["load"]["dependsOn"] == ["extract"]


@pytest.mark.parametrize(
    ("airflow3", "airflow2"),
    [
        ("airflow.sdk:DAG", "airflow.models.dag:DAG"),
        ("airflow.sdk:task", "airflow.decorators:task"),
        ("airflow.sdk:TaskGroup", "airflow.utils.task_group:TaskGroup"),
        ("airflow.sdk:BaseSensorOperator", "airflow.sensors.base:BaseSensorOperator"),
        ("airflow.sdk:TriggerRule", "airflow.utils.trigger_rule:TriggerRule"),
        ("airflow.sdk:Label", "airflow.utils.edgemodifier:Label"),
        ("airflow.sdk:chain", "airflow.models.baseoperator:chain"),
        ("airflow.sdk.bases.operator:BaseOperator", "airflow.models.baseoperator:BaseOperator"),
        ("airflow.providers.common.compat.sdk:TriggerRule", "airflow.utils.trigger_rule:TriggerRule"),
        ("airflow.providers.standard.operators.bash:BashOperator", "airflow.operators.bash:BashOperator"),
        (
            "airflow.providers.standard.operators.python:PythonOperator",
            "airflow.operators.python:PythonOperator",
        ),
        ("airflow.providers.standard.sensors.time:TimeSensor", "airflow.sensors.time_sensor:TimeSensor"),
        (
            "airflow.providers.standard.sensors.time_delta:TimeDeltaSensor",
            "airflow.sensors.time_delta:TimeDeltaSensor",
        ),
        (
            "airflow.providers.standard.sensors.external_task:ExternalTaskSensor",
            "airflow.sensors.external_task:ExternalTaskSensor",
        ),
        (
            "airflow.providers.standard.operators.trigger_dagrun:TriggerDagRunOperator",
            "airflow.operators.trigger_dagrun:TriggerDagRunOperator",
        ),
        (
            "airflow.providers.standard.triggers.temporal:DateTimeTrigger",
            "airflow.triggers.temporal:DateTimeTrigger",
        ),
    ],
)
def test_an_airflow3_name_is_the_airflow2_name_zonda_maps(airflow3: str, airflow2: str) -> None:
    with compat.airflow_imports(enabled=True):
        new, old = (
            getattr(importlib.import_module(m), n) for m, n in (x.split(":") for x in (airflow3, airflow2))
        )
    assert new is old


def test_what_airflow3_names_zonda_lacks_fails_naming_the_line_and_why(tmp_path: Path) -> None:
    write(
        tmp_path,
        "assets.py",
        """
        from airflow.sdk import DAG, AssetStateStore
        from airflow.providers.standard.operators.smooth import SmoothOperator
        from airflow.sdk.execution_time.task_state import TaskStateStore
        """,
    )
    message = rendering.render_paths([tmp_path], airflow_compat=True).file_errors["assets.py"]
    assert "line 2: airflow.sdk.AssetStateStore is not supported by Zonda: not provided" in message
    assert "line 3: airflow.providers.standard.operators.smooth is not supported" in message
    assert "line 4: airflow.sdk.execution_time is not supported" in message


# ------------------------------------------------------------------------------------ the dialect


@pytest.mark.parametrize(
    ("source", "version", "reason"),
    [
        ("from airflow.sdk import DAG\nfrom airflow.operators.bash import BashOperator", "3", "line 1"),
        ("from airflow.decorators import dag", "2", "imports airflow.decorators"),
        ("from airflow import DAG\nDAG('d', schedule_interval=None)", "2", "schedule_interval="),
        ("from airflow import DAG\nx = '{{ execution_date }}'", "2", "uses execution_date"),
        (
            "from airflow import DAG\nfrom airflow.providers.standard.operators.bash import B",
            "2",
            "no Airflow 3",
        ),
    ],
)
def test_a_files_imports_decide_which_airflow_it_is_read_as(source: str, version: str, reason: str) -> None:
    dialect = compat.file_dialect(source)
    assert dialect is not None and dialect.version == version and reason in dialect.reason
    assert compat.file_dialect("from zonda import DAG") is None
    forced = compat.file_dialect(source, forced="3" if version == "2" else "2")
    assert forced is not None and forced.reason.startswith("--airflow-version")


DEFAULTS_FILE = """
    import pendulum
    from {module} import DAG
    from airflow.providers.standard.operators.empty import EmptyOperator

    with DAG("plain", start_date=pendulum.datetime(2024, 1, 1, tz="Europe/Paris")):
        EmptyOperator(task_id="a")
    with DAG("cron", schedule="0 6 * * *", start_date=pendulum.datetime(2024, 1, 1, tz="Europe/Paris")):
        EmptyOperator(task_id="a")
"""


def test_airflow3_defaults_no_schedule_no_catchup_and_cron_as_a_trigger_timetable(tmp_path: Path) -> None:
    write(tmp_path, "three.py", DEFAULTS_FILE.format(module="airflow.sdk"))
    report = rendering.render_paths([tmp_path], airflow_compat=True)
    specs = {dag.dag_id: dag.manifest["spec"] for dag in report.dags if dag.manifest}
    assert specs["plain"]["airflowVersion"] == "3" and specs["plain"]["catchup"] is False
    assert "schedule" not in specs["plain"] and "timetable" not in specs["plain"]  # manual runs only
    assert specs["cron"]["timetable"] == {
        "class": "zonda.timetables.trigger.CronTriggerTimetable",
        "params": {"expression": "0 6 * * *", "interval": 0.0, "timezone": "Europe/Paris"},
    }
    assert "3 (line 3: imports airflow.sdk)" in rendering.migration_table(report)


def test_airflow2_defaults_daily_with_catchup_and_cron_as_data_intervals(tmp_path: Path) -> None:
    write(tmp_path, "two.py", DEFAULTS_FILE.format(module="airflow.models.dag"))
    specs = {
        d.dag_id: d.manifest["spec"] for d in rendering.render_paths([tmp_path], airflow_compat=True).dags
    }
    assert specs["plain"]["airflowVersion"] == "2" and specs["plain"].get("catchup", True) is True
    assert specs["plain"]["schedule"] == "1d" and specs["cron"]["schedule"] == "0 6 * * *"
    forced = rendering.render_paths([tmp_path], airflow_compat=True, airflow_version="3").dags
    assert {d.dag_id: d.manifest["spec"]["catchup"] for d in forced if d.manifest} == {
        "plain": False,
        "cron": False,
    }


def test_schedule_interval_fails_an_airflow3_file_as_airflow3_does(tmp_path: Path) -> None:
    write(tmp_path, "old.py", "from airflow.sdk import DAG\nDAG('d', schedule_interval='@daily')\n")
    message = rendering.render_paths([tmp_path], airflow_compat=True).file_errors["old.py"]
    assert "unexpected keyword argument 'schedule_interval'" in message and "use schedule=" in message


def _context(version: str | None, run_type: str = "scheduled") -> dict[str, object]:
    from datetime import datetime

    from zonda.resources.invocations import TaskInvocation
    from zonda.resources.run_types import RunType
    from zonda.tries.task_context import build_context

    return build_context(
        TaskInvocation(
            dag_name="etl", run_name="r", run_type=RunType(run_type), task_id="t", try_number=2,
            logical_date=datetime.fromisoformat("2024-03-04T00:00:00+00:00"),
            data_interval_start=datetime.fromisoformat("2024-03-04T00:00:00+00:00"),
            data_interval_end=datetime.fromisoformat("2024-03-05T00:00:00+00:00"),
            airflow_version=version,
        )
    )  # fmt: skip


def test_each_airflow_gets_its_own_context_keys() -> None:
    three = _context("3")
    assert "execution_date" not in three and "conf" not in three and three["try_number"] == 2
    dag_run: Any = three["dag_run"]
    assert str(dag_run.run_after) == "2024-03-05 00:00:00+00:00"
    with pytest.raises(AttributeError, match="use logical_date"):
        dag_run.execution_date  # noqa: B018 - the attribute is gone
    two = _context("2")
    assert two["tomorrow_ds"] == "2024-03-05" and two["yesterday_ds_nodash"] == "20240303"
    assert two["next_ds"] == "2024-03-05" and _context("2", "manual")["next_ds"] == "2024-03-04"
    assert "execution_date" in two and "conf" in two
    zonda = _context(None)
    assert "tomorrow_ds" not in zonda and "try_number" not in zonda and "execution_date" in zonda


def test_bash_output_processor_and_multiple_outputs_push_each_key(tmp_path: Path) -> None:
    """Airflow's `BashOperator(multiple_outputs=True, output_processor=json.loads)` and the `@task.bash`
    form (the standard provider's example_bash_operator / example_bash_decorator): the processed last
    line is the return value, and each of its keys an XCom of its own."""
    from controller.devtools import dag_runs

    write(
        tmp_path,
        "bash_outputs.py",
        """
        import json
        import pendulum
        from airflow.sdk import dag, task
        from airflow.providers.standard.operators.bash import BashOperator

        @dag(schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC"))
        def bash_outputs():
            stats = BashOperator(
                task_id="stats",
                bash_command='echo noise; echo \\'{"count": 3, "name": "x"}\\'',
                multiple_outputs=True,
                output_processor=json.loads,
            )

            @task.bash(multiple_outputs=True, output_processor=json.loads)
            def decorated() -> str:
                return 'echo \\'{"twice": 6}\\''

            show = BashOperator(
                task_id="show",
                bash_command="echo $COUNT-{{ ti.xcom_pull(task_ids='decorated', key='twice') }}",
                env={"COUNT": "{{ ti.xcom_pull(task_ids='stats', key='count') }}"},
            )
            [stats, decorated()] >> show

        bash_outputs()
        """,
    )
    outcome = dag_runs.test_file(tmp_path / "bash_outputs.py", airflow_compat=True)
    assert outcome.state == "success", outcome.task_states
    assert outcome.xcoms["stats"] == {"count": 3, "name": "x"}
    assert outcome.xcoms["show"] == "3-6"


def test_the_standard_providers_decorators_chain_linear_and_parsing_context(tmp_path: Path) -> None:
    """Airflow 3 names a file may use beside `@task`: the provider's decorator functions, `chain_linear`
    (each task of an element upstream of each of the next), `get_parsing_context()`, `WaitSensor`."""
    write(
        tmp_path,
        "af3_names.py",
        """
        import datetime
        import pendulum
        from airflow.providers.standard.decorators.bash import bash_task
        from airflow.providers.standard.decorators.python import python_task
        from airflow.providers.standard.operators.empty import EmptyOperator
        from airflow.providers.standard.sensors.time_delta import WaitSensor
        from airflow.sdk import DAG, chain_linear, get_parsing_context

        @bash_task
        def hello():
            return "echo hello"

        @python_task
        def value():
            return 1

        start = pendulum.datetime(2024, 1, 1, tz="UTC")
        with DAG(get_parsing_context().dag_id or "af3_names", start_date=start):
            wait = WaitSensor(task_id="wait", time_to_wait=datetime.timedelta(seconds=1), deferrable=True)
            chain_linear(wait, [hello(), value()], [EmptyOperator(task_id="c"), EmptyOperator(task_id="d")])
        """,
    )
    report = rendering.render_paths([tmp_path], airflow_compat=True)
    assert not report.failed, (report.file_errors, [d.errors for d in report.dags])
    (manifest,) = report.manifests
    upstream = {t["id"]: sorted(t.get("dependsOn", [])) for t in manifest["spec"]["tasks"]}
    assert upstream == {
        "wait": [],
        "hello": ["wait"],
        "value": ["wait"],
        "c": ["hello", "value"],
        "d": ["hello", "value"],
    }
    operators = {t["id"]: t["operator"] for t in manifest["spec"]["tasks"]}
    assert operators["wait"] == "zonda.sensors.time.WaitSensor"
    assert operators["hello"] == "zonda.operators.bash.BashDecoratedOperator"


def test_chain_linear_refuses_as_airflow() -> None:
    from zonda.authoring.relations import Label, chain_linear

    with pytest.raises(ValueError, match="No tasks provided"):
        chain_linear()
    with pytest.raises(ValueError, match="Labels are not supported by chain_linear"):
        chain_linear(Label("x"))


def test_task_display_names_are_written_into_the_manifest() -> None:
    """Airflow 3.3.2's example_display_name, unchanged: `task_display_name` on an operator and on
    `@task` becomes the task's `displayName` (the UI shows it); a task without one has none."""
    from tests.airflow_examples import compare

    report = rendering.render_paths(
        [compare.AF3 / "dags" / "core" / "example_display_name.py"], airflow_compat=True
    )
    (dag,) = report.dags
    assert dag.manifest is not None
    shown = {t["id"]: t.get("displayName") for t in dag.manifest["spec"]["tasks"]}
    assert shown == {"sample_task_1": "Sample Task 1", "sample_task_2": "Sample Task 2"}
