"""Airflow 3 DAG files under `--airflow-compat`: `airflow.sdk` and the standard provider map onto Zonda."""

from __future__ import annotations

import importlib
import textwrap
from pathlib import Path

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
        from airflow.sdk import DAG, AssetWatcher
        from airflow.providers.standard.operators.hitl import ApprovalOperator
        from airflow.sdk import BaseNotifier
        """,
    )
    message = rendering.render_paths([tmp_path], airflow_compat=True).file_errors["assets.py"]
    assert "line 2: airflow.sdk.AssetWatcher is not supported by Zonda: AssetWatcher" in message
    assert "line 3: airflow.providers.standard.operators.hitl is not supported" in message
    assert "line 4: airflow.sdk.BaseNotifier is not supported" in message
