"""The Python authoring API: Airflow 2.x DAG files compiled to the manifests the controller runs.

Pure: DAG objects are built in-process and compiled with `zonda.authoring.manifests`; the runner test
executes a rendered task with the real task runner (no cluster).
"""

from __future__ import annotations

import datetime as dt
import os
import textwrap
import zipfile
from pathlib import Path
from typing import Any

import pendulum
import pytest

from controller.runner.task import run_task
from tests.paths import REPO_ROOT
from zonda import DAG, Label, Param, TaskGroup, chain, cross_downstream, dag, task
from zonda.authoring import manifests, rendering
from zonda.authoring.dag_files import DAGS_FOLDER_ENV
from zonda.authoring.params import ParamValidationError
from zonda.authoring.task_groups import task_group
from zonda.operators.bash import BashOperator
from zonda.operators.empty import EmptyOperator
from zonda.operators.python import PythonOperator
from zonda.resources.invocations import TaskInvocation, TaskOutcome
from zonda.resources.run_types import RunType
from zonda.specs import params
from zonda.specs.dags import DagInvalid, parse_dag_spec, resolve_dag

START = pendulum.datetime(2021, 1, 1, tz="UTC")


def spec_of(built: DAG, folder: Path | None = None) -> dict[str, Any]:
    return manifests.dag_manifest(built, dags_folder=folder)["spec"]


def tasks_of(built: DAG, folder: Path | None = None) -> dict[str, dict[str, Any]]:
    return {body["id"]: body for body in spec_of(built, folder)["tasks"]}


# ------------------------------------------------------------------------------- declaring a DAG


def test_the_three_ways_to_declare_a_dag_give_the_same_manifest() -> None:
    options: dict[str, Any] = {"start_date": START, "schedule_interval": "@daily", "catchup": False}
    with DAG("my_dag_name", **options) as with_block:
        EmptyOperator(task_id="task")
    constructed = DAG("my_dag_name", **options)
    EmptyOperator(task_id="task", dag=constructed)

    @dag(dag_id="my_dag_name", **options)
    def generate_dag() -> None:
        EmptyOperator(task_id="task")

    decorated = generate_dag()
    rendered = [manifests.dag_manifest(d)["spec"] for d in (with_block, constructed, decorated)]
    assert rendered[0] == rendered[1] == rendered[2]
    assert rendered[0] == {
        "catchup": False,
        "schedule": "@daily",
        "startDate": "2021-01-01T00:00:00Z",
        "tasks": [{"id": "task", "operator": "EmptyOperator"}],
    }


def test_default_args_reach_operators_and_groups_override_them() -> None:
    """The seed's TaskGroup default_args example: task1 gets the group's 3, task2 keeps its own 2."""
    with DAG("dag1", start_date=START, schedule_interval="@daily", default_args={"retries": 1}) as built:
        outside = EmptyOperator(task_id="outside")
        with TaskGroup("group1", default_args={"retries": 3}):
            task1 = EmptyOperator(task_id="task1")
            task2 = BashOperator(task_id="task2", bash_command="echo Hello World!", retries=2)
    assert (outside.retries, task1.retries, task2.retries) == (1, 3, 2)
    assert task1.task_id == "group1.task1"
    spec = spec_of(built)
    assert spec["defaultArgs"] == {"retries": 1}
    assert spec["taskGroups"] == [{"id": "group1", "defaultArgs": {"retries": 3}}]
    assert spec["tasks"][2] == {
        "id": "task2", "group": "group1", "operator": "BashOperator", "retries": 2,
        "args": {"bash_command": "echo Hello World!"},
    }  # fmt: skip


def test_scheduler_arguments_become_task_fields_and_durations() -> None:
    with DAG("fields", schedule_interval=dt.timedelta(hours=4), start_date=START) as built:
        BashOperator(
            task_id="t",
            bash_command="true",
            retry_delay=dt.timedelta(minutes=1, seconds=30),
            execution_timeout=600,
            trigger_rule="all_done",
            pool="p",
            depends_on_past=True,
            executor_config={"pod_override": {"spec": {"nodeSelector": {"disk": "ssd"}}}},
            email_on_failure=True,  # accepted, has no effect in Zonda
        )
    spec = spec_of(built)
    assert spec["schedule"] == "4h"
    assert spec["tasks"][0] == {
        "id": "t", "operator": "BashOperator", "args": {"bash_command": "true"},
        "retryDelay": "1m30s", "executionTimeout": "10m", "triggerRule": "all_done", "pool": "p",
        "dependsOnPast": True, "podOverride": {"spec": {"nodeSelector": {"disk": "ssd"}}},
    }  # fmt: skip


def test_an_unknown_dag_argument_is_a_type_error_and_unsupported_ones_are_listed() -> None:
    with pytest.raises(TypeError, match="schedule_intervall"):
        DAG("x", schedule_intervall="@daily")
    built = DAG("x", fail_stop=True)
    assert "fail_stop" in built.unsupported


def test_params_are_checked_against_their_schema_when_rendering() -> None:
    with DAG("p", schedule_interval=None, params={"n": Param(5, type="integer", minimum=3), "x": "y"}) as ok:
        EmptyOperator(task_id="t")
    assert spec_of(ok)["params"] == {"n": 5, "x": "y"}
    assert spec_of(ok)["paramsSchema"] == {
        "type": "object",
        "properties": {"n": {"type": "integer", "minimum": 3}},
    }
    with DAG("bad", schedule_interval=None, params={"n": Param(1, type="integer", minimum=3)}) as bad:
        EmptyOperator(task_id="t")
    with pytest.raises(manifests.ManifestError, match="param 'n'"):
        manifests.dag_manifest(bad)
    with pytest.raises(ParamValidationError):
        Param("a", type="integer").resolve()


def test_a_timetable_instance_is_compiled_through_serialize() -> None:
    from examples.timetables.workday import AfterWorkdayTimetable, SometimeAfterWorkdayTimetable

    with DAG("workday", start_date=START, timetable=AfterWorkdayTimetable()) as built:
        EmptyOperator(task_id="run_this")
    assert spec_of(built)["timetable"] == {"class": "examples.timetables.workday.AfterWorkdayTimetable"}
    with DAG("later", start_date=START, timetable=SometimeAfterWorkdayTimetable(dt.time(8))) as built:
        EmptyOperator(task_id="run_this")
    assert spec_of(built)["timetable"] == {
        "class": "examples.timetables.workday.SometimeAfterWorkdayTimetable",
        "params": {"schedule_at": "08:00:00"},
    }


def test_start_date_timezone_becomes_the_dag_timezone() -> None:
    with DAG(
        "tz", schedule_interval="0 8 * * *", start_date=pendulum.datetime(2024, 3, 1, tz="Europe/Paris")
    ) as b:
        EmptyOperator(task_id="t")
    spec = spec_of(b)
    assert (spec["timezone"], spec["startDate"]) == ("Europe/Paris", "2024-02-29T23:00:00Z")


# ---------------------------------------------------------------------------------- dependencies


def test_shift_operators_lists_and_set_relatives() -> None:
    with DAG("deps", schedule_interval=None) as built:
        first, second, third, fourth = (EmptyOperator(task_id=f"t{i}") for i in range(1, 5))
        first >> [second, third]
        third << fourth
        fourth.set_upstream(second)
        [first, second] >> fourth
    tasks = tasks_of(built)
    assert tasks["t2"]["dependsOn"] == ["t1"]
    assert tasks["t3"]["dependsOn"] == ["t1", "t4"]
    assert tasks["t4"]["dependsOn"] == ["t1", "t2"]


def test_chain_pairs_lists_and_cross_downstream_crosses_them() -> None:
    with DAG("chain", schedule_interval=None) as built:
        op1, op2, op3, op4, op5, op6 = (EmptyOperator(task_id=f"op{i}") for i in range(1, 7))
        chain(op1, [op2, op3], [op4, op5], op6)
    tasks = tasks_of(built)
    assert [tasks[f"op{i}"].get("dependsOn") for i in range(1, 7)] == [
        None, ["op1"], ["op1"], ["op2"], ["op3"], ["op4", "op5"],
    ]  # fmt: skip
    with DAG("cross", schedule_interval=None) as crossed:
        a, b, c, d = (EmptyOperator(task_id=name) for name in "abcd")
        cross_downstream([a, b], [c, d])
    tasks = tasks_of(crossed)
    assert tasks["c"]["dependsOn"] == tasks["d"]["dependsOn"] == ["a", "b"]
    with pytest.raises(ValueError, match="different length"):
        chain([a, b], [c])


def test_labels_inline_and_through_set_downstream() -> None:
    with DAG("labels", schedule_interval=None) as built:
        check, save, describe, other = (
            EmptyOperator(task_id=n) for n in ("check", "save", "describe", "other")
        )
        check >> Label("No errors") >> save
        check.set_downstream(describe, Label("Errors found"))
        [save, describe] >> Label("joined") >> other
    tasks = tasks_of(built)
    assert tasks["save"]["edgeLabels"] == {"check": "No errors"}
    assert tasks["describe"]["edgeLabels"] == {"check": "Errors found"}
    assert tasks["other"]["edgeLabels"] == {"save": "joined", "describe": "joined"}


def test_labels_on_edges_into_and_out_of_a_task_group_are_kept() -> None:
    """Airflow's `task >> Label("x") >> group`: the label is on the edges into the group's roots."""
    with DAG("group_labels", schedule_interval=None) as built:
        first, last = EmptyOperator(task_id="first"), EmptyOperator(task_id="last")
        with TaskGroup("g") as g:
            EmptyOperator(task_id="b") >> EmptyOperator(task_id="c")
        first >> Label("into") >> g >> Label("out of") >> last
    spec = spec_of(built)
    assert spec["taskGroups"] == [{"id": "g", "dependsOn": ["first"], "edgeLabels": {"first": "into"}}]
    resolved = resolve_dag("group_labels", parse_dag_spec(spec))
    assert {t: dict(r.edge_labels) for t, r in resolved.tasks.items()} == {
        "first": {}, "g.b": {"first": "into"}, "g.c": {}, "last": {"g.c": "out of"},
    }  # fmt: skip


def test_nested_groups_prefixes_tooltips_and_group_dependencies() -> None:
    with DAG("groups", schedule_interval=None) as built:
        start = EmptyOperator(task_id="start")
        with TaskGroup("outer", tooltip="Outer") as outer:
            EmptyOperator(task_id="a")
            with TaskGroup("inner", prefix_group_id=False) as inner:
                b = EmptyOperator(task_id="b")
        end = EmptyOperator(task_id="end")
        start >> outer >> end
        inner >> end
    assert b.task_id == "b" and inner.group_id == "outer.inner"  # inner does not prefix its tasks
    spec = spec_of(built)
    assert spec["taskGroups"] == [
        {"id": "outer", "tooltip": "Outer", "dependsOn": ["start"]},
        {"id": "inner", "parent": "outer", "prefixGroupId": False},
    ]
    assert {t["id"]: t.get("dependsOn") for t in spec["tasks"]}["end"] == ["outer", "outer.inner"]


def test_task_group_decorator_suffixes_repeated_calls() -> None:
    with DAG("tg", schedule_interval=None) as built:

        @task_group
        def section() -> None:
            """A repeated section."""
            EmptyOperator(task_id="work")

        first, second = section(), section()
        first >> second
    spec = spec_of(built)
    assert [group["id"] for group in spec["taskGroups"]] == ["section", "section__1"]
    assert spec["taskGroups"][0]["tooltip"] == "A repeated section."
    assert [t["id"] for t in spec["tasks"]] == ["work", "work"]
    assert built.task_ids == ["section.work", "section__1.work"]


# -------------------------------------------------------------------------------------- TaskFlow


def test_taskflow_passes_xcom_args_and_makes_dependencies(tmp_path: Path) -> None:
    with DAG("flow", schedule_interval=None) as built:

        @task(multiple_outputs=True)
        def extract() -> dict[str, int]:
            return {"a": 1, "b": 2}

        @task
        def add(x: int, y: int) -> int:
            return x + y

        values = extract()
        add(values["a"], y=values["b"])
        add.override(task_id="again")(1, 2)
        add(3, 4)
        add(BashOperator(task_id="echo", bash_command="echo hi").output, 1)
    built.fileloc = str(tmp_path / "flow.py")
    tasks = tasks_of(built, tmp_path)
    assert tasks["add"]["dependsOn"] == ["extract"]
    assert tasks["add"]["args"]["op_args"] == [{"__zonda_xcom__": {"key": "a", "task_id": "extract"}}]
    assert tasks["add"]["args"]["op_kwargs"] == {"y": {"__zonda_xcom__": {"key": "b", "task_id": "extract"}}}
    assert tasks["add"]["args"]["python_callable"] == "dagfile:flow.py?dag_id=flow&task_id=add"
    assert "again" in tasks and "add__1" in tasks
    assert tasks["add__2"]["dependsOn"] == ["echo"]


def test_taskflow_variants_compile_to_their_operators(tmp_path: Path) -> None:
    with DAG("variants", schedule_interval=None) as built:

        @task.branch
        def pick() -> str:
            return "a"

        @task.short_circuit
        def go() -> bool:
            return True

        @task.sensor(poke_interval=5, mode="reschedule")
        def ready() -> bool:
            return True

        @task.kubernetes(image="python:3.11")
        def heavy() -> None:
            pass

        pick() >> go() >> ready() >> heavy()
    built.fileloc = str(tmp_path / "variants.py")
    tasks = tasks_of(built, tmp_path)
    assert [tasks[n]["operator"] for n in ("pick", "go", "ready", "heavy")] == [
        "BranchPythonOperator", "ShortCircuitOperator", "PythonSensor", "PythonOperator",
    ]  # fmt: skip
    assert tasks["ready"]["args"]["mode"] == "reschedule"
    assert tasks["heavy"]["container"] == {"image": "python:3.11"}


def test_a_nested_callable_outside_the_dags_folder_is_an_error() -> None:
    with DAG("nested", schedule_interval=None) as built:
        PythonOperator(task_id="lam", python_callable=lambda: 1)
    with pytest.raises(manifests.ManifestError, match="not inside the DAGs folder"):
        manifests.dag_manifest(built)


def test_invalid_operator_arguments_fail_at_construction_as_in_airflow() -> None:
    with DAG("bad", schedule_interval=None), pytest.raises(Exception, match="did you mean 'bash_command'"):
        BashOperator(task_id="t", bash_cmd="echo")


def test_rendering_is_deterministic(tmp_path: Path) -> None:
    examples = REPO_ROOT / "examples" / "dags"
    first = manifests.dump_yaml(rendering.render_paths([examples]).manifests)
    second = manifests.dump_yaml(rendering.render_paths([examples]).manifests)
    assert first == second and first.startswith("---\napiVersion: zonda.dev/v1alpha1\n")


# ---------------------------------------------------------------------------------- DAG folders


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


SIMPLE_DAG = """
    from zonda import DAG
    from zonda.operators.empty import EmptyOperator
    with DAG("{dag_id}", schedule_interval=None) as dag:
        EmptyOperator(task_id="t")
"""


@pytest.mark.parametrize(
    ("syntax", "ignore"),
    [("regexp", "project_a\ntenant_[\\d]\n"), ("glob", "**/*project_a*\ntenant_[0-9]*\n")],
)
def test_airflowignore_in_both_syntaxes(tmp_path: Path, syntax: str, ignore: str) -> None:
    """The seed's example: both pattern files ignore the same five paths."""
    (tmp_path / ".airflowignore").write_text(ignore)
    for name in ("project_a_dag_1.py", "TESTING_project_a.py", "tenant_1.py", "project_a/dag_1.py",
                 "tenant_1/dag_1.py", "kept.py"):  # fmt: skip
        write(tmp_path, name, SIMPLE_DAG.format(dag_id=Path(name).stem + "_" + str(len(name))))
    report = rendering.render_paths([tmp_path], ignore_syntax=syntax)
    assert [d.file for d in report.dags] == ["kept.py"]


def test_safe_mode_skips_files_not_mentioning_dag_and_zonda(tmp_path: Path) -> None:
    write(tmp_path, "helper.py", "raise RuntimeError('a helper, not a DAG file')\n")
    write(tmp_path, "real.py", SIMPLE_DAG.format(dag_id="real"))
    assert [d.dag_id for d in rendering.render_paths([tmp_path]).dags] == ["real"]
    assert "helper.py" in rendering.render_paths([tmp_path], safe_mode=False).file_errors


def test_a_broken_file_is_reported_with_its_line_and_the_others_render(tmp_path: Path) -> None:
    write(tmp_path, "good.py", SIMPLE_DAG.format(dag_id="good"))
    write(tmp_path, "broken.py", "from zonda import DAG\n\nx = 1\nraise ValueError('boom')\n")
    write(tmp_path, "dup.py", SIMPLE_DAG.format(dag_id="good"))
    report = rendering.render_paths([tmp_path])
    assert report.failed
    assert report.file_errors["broken.py"].startswith("broken.py:4: ValueError: boom")
    assert [m["metadata"]["name"] for m in report.manifests] == ["good"]
    assert [d.errors for d in report.dags if d.file == "good.py"] == [
        ["dag id 'good' is also defined in dup.py"]
    ]


def test_zipped_dag_packages_load_with_their_modules(tmp_path: Path) -> None:
    with zipfile.ZipFile(tmp_path / "bundle.zip", "w") as archive:
        archive.writestr("package1/__init__.py", "")
        archive.writestr("package1/functions.py", "def task_name():\n    return 'from_zip'\n")
        archive.writestr(
            "my_dag1.py",
            "from zonda import DAG\nfrom zonda.operators.empty import EmptyOperator\n"
            "from package1.functions import task_name\n"
            "with DAG('zipped', schedule_interval=None) as dag:\n    EmptyOperator(task_id=task_name())\n",
        )
    report = rendering.render_paths([tmp_path])
    assert report.file_errors == {}
    assert report.manifests[0]["spec"]["tasks"] == [{"id": "from_zip", "operator": "EmptyOperator"}]


# ------------------------------------------------------------------------------- Airflow imports


AIRFLOW_FILE = """
    import pendulum
    from airflow import DAG
    from airflow.decorators import task
    from airflow.models.baseoperator import chain
    from airflow.operators.bash import BashOperator
    from airflow.operators.empty import EmptyOperator
    from airflow.utils.edgemodifier import Label
    from airflow.utils.task_group import TaskGroup
    from airflow.utils.trigger_rule import TriggerRule

    with DAG("unchanged", start_date=pendulum.datetime(2021, 1, 1, tz="UTC"), schedule_interval=None) as dag:
        with TaskGroup("g"):
            a = BashOperator(task_id="a", bash_command="echo 1")
        b = EmptyOperator(task_id="b", trigger_rule=TriggerRule.ALL_DONE)
        chain(a, Label("then"), b)
"""


def test_an_unchanged_airflow_file_renders_with_airflow_compat(tmp_path: Path) -> None:
    write(tmp_path, "unchanged.py", AIRFLOW_FILE)
    assert "unchanged.py" in rendering.render_paths([tmp_path]).file_errors  # no airflow installed
    report = rendering.render_paths([tmp_path], airflow_compat=True)
    assert report.file_errors == {}
    tasks = {t["id"]: t for t in report.manifests[0]["spec"]["tasks"]}
    assert tasks["b"] == {
        "id": "b", "operator": "EmptyOperator", "triggerRule": "all_done",
        "dependsOn": ["g.a"], "edgeLabels": {"g.a": "then"},
    }  # fmt: skip
    import sys

    assert not any(name == "airflow" or name.startswith("airflow.") for name in sys.modules)


def test_every_unsupported_airflow_import_is_named_with_an_alternative(tmp_path: Path) -> None:
    write(
        tmp_path,
        "old.py",
        """
        from airflow import DAG
        from airflow.operators.subdag import SubDagOperator
        from airflow.operators.generic_transfer import GenericTransfer
        from airflow.providers.amazon.aws.operators.s3 import S3CreateBucketOperator
        """,
    )
    message = rendering.render_paths([tmp_path], airflow_compat=True).file_errors["old.py"]
    assert "line 3: airflow.operators.subdag is not supported by Zonda: SubDagOperator" in message
    assert "use a TaskGroup" in message
    assert "line 4: airflow.operators.generic_transfer is not supported" in message
    assert "line 5: airflow.providers.amazon" in message and "KubernetesPodOperator" in message


# ---------------------------------------------------------------------------- running a callable


def test_the_runner_re_imports_the_dag_file_for_nested_callables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(
        tmp_path,
        "nested.py",
        """
        from zonda import dag, task
        from zonda.operators.python import PythonOperator

        @dag(schedule=None)
        def nested_flow():
            @task(multiple_outputs=True)
            def extract() -> dict:
                return {"a": 1, "b": 2}

            @task
            def add(x, y):
                return x + y

            values = extract()
            total = add(values["a"], values["b"])
            PythonOperator(task_id="lam", python_callable=lambda: 42) >> total

        flow = nested_flow()
        """,
    )
    report = rendering.render_paths([tmp_path])
    tasks = {t["id"]: t for t in report.manifests[0]["spec"]["tasks"]}
    monkeypatch.setenv(DAGS_FOLDER_ENV, str(tmp_path))
    now = pendulum.datetime(2024, 1, 1, tz="UTC")

    def run(task_id: str, xcoms: dict[str, Any]) -> Any:
        invocation = TaskInvocation(
            dag_name="nested-flow", run_name="r", run_type=RunType.MANUAL, task_id=task_id, try_number=1,
            operator=tasks[task_id]["operator"], args=tasks[task_id].get("args", {}), logical_date=now,
            data_interval_start=now, data_interval_end=now, xcoms=xcoms,
        )  # fmt: skip
        result = run_task(invocation)
        assert result.outcome == TaskOutcome.SUCCESS, result.message
        return result.xcom

    assert run("lam", {}) == 42
    assert run("add", {"extract": run("extract", {}), "lam": 42}) == 3
    assert os.environ[DAGS_FOLDER_ENV] == str(tmp_path)


def test_an_operator_put_next_to_one_in_a_dag_joins_that_dag() -> None:
    """The DAGs page's third way of assigning a DAG."""
    built = DAG("assigned", schedule=None)
    inside = EmptyOperator(task_id="inside", dag=built)
    outside = EmptyOperator(task_id="outside")
    later = EmptyOperator(task_id="later")
    inside >> outside
    later >> outside
    assert built.task_ids == ["inside", "outside", "later"]
    assert tasks_of(built)["outside"]["dependsOn"] == ["inside", "later"]


def test_kubernetes_client_models_in_pod_override_become_camel_case() -> None:
    from kubernetes_asyncio.client import models as k8s

    pod = k8s.V1Pod(
        spec=k8s.V1PodSpec(
            containers=[
                k8s.V1Container(name="base", resources=k8s.V1ResourceRequirements(limits={"cpu": "2"}))
            ],
            node_selector={"disk": "ssd"},
        )
    )
    with DAG("pods", schedule=None) as built:
        BashOperator(task_id="t", bash_command="true", executor_config={"pod_override": pod})
    assert tasks_of(built)["t"]["podOverride"] == {
        "spec": {
            "containers": [{"name": "base", "resources": {"limits": {"cpu": "2"}}}],
            "nodeSelector": {"disk": "ssd"},
        }
    }


def test_param_schemas_become_the_params_json_schema_and_a_param_without_default_is_required() -> None:
    params = {
        "count": Param(2, type="integer", minimum=1, description="How many"),
        "who": Param(type="string", enum=["ann", "bob"]),
        "plain": [1, 2],
    }
    with DAG("schema", schedule=None, params=params) as built:
        EmptyOperator(task_id="t")
    spec = spec_of(built)
    assert spec["params"] == {"count": 2, "plain": [1, 2]}
    assert spec["paramsSchema"] == {
        "type": "object",
        "properties": {
            "count": {"type": "integer", "minimum": 1, "description": "How many"},
            "who": {"type": "string", "enum": ["ann", "bob"]},
        },
        "required": ["who"],
    }
    with DAG("plain", schedule=None, params={"x": 1}) as plain:
        EmptyOperator(task_id="t")
    assert "paramsSchema" not in spec_of(plain)


def test_task_level_params_may_be_params_too() -> None:
    with DAG("task_params", schedule=None) as built:
        BashOperator(task_id="t", bash_command="echo {{ params.n }}", params={"n": Param(3, type="integer")})
    assert tasks_of(built)["t"]["args"]["params"] == {"n": 3}


def test_task_level_param_schemas_are_kept_and_checked_with_the_dags() -> None:
    """Airflow merges a task's params over the DAG's and the run's conf over both, and validates
    every Param: a task Param's schema is the task's `paramsSchema`, checked for each run's conf."""
    with DAG("task_schema", schedule=None, params={"n": 1}) as built:
        BashOperator(
            task_id="t",
            bash_command="echo",
            params={"size": Param(3, type="integer", maximum=10), "who": Param(type="string"), "x": 1},
        )
    task_spec = tasks_of(built)["t"]
    assert task_spec["args"]["params"] == {"size": 3, "x": 1}  # `who` has no default: the run gives it
    assert task_spec["paramsSchema"] == {
        "type": "object",
        "properties": {"size": {"type": "integer", "maximum": 10}, "who": {"type": "string"}},
        "required": ["who"],
    }
    spec = spec_of(built)
    assert params.run_conf_errors(spec, {"who": "ann"}) == []
    assert params.run_conf_errors(spec, {"who": "ann", "size": 11}) == [
        "task 't': param 'size': 11 is greater than the maximum of 10"
    ]
    assert params.run_conf_errors(spec, {}) == ["task 't': param 'who': no value given and it has no default"]


def test_a_task_params_default_that_breaks_its_schema_is_a_render_error() -> None:
    with DAG("bad_task_param", schedule=None) as built:
        BashOperator(task_id="t", bash_command="echo", params={"n": Param(20, type="integer", maximum=10)})
    with pytest.raises(manifests.ManifestError, match="task 't': param 'n'"):
        spec_of(built)


def test_a_hand_written_task_schema_is_checked_with_the_dag() -> None:
    schema = {"type": "object", "properties": {"n": {"maximum": 10}, "who": {}}, "required": ["who"]}
    task = {"id": "t", "operator": "EmptyOperator", "args": {"params": {"n": 20}}, "paramsSchema": schema}
    spec = {"schedule": "@daily", "params": {"n": 1}, "tasks": [task]}
    with pytest.raises(DagInvalid) as raised:
        resolve_dag("hand", parse_dag_spec(spec))
    message = str(raised.value)
    assert "task 't': params defaults do not satisfy paramsSchema: param 'n': 20 is greater than" in message
    assert "task 't': paramsSchema requires 'who' with no default" in message


def test_wait_for_past_depends_before_skipping_reaches_the_resolved_task() -> None:
    with DAG("waits", schedule=None, start_date=START) as built:
        BashOperator(task_id="t", bash_command="echo", depends_on_past=True,
                     wait_for_past_depends_before_skipping=True)  # fmt: skip
    spec = spec_of(built)
    assert spec["tasks"][0]["waitForPastDependsBeforeSkipping"] is True
    resolved = resolve_dag("waits", parse_dag_spec(spec))
    assert resolved.tasks["t"].wait_for_past_depends_before_skipping is True
