"""Names Zonda wrote into the cluster before the move still load: the move must not strand a run.

Resources outlive a release: a Trigger resource keeps the class path its deferred try serialized
(`spec.classpath`), a DagRun in flight keeps invocations naming operators and triggers, a DAG
rendered from a Python file keeps its operators' and timetable's `module.Class`, a pod or a local
try started before an upgrade runs `python -m controller.runner`. The lists below are what main
wrote at commit 0c980a8 (the last commit before the move), taken from that commit's sources:
`git show 0c980a8:<file>` for every `serialize()` classpath literal, `operator_registry`'s built-ins,
pyproject's entry points, the classes of zonda/operators, sensors, triggers, timetables and
controller/providers (what `zonda dags render` writes as `f"{klass.__module__}.{klass.__qualname__}"`),
and the runner's module. Each is loaded by the code that loads it in production. A path dropped
here needs a shim, not an edit of this list.
"""

from __future__ import annotations

import importlib
import importlib.util
import tomllib

import pytest
import yaml

from controller.executors.local_forkserver import RUNNER_MODULE
from tests.paths import REPO_ROOT
from zonda.operators.base import BaseOperator
from zonda.specs import operator_registry
from zonda.specs.imports import import_string
from zonda.timetables import Timetable
from zonda.triggers.base import import_trigger_class

#: `spec.classpath` of Trigger resources (and a deferred try's `trigger_classpath`): the literals of
#: every `serialize()` at 0c980a8, and the other trigger classes a user's sensor could defer to.
TRIGGER_CLASSPATHS = [
    "zonda.triggers.temporal.DateTimeTrigger",  # TimeDeltaTrigger serializes as it too
    "zonda.triggers.temporal.TimeDeltaTrigger",
    "zonda.triggers.file.FileTrigger",
    "zonda.triggers.file.FileDeleteTrigger",
    "zonda.triggers.file.DirectoryFileDeleteTrigger",
    "controller.providers.kubernetes.triggers.ObjectConditionTrigger",
    "controller.providers.kubernetes.dagrun_triggers.DagStateTrigger",
    "controller.providers.kubernetes.dagrun_triggers.WorkflowTrigger",
]

#: Operator paths in DAG specs and invocations: operator_registry.BUILTIN_OPERATORS' values, the
#: `zonda.operators` entry points (colon form, as pyproject declared them), and every operator class
#: a rendered DAG names by `module.Class`.
OPERATOR_CLASSPATHS = [
    "zonda.operators.base.BaseOperator",
    "zonda.operators.bash.BashOperator",
    "zonda.operators.branch.BaseBranchOperator",
    "zonda.operators.container.ContainerOperator",
    "zonda.operators.empty.EmptyOperator",
    "zonda.operators.kubernetes_pod.KubernetesPodOperator",
    "zonda.operators.latest_only.LatestOnlyOperator",
    "zonda.operators.python.PythonOperator",
    "zonda.operators.python.BranchPythonOperator",
    "zonda.operators.python.ShortCircuitOperator",
    "zonda.sensors.base.BaseSensorOperator",
    "zonda.sensors.external_task.ExternalTaskMarker",
    "zonda.sensors.filesystem.FileSensor",
    "zonda.sensors.python.PythonSensor",
    "zonda.sensors.time.TimeSensor",
    "zonda.sensors.time.TimeSensorAsync",
    "zonda.sensors.time.DateTimeSensor",
    "zonda.sensors.time.DateTimeSensorAsync",
    "zonda.sensors.time.TimeDeltaSensor",
    "zonda.sensors.time.TimeDeltaSensorAsync",
    "controller.providers.kubernetes.sensors:WaitForObjectSensor",
    "controller.providers.kubernetes.trigger_dagrun:TriggerDagRunOperator",
    "controller.providers.kubernetes.external_task:ExternalTaskSensor",
    "controller.providers.kubernetes.sensors.WaitForObjectSensor",
    "controller.providers.kubernetes.trigger_dagrun.TriggerDagRunOperator",
    "controller.providers.kubernetes.external_task.ExternalTaskSensor",
]

#: Operator names DAG specs use, resolved by the registry (BUILTIN_OPERATORS and the entry points).
OPERATOR_NAMES = [
    "EmptyOperator",
    "DummyOperator",
    "BashOperator",
    "PythonOperator",
    "BranchPythonOperator",
    "ShortCircuitOperator",
    "LatestOnlyOperator",
    "KubernetesPodOperator",
    "PythonSensor",
    "TimeSensor",
    "DateTimeSensor",
    "TimeDeltaSensor",
    "TimeSensorAsync",
    "DateTimeSensorAsync",
    "TimeDeltaSensorAsync",
    "FileSensor",
    "ExternalTaskMarker",
    "WaitForObjectSensor",
    "TriggerDagRunOperator",
    "ExternalTaskSensor",
]

#: `schedule.class` of DAGs rendered from Python files (the timetable classes of zonda/timetables).
TIMETABLE_CLASSPATHS = [
    "zonda.timetables.events.EventsTimetable",
    "zonda.timetables.interval.CronDataIntervalTimetable",
    "zonda.timetables.interval.DeltaDataIntervalTimetable",
    "zonda.timetables.simple.NullTimetable",
    "zonda.timetables.simple.OnceTimetable",
    "zonda.timetables.simple.ContinuousTimetable",
    "zonda.timetables.trigger.CronTriggerTimetable",
]

#: Modules `--airflow-compat` maps Airflow's onto (zonda/authoring/compat.py at 0c980a8): DAG files
#: import them, and so may users directly.
COMPAT_MODULES = [
    "zonda.authoring.dags",
    "zonda.authoring.params",
    "zonda.authoring.taskflow",
    "zonda.context",
    "zonda.decorators",
    "zonda.exceptions",
    "zonda.operators.base",
    "zonda.operators.bash",
    "zonda.operators.branch",
    "zonda.operators.empty",
    "zonda.operators.kubernetes_pod",
    "zonda.operators.latest_only",
    "zonda.operators.python",
    "zonda.sensors.base",
    "zonda.sensors.filesystem",
    "zonda.sensors.python",
    "zonda.sensors.time",
    "zonda.timetables.base",
    "zonda.timetables.events",
    "zonda.timetables.interval",
    "zonda.timetables.simple",
    "zonda.timetables.trigger",
    "zonda.triggers.base",
    "zonda.triggers.file",
    "zonda.triggers.temporal",
    "zonda.utils.edgemodifier",
    "zonda.utils.helpers",
    "zonda.utils.task_group",
    "zonda.utils.trigger_rule",
    "zonda.variables",
]


@pytest.mark.parametrize("classpath", TRIGGER_CLASSPATHS)
def test_a_stored_trigger_classpath_loads_in_the_triggerer(classpath: str) -> None:
    import_trigger_class(classpath)  # what load_trigger does with a Trigger resource's spec


@pytest.mark.parametrize("classpath", OPERATOR_CLASSPATHS)
def test_a_stored_operator_path_loads_in_the_runner(classpath: str) -> None:
    operator = import_string(operator_registry.operator_classpath(classpath))
    assert isinstance(operator, type) and issubclass(operator, BaseOperator)


@pytest.mark.parametrize("name", OPERATOR_NAMES)
def test_a_stored_operator_name_resolves_to_a_class_that_loads(name: str) -> None:
    operator = import_string(operator_registry.operator_classpath(name))
    assert isinstance(operator, type) and issubclass(operator, BaseOperator)


@pytest.mark.parametrize("classpath", TIMETABLE_CLASSPATHS)
def test_a_stored_timetable_class_loads(classpath: str) -> None:
    timetable = import_string(classpath)
    assert isinstance(timetable, type) and issubclass(timetable, Timetable)


@pytest.mark.parametrize("module", COMPAT_MODULES)
def test_a_module_airflow_compat_maps_onto_still_imports(module: str) -> None:
    importlib.import_module(module)


def test_pods_and_local_tries_still_run_the_runner_module() -> None:
    """Pods in flight run `python -m controller.runner` (so does a local try): it must stay runnable,
    and new pods keep the command so a controller of either version adopts the others' tries."""
    assert RUNNER_MODULE == "controller.runner"
    assert importlib.util.find_spec("controller.runner.__main__") is not None
    # the pod builder's golden file (tests/unit/controller/executors/test_pod_snapshot.py) pins it
    golden = REPO_ROOT / "tests" / "unit" / "controller" / "executors" / "golden" / "runner_pod.yaml"
    container = yaml.safe_load(golden.read_text())["spec"]["containers"][0]
    assert container["command"] == ["python", "-m", "controller.runner"]


def entry_points() -> list[tuple[str, str, str]]:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    found = [("scripts", name, value) for name, value in project["scripts"].items()]
    for group, entries in project["entry-points"].items():
        found += [(group, name, value) for name, value in entries.items()]
    return found


def test_pyproject_declares_the_entry_points_main_had() -> None:
    assert {(group, name) for group, name, _ in entry_points()} >= {
        ("scripts", "zonda"),
        ("scripts", "kubectl-zonda"),
        ("zonda.operators", "WaitForObjectSensor"),
        ("zonda.operators", "TriggerDagRunOperator"),
        ("zonda.operators", "ExternalTaskSensor"),
        ("zonda.airflow_modules", "airflow.operators.trigger_dagrun"),
        ("zonda.airflow_modules", "airflow.sensors.external_task"),
        ("zonda.airflow_modules", "airflow.sensors.external_task_sensor"),
        ("zonda.airflow_modules", "airflow.triggers.external_task"),
        ("zonda.dag_test", "runs"),
    }


@pytest.mark.parametrize(("group", "name", "value"), entry_points(), ids=lambda v: str(v))
def test_every_entry_point_of_pyproject_imports(group: str, name: str, value: str) -> None:
    module_name, _, attribute = value.partition(":")
    module = importlib.import_module(module_name)
    if attribute:
        assert callable(getattr(module, attribute)), f"{group} {name} = {value}"
