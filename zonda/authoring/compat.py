"""`--airflow-compat`: run unchanged Airflow 2.x and 3.x DAG files by mapping `airflow.*` imports onto Zonda.

Active only inside `airflow_imports(enabled=True)` (while rendering, and while the task runner
re-imports a DAG file) and only when a real `airflow` is not installed. A mapped module *is* the Zonda
module (`airflow.operators.bash` is `zonda.operators.bash`), so the same classes render and run.
An import Zonda cannot honour fails the file; `unsupported_imports` finds every such import of a file
before it runs, so one message names them all, each with what to use instead.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Airflow module -> the Zonda module it is.
MODULES: dict[str, str] = {
    "airflow.models.dag": "zonda.authoring.dags",
    "airflow.models.baseoperator": "zonda.operators.base",
    "airflow.models.param": "zonda.authoring.params",
    "airflow.models.xcom_arg": "zonda.authoring.taskflow",
    "airflow.decorators": "zonda.decorators",
    "airflow.operators.empty": "zonda.operators.empty",
    "airflow.operators.dummy": "zonda.operators.empty",
    "airflow.operators.dummy_operator": "zonda.operators.empty",
    "airflow.operators.bash": "zonda.operators.bash",
    "airflow.operators.bash_operator": "zonda.operators.bash",
    "airflow.operators.python": "zonda.operators.python",
    "airflow.operators.python_operator": "zonda.operators.python",
    "airflow.operators.latest_only": "zonda.operators.latest_only",
    "airflow.operators.branch": "zonda.operators.branch",
    "airflow.operators.latest_only_operator": "zonda.operators.latest_only",
    "airflow.sensors.base": "zonda.sensors.base",
    "airflow.sensors.base_sensor_operator": "zonda.sensors.base",
    "airflow.sensors.python": "zonda.sensors.python",
    "airflow.sensors.time_sensor": "zonda.sensors.time",
    "airflow.sensors.time_delta": "zonda.sensors.time",
    "airflow.sensors.date_time": "zonda.sensors.time",
    "airflow.sensors.filesystem": "zonda.sensors.filesystem",
    "airflow.utils.trigger_rule": "zonda.utils.trigger_rule",
    "airflow.utils.log.secrets_masker": "zonda.secrets_masker",
    "airflow.sdk.log": "zonda.secrets_masker",
    "airflow.utils.task_group": "zonda.utils.task_group",
    "airflow.utils.edgemodifier": "zonda.utils.edgemodifier",
    "airflow.utils.helpers": "zonda.utils.helpers",
    "airflow.utils.timezone": "zonda.utils.timezone",
    "airflow.utils.context": "zonda.context",
    "airflow.timetables.base": "zonda.timetables.base",
    "airflow.timetables.simple": "zonda.timetables.simple",
    "airflow.timetables.interval": "zonda.timetables.interval",
    "airflow.timetables.trigger": "zonda.timetables.trigger",
    "airflow.timetables.events": "zonda.timetables.events",
    "airflow.triggers.base": "zonda.triggers.base",
    "airflow.triggers.temporal": "zonda.triggers.temporal",
    "airflow.triggers.file": "zonda.triggers.file",
    "airflow.exceptions": "zonda.exceptions",
    "airflow.datasets.metadata": "zonda.authoring.assets",
    "airflow.timetables.datasets": "zonda.authoring.assets",
    "airflow.timetables.assets": "zonda.authoring.assets",
    "airflow.sdk.definitions.asset.decorators": "zonda.authoring.assets",
    "airflow.sdk.definitions.asset.metadata": "zonda.authoring.assets",
    "airflow.sdk.definitions.timetables.assets": "zonda.authoring.assets",
    "airflow.sdk.definitions.timetables.trigger": "zonda.timetables.trigger",
    **{
        f"airflow.sdk.definitions.partition_mappers.{name}": "zonda.timetables.partitions"
        for name in (
            "base",
            "identity",
            "allowed_key",
            "fixed_key",
            "product",
            "chain",
            "temporal",
            "window",
            "wait_policy",
        )
    },
    "airflow.providers.cncf.kubernetes.operators.kubernetes_pod": "zonda.operators.kubernetes_pod",
    "airflow.providers.cncf.kubernetes.operators.pod": "zonda.operators.kubernetes_pod",
    "airflow.contrib.operators.kubernetes_pod_operator": "zonda.operators.kubernetes_pod",
    "airflow.models.variable": "zonda.variables",
    "airflow.models.connection": "zonda.variables",
    "airflow.hooks.base": "zonda.variables",
    "airflow.hooks.base_hook": "zonda.variables",
    "airflow.operators.datetime": "zonda.operators.datetime",
    "airflow.operators.email": "zonda.operators.email",
    "airflow.operators.weekday": "zonda.operators.weekday",
    "airflow.sensors.weekday": "zonda.sensors.weekday",
    "airflow.sensors.bash": "zonda.sensors.bash",
    "airflow.utils.weekday": "zonda.utils.weekday",
    "airflow.configuration": "zonda.authoring.configuration",
    "airflow.io.path": "zonda.utils.object_storage",
    "airflow.models.dagrun": "zonda.authoring.airflow_names",
    "airflow.models.taskinstance": "zonda.authoring.airflow_names",
    "airflow.utils.state": "zonda.authoring.airflow_names",
    "airflow.listeners": "zonda.authoring.airflow_names",
    "airflow.task.priority_strategy": "zonda.authoring.airflow_names",
    "airflow.models.skipmixin": "zonda.operators.base",
    "airflow.utils.dag_parsing_context": "zonda.authoring.airflow_names",
    "airflow.utils.weight_rule": "zonda.authoring.airflow_names",
    "airflow.sdk.definitions.retry_policy": "zonda.tries.retry_policies",
    "airflow.providers.standard.operators.hitl": "zonda.operators.hitl",
    "airflow.providers.standard.triggers.hitl": "zonda.triggers.hitl",
    "airflow.providers.standard.exceptions": "zonda.exceptions",
    "airflow.sdk.bases.notifier": "zonda.utils.notifiers",
    "airflow.notifications.basenotifier": "zonda.utils.notifiers",
}

#: `airflow.example_dags.X` is module X of the DAGs folder when it has one (Airflow's example DAGs
#: import their helpers and plugins by that name); otherwise these, which Zonda ships (the seed pages
#: import Airflow's example timetable).
EXAMPLE_DAGS_PACKAGE = "airflow.example_dags"
EXAMPLE_DAGS_FALLBACKS: dict[str, str] = {
    "airflow.example_dags.plugins.workday": "examples.timetables.workday",
}

_STANDARD_OPERATORS = ("bash", "python", "empty", "branch", "latest_only", "trigger_dagrun", "datetime")

#: Airflow 3's standard provider (also installed on Airflow 2.9+) and the Task SDK's modules -> the Airflow 2
#: module they moved from: each is whatever that module maps to, so both spellings give the same classes.
MOVED_MODULES: dict[str, str] = {
    **{
        f"airflow.providers.standard.operators.{name}": f"airflow.operators.{name}"
        for name in (*_STANDARD_OPERATORS, "weekday")
    },
    **{
        f"airflow.providers.standard.sensors.{name}": f"airflow.sensors.{name}"
        for name in ("bash", "python", "time_delta", "date_time", "filesystem", "external_task", "weekday")
    },
    "airflow.providers.standard.sensors.time": "airflow.sensors.time_sensor",
    **{
        f"airflow.providers.standard.triggers.{name}": f"airflow.triggers.{name}"
        for name in ("temporal", "file", "external_task")
    },
    "airflow.providers.standard.utils.weekday": "airflow.utils.weekday",
    "airflow.providers.standard.utils.skipmixin": "airflow.models.skipmixin",
    "airflow.sdk.bases.operator": "airflow.models.baseoperator",
    "airflow.sdk.bases.sensor": "airflow.sensors.base",
    "airflow.sdk.bases.hook": "airflow.hooks.base",
    "airflow.sdk.definitions.dag": "airflow.models.dag",
    "airflow.sdk.definitions.param": "airflow.models.param",
    "airflow.sdk.definitions.taskgroup": "airflow.utils.task_group",
    "airflow.sdk.definitions.edges": "airflow.utils.edgemodifier",
    "airflow.sdk.definitions.context": "airflow.utils.context",
    "airflow.sdk.definitions.xcom_arg": "airflow.models.xcom_arg",
    "airflow.sdk.exceptions": "airflow.exceptions",
    "airflow.sdk.io": "airflow.io",
    "airflow.sdk.io.path": "airflow.io.path",
    "airflow.task.trigger_rule": "airflow.utils.trigger_rule",
    "airflow.sdk.timezone": "airflow.utils.timezone",
}

#: Airflow 3.2+'s partition mappers, windows and wait policies (`zonda.timetables.partitions`).
PARTITION_NAMES: dict[str, tuple[str, str]] = {
    name: ("zonda.timetables.partitions", name)
    for name in (
        "PartitionMapper", "IdentityMapper", "AllowedKeyMapper", "FixedKeyMapper", "ProductMapper",
        "ChainMapper", "RollupMapper", "FanOutMapper", "StartOfHourMapper", "StartOfDayMapper",
        "StartOfWeekMapper", "StartOfMonthMapper", "StartOfQuarterMapper", "StartOfYearMapper",
        "Window", "HourWindow", "DayWindow", "WeekWindow", "MonthWindow", "QuarterWindow", "YearWindow",
        "SegmentWindow", "WaitPolicy", "WaitForAll", "MinimumCount",
    )
}  # fmt: skip

#: Names of `airflow.sdk` (Airflow 3's authoring API) -> (the Airflow 2 module, name) Zonda maps them from.
#: Resolved when imported, so a name another part of the mapping provides later is found here too.
SDK_NAMES: dict[str, tuple[str, str]] = {
    "DAG": ("airflow.models.dag", "DAG"),
    "dag": ("airflow.decorators", "dag"),
    "task": ("airflow.decorators", "task"),
    "task_group": ("airflow.decorators", "task_group"),
    "setup": ("airflow.decorators", "setup"),
    "teardown": ("airflow.decorators", "teardown"),
    "TaskGroup": ("airflow.utils.task_group", "TaskGroup"),
    "Param": ("airflow.models.param", "Param"),
    "ParamsDict": ("airflow.models.param", "ParamsDict"),
    "Variable": ("airflow.models.variable", "Variable"),
    "Connection": ("airflow.models.connection", "Connection"),
    "BaseHook": ("airflow.hooks.base", "BaseHook"),
    "BaseOperator": ("airflow.models.baseoperator", "BaseOperator"),
    "BaseSensorOperator": ("airflow.sensors.base", "BaseSensorOperator"),
    "PokeReturnValue": ("airflow.sensors.base", "PokeReturnValue"),
    "BaseBranchOperator": ("airflow.operators.branch", "BaseBranchOperator"),
    "SkipMixin": ("airflow.models.baseoperator", "SkipMixin"),
    "chain": ("airflow.utils.helpers", "chain"),
    "cross_downstream": ("airflow.utils.helpers", "cross_downstream"),
    "chain_linear": ("airflow.utils.helpers", "chain_linear"),
    "Label": ("airflow.utils.edgemodifier", "Label"),
    "EdgeModifier": ("airflow.utils.edgemodifier", "EdgeModifier"),
    "get_current_context": ("airflow.operators.python", "get_current_context"),
    "Context": ("airflow.utils.context", "Context"),
    "TriggerRule": ("airflow.utils.trigger_rule", "TriggerRule"),
    "XComArg": ("airflow.models.xcom_arg", "XComArg"),
    "ObjectStoragePath": ("airflow.io.path", "ObjectStoragePath"),
    "CronDataIntervalTimetable": ("airflow.timetables.interval", "CronDataIntervalTimetable"),
    "DeltaDataIntervalTimetable": ("airflow.timetables.interval", "DeltaDataIntervalTimetable"),
    "CronTriggerTimetable": ("airflow.timetables.trigger", "CronTriggerTimetable"),
    "DeltaTriggerTimetable": ("airflow.timetables.trigger", "DeltaTriggerTimetable"),
    "MultipleCronTriggerTimetable": ("airflow.timetables.trigger", "MultipleCronTriggerTimetable"),
    "EventsTimetable": ("airflow.timetables.events", "EventsTimetable"),
    "AssetOrTimeSchedule": ("airflow.timetables.assets", "AssetOrTimeSchedule"),
    "Asset": ("airflow.datasets", "Asset"),
    "AssetAlias": ("airflow.datasets", "AssetAlias"),
    "AssetAll": ("airflow.datasets", "AssetAll"),
    "AssetAny": ("airflow.datasets", "AssetAny"),
    "AssetWatcher": ("airflow.datasets", "AssetWatcher"),
    "AssetAccessControl": ("zonda.authoring.assets", "AssetAccessControl"),
    "Metadata": ("airflow.datasets.metadata", "Metadata"),
    **{
        name: ("zonda.tries.retry_policies", name)
        for name in ("RetryPolicy", "RetryRule", "RetryAction", "RetryDecision", "ExceptionRetryPolicy")
    },
    "asset": ("airflow.datasets", "asset"),
    **PARTITION_NAMES,
    "CronPartitionTimetable": ("airflow.timetables.trigger", "CronPartitionTimetable"),
    "PartitionedAssetTimetable": ("zonda.authoring.assets", "PartitionedAssetTimetable"),
    "PartitionedAtRuntime": ("zonda.authoring.assets", "PartitionedAtRuntime"),
    "BaseNotifier": ("zonda.utils.notifiers", "BaseNotifier"),
    "timezone": ("airflow.utils.timezone", ""),  # a module: "" names the module itself
    "TaskInstance": ("zonda.authoring.airflow_names", "TaskInstance"),
    "TaskInstanceState": ("zonda.authoring.airflow_names", "TaskInstanceState"),
    "DagRunState": ("zonda.authoring.airflow_names", "DagRunState"),
    "WeightRule": ("zonda.authoring.airflow_names", "WeightRule"),
    "get_parsing_context": ("zonda.authoring.airflow_names", "get_parsing_context"),
    "conf": ("zonda.authoring.configuration", "conf"),
    "macros": ("zonda.tries.task_context", "MACROS"),
}

#: The standard provider's decorator modules -> their function names (`zonda.decorators`).
STANDARD_DECORATORS: dict[str, dict[str, tuple[str, str]]] = {
    f"airflow.providers.standard.decorators.{module}": {name: ("zonda.decorators", name)}
    for module, name in (
        ("python", "python_task"), ("bash", "bash_task"), ("branch_python", "branch_task"),
        ("short_circuit", "short_circuit_task"), ("sensor", "sensor_task"),
        ("python_virtualenv", "virtualenv_task"), ("external_python", "external_python_task"),
        ("branch_virtualenv", "branch_virtualenv_task"),
        ("branch_external_python", "branch_external_python_task"),
    )
}  # fmt: skip

#: The entry-point group in which providers name the Airflow modules they implement
#: (`airflow.sensors.external_task` is Zonda's Kubernetes provider): `zonda` names no provider.
PROVIDER_MODULES_GROUP = "zonda.airflow_modules"


@functools.cache
def provider_modules() -> dict[str, str]:
    """Airflow module -> the provider module it is, from the installed providers' entry points."""
    import importlib.metadata  # when a DAG file imports an Airflow module: a task's try seldom does

    return {
        entry.name: entry.value
        for entry in importlib.metadata.entry_points(group=PROVIDER_MODULES_GROUP)
        if entry.name not in MODULES
    }


#: Data-aware scheduling's names (`zonda.authoring.assets`), in both dialects.
ASSET_NAMES: dict[str, tuple[str, str]] = {
    name: ("zonda.authoring.assets", name)
    for name in (
        "Asset", "AssetAlias", "AssetAll", "AssetAny", "AssetWatcher", "Metadata", "asset", "BaseAsset",
        "Dataset", "DatasetAlias", "DatasetAll", "DatasetAny",
    )
}  # fmt: skip

#: Names of Airflow packages, each a synthetic module holding what `from airflow... import X` needs.
PACKAGE_NAMES: dict[str, dict[str, tuple[str, str]]] = {
    "airflow": {
        "DAG": ("zonda.authoring.dags", "DAG"),
    },
    "airflow.models": {
        "DAG": ("zonda.authoring.dags", "DAG"),
        "BaseOperator": ("zonda.operators.base", "BaseOperator"),
        "Param": ("zonda.authoring.params", "Param"),
        "Variable": ("zonda.variables", "Variable"),
        "Connection": ("zonda.variables", "Connection"),
        "TaskInstance": ("zonda.authoring.airflow_names", "TaskInstance"),
        "DagRun": ("zonda.authoring.airflow_names", "DagRun"),
    },
    "airflow.io": {"ObjectStoragePath": ("zonda.utils.object_storage", "ObjectStoragePath")},
    "airflow.hooks": {},
    "airflow.operators": {},
    "airflow.sensors": {},
    "airflow.utils": {},
    "airflow.utils.log": {},
    "airflow.timetables": {},
    "airflow.triggers": {},
    "airflow.providers": {},
    "airflow.providers.cncf": {},
    "airflow.providers.cncf.kubernetes": {},
    "airflow.providers.cncf.kubernetes.operators": {},
    "airflow.contrib": {},
    "airflow.contrib.operators": {},
    "airflow.example_dags": {},
    "airflow.example_dags.plugins": {},
    "airflow.plugins_manager": {"AirflowPlugin": ("zonda.authoring.compat", "AirflowPlugin")},
    "airflow.sdk": SDK_NAMES,
    # packages, as in Airflow: `airflow.datasets.metadata`, `airflow.sdk.definitions.asset.decorators`
    "airflow.datasets": ASSET_NAMES,
    "airflow.sdk.definitions.asset": ASSET_NAMES,
    "airflow.sdk.bases": {},
    "airflow.sdk.definitions": {},
    "airflow.sdk.definitions.timetables": {},
    "airflow.sdk.definitions.partition_mappers": PARTITION_NAMES,
    "airflow.task": {},
    "airflow.notifications": {},
    "airflow.providers.standard": {},
    "airflow.providers.standard.operators": {},
    "airflow.providers.standard.sensors": {},
    "airflow.providers.standard.triggers": {},
    "airflow.providers.standard.utils": {},
    "airflow.providers.standard.decorators": {},
    **STANDARD_DECORATORS,
    "airflow.providers.common": {},
    "airflow.providers.common.compat": {},
    # Airflow 3's providers import the SDK through this shim; so do some of Airflow's example DAGs.
    "airflow.providers.common.compat.sdk": SDK_NAMES,
}

#: What to use instead of an Airflow module Zonda does not provide (longest prefix wins).
ALTERNATIVES: dict[str, str] = {
    "airflow.operators.subdag": "SubDagOperator is not supported (deprecated in Airflow): use a TaskGroup",
    "airflow.example_dags.subdags": "SubDAGs are not supported (deprecated in Airflow): use a TaskGroup",
    "airflow.hooks": "only airflow.hooks.base (BaseHook.get_connection) is provided: read the Connection "
    "and use a client library",
    "airflow.providers": "only the standard provider and the cncf.kubernetes pod operator are provided: run "
    "other integrations in a KubernetesPodOperator or PythonOperator",
    "airflow.providers.standard.operators.smooth": "not supported: use an EmptyOperator",
    "airflow.sdk": "not provided by Zonda's Airflow compatibility layer (see docs/authoring.md for the "
    "airflow.sdk names Zonda maps)",
    "airflow.providers.standard": "this module of the standard provider is not provided by Zonda (see "
    "docs/authoring.md for those it maps)",
    "airflow.sdk.execution_time": "task and asset state stores need Airflow's API server: not supported",
    "airflow.sdk.NEVER_EXPIRE": "task and asset state stores need Airflow's API server: not supported",
    "airflow.sdk.ResumableJobMixin": "it keeps the job's id in a task state store, which needs Airflow's API "
    "server: not supported; make the job's submission idempotent (a deterministic name) instead",
    **{
        f"airflow.sdk.{name}": "deadline alerts (Airflow 3.1) are not supported: use dagrun_timeout or a "
        "task's execution_timeout with on_failure_callback"
        for name in (
            "DeadlineAlert",
            "DeadlineReference",
            "BaseDeadlineReference",
            "deadline_reference",
            "AsyncCallback",
            "SyncCallback",
        )
    },
    "airflow.sdk.BaseXCom": "custom XCom backends are not supported: Zonda's XCom backend is chosen on the "
    "controller (docs/xcom.md)",
    "airflow.sdk.BaseOperatorLink": "operator extra links are not supported: log the URL from the task",
    "airflow.sdk.BaseAsyncOperator": "not supported: write an async def python_callable for a PythonOperator "
    "or @task (it runs on an event loop)",
    "airflow.sdk.result": "DAG results (@result) are not supported: return the value from a task and read "
    "its XCom (zonda xcom get)",
    "airflow.sdk.literal": "not supported: keep a value from being templated with {% raw %}...{% endraw %}",
    "airflow.sdk.lineage": "lineage is not supported: declare inlets and outlets as Assets",
    "airflow.sdk.__version__": "Zonda is not Airflow: the Airflow a file is read as is its dialect "
    "(docs/authoring.md), not a version to compare",
    "airflow.sdk.BranchMixIn": "not provided: subclass BaseBranchOperator (choose_branch) instead",
    "airflow.providers.standard.operators.branch.BranchMixIn": "not provided: subclass BaseBranchOperator "
    "(choose_branch) instead",
    **{
        f"airflow.providers.standard.{name}": "operator extra links are not supported: the run's page in "
        "Zonda's UI links the runs a task triggered or waits for"
        for name in ("operators.trigger_dagrun.TriggerDagRunLink", "sensors.external_task.ExternalDagLink")
    },
    "airflow.providers.standard.operators.trigger_dagrun.DagIsPaused": "not provided: Zonda's "
    "TriggerDagRunOperator has no fail_when_dag_is_paused, so nothing raises it",
    "airflow.providers.standard.decorators.sensor.DecoratedSensorOperator": "not provided: use @task.sensor",
    "airflow.providers.standard.triggers.hitl.HITLTriggerEventSuccessPayload": "not provided: the HITL "
    "task's XCom is that payload as a dict (docs/authoring.md, Human in the loop)",
    "airflow.providers.standard.triggers.hitl.HITLTriggerEventFailurePayload": "not provided: a failed "
    "request fails the task with HITLTimeoutError or HITLTriggerEventError",
    "airflow.providers.standard.utils.python_virtualenv": "the provider's internals: use "
    "PythonVirtualenvOperator or @task.virtualenv, which build the virtualenv where the task runs",
    "airflow.providers.standard.utils.sensor_helper": "the provider's internals (ExternalTaskSensor's "
    "database queries): use ExternalTaskSensor",
    "airflow.providers.standard.utils.openlineage": "OpenLineage is not supported",
    "airflow.providers.standard.decorators.stub": "@task.stub (a task another language's SDK runs) is not "
    "supported: run that language's image with @task.kubernetes or a KubernetesPodOperator",
    "airflow": "not provided by Zonda's Airflow compatibility layer",
}


class AirflowPlugin:
    """Airflow's plugin registration: Zonda needs none (a DAG names its timetable class directly)."""

    name = ""


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, target: str | None) -> None:
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        if self.target is not None:
            return importlib.import_module(self.target)
        module = types.ModuleType(spec.name)
        module.__path__ = []
        names = PACKAGE_NAMES[spec.name]

        def resolve(name: str) -> Any:  # PEP 562: each name imported when first used
            if name not in names:
                raise AttributeError(f"module {spec.name!r} has no attribute {name!r}")
            module_name, attribute = names[name]
            try:
                imported = importlib.import_module(module_name)
                value = getattr(imported, attribute) if attribute else imported
            except (ImportError, AttributeError):
                raise AttributeError(f"module {spec.name!r} has no attribute {name!r}") from None
            setattr(module, name, value)
            return value

        module.__getattr__ = resolve  # type: ignore[method-assign]
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        """Nothing to run: the module is Zonda's, already imported."""


class _AirflowFinder(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != "airflow" and not fullname.startswith("airflow."):
            return None
        alias = _alias(fullname) or _dags_folder_module(fullname)
        if alias is not None:
            return importlib.machinery.ModuleSpec(fullname, _AliasLoader(alias))
        if fullname in PACKAGE_NAMES:
            return importlib.machinery.ModuleSpec(fullname, _AliasLoader(None), is_package=True)
        raise ModuleNotFoundError(unsupported_message(fullname), name=fullname)


def _alias(fullname: str) -> str | None:
    """The Zonda module an Airflow module is, following a moved module to its Airflow 2 name."""
    name = MOVED_MODULES.get(fullname, fullname)
    return MODULES.get(name) or provider_modules().get(name)


def module_for(fullname: str) -> str:
    """The module an import path names once Airflow's names are mapped (a DAGs-folder module for
    `airflow.example_dags.X`, Zonda's for the rest); other paths unchanged."""
    if not _is_airflow(fullname):
        return fullname
    return _dags_folder_module(fullname) or _alias(fullname) or fullname


def _dags_folder_module(fullname: str) -> str | None:
    """`airflow.example_dags.libs.helper` -> `libs.helper`, found on `sys.path` (the DAGs folder first)."""
    if not fullname.startswith(EXAMPLE_DAGS_PACKAGE + "."):
        return None
    local = fullname[len(EXAMPLE_DAGS_PACKAGE) + 1 :]
    try:
        found = importlib.util.find_spec(local)
    except (ImportError, ValueError):
        found = None
    if found is not None and not _is_airflow(local):
        return local
    return EXAMPLE_DAGS_FALLBACKS.get(fullname)


def unsupported_message(module: str, name: str | None = None) -> str:
    subject = f"{module}.{name}" if name else module
    hint = next(
        (ALTERNATIVES[prefix] for prefix in sorted(ALTERNATIVES, key=len, reverse=True)
         if subject == prefix or subject.startswith(prefix + ".")),
        ALTERNATIVES["airflow"],
    )  # fmt: skip
    return f"{subject} is not supported by Zonda: {hint}"


def wanted(path: Path) -> bool:
    """Whether a DAG file needs the mapping: it imports `airflow` and no real Airflow is installed."""
    if _real_airflow_installed():
        return False
    try:
        return bool(_airflow_imports(path.read_text()))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return False


def _real_airflow_installed() -> bool:
    if any(isinstance(finder, _AirflowFinder) for finder in sys.meta_path):
        return False
    return importlib.util.find_spec("airflow") is not None


@contextlib.contextmanager
def airflow_imports(*, enabled: bool, dialect: Dialect | None = None) -> Iterator[None]:
    """Map `airflow.*` onto Zonda inside the block; the `airflow` modules are forgotten afterwards.

    DAGs created inside get `dialect`'s semantics (`zonda.authoring.contexts.reading_as`)."""
    from zonda.authoring import contexts

    if not enabled:
        yield
        return
    finder = _AirflowFinder()
    sys.meta_path.insert(0, finder)
    try:
        with contexts.reading_as(dialect.version if dialect is not None else None):
            yield
    finally:
        sys.meta_path.remove(finder)
        for name in [n for n in sys.modules if n == "airflow" or n.startswith("airflow.")]:
            del sys.modules[name]


def install_unless_airflow_is_installed() -> bool:
    """Map `airflow.*` for the rest of the process (the task runner's): True if it was installed.

    A task may import an operator class from an unchanged Airflow DAG file (`dags.etl.MyOperator`),
    which imports `airflow`; without a real Airflow, that import gets Zonda's modules, as it did when
    the file was rendered.
    """
    if any(isinstance(finder, _AirflowFinder) for finder in sys.meta_path):
        return True
    if importlib.util.find_spec("airflow") is not None:
        return False
    sys.meta_path.insert(0, _AirflowFinder())
    return True


@contextlib.contextmanager
def on_sys_path(entry: Path) -> Iterator[None]:
    """Put the DAGs folder (or zip) first on `sys.path` while loading, as Airflow does (the DAG-file
    loader and the import check share it)."""
    text = str(entry)
    added = text not in sys.path
    if added:
        sys.path.insert(0, text)
    try:
        yield
    finally:
        if added and text in sys.path:
            sys.path.remove(text)


def _airflow_imports(source: str | ast.AST) -> list[tuple[int, str, str | None]]:
    """(line, module, name or None) of each `airflow` import in the source."""
    found: list[tuple[int, str, str | None]] = []
    for node in _runtime_nodes(ast.parse(source) if isinstance(source, str) else source):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name, None) for a in node.names if a.name.split(".")[0] == "airflow"]
        elif (
            isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and _is_airflow(node.module)
        ):
            found += [(node.lineno, node.module, a.name) for a in node.names]
    return found


def _runtime_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node but those under `if TYPE_CHECKING:` (imports for type checkers never run)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                stack.extend(child.orelse)
                continue
            stack.append(child)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _is_airflow(module: str) -> bool:
    return module.split(".")[0] == "airflow"


def unsupported_imports(source: str, folder: Path | None = None) -> list[str]:
    """Every `airflow` import of a DAG file that the mapping cannot satisfy, as "line N: message".

    `folder` is the DAGs folder, on `sys.path` while checking as while loading (its helper modules
    are `airflow.example_dags.*`).
    """
    problems: list[str] = []
    on_path = contextlib.nullcontext() if folder is None else on_sys_path(folder)
    with on_path, airflow_imports(enabled=True):
        for line, module, name in _airflow_imports(source):
            try:
                imported: Any = importlib.import_module(module)
            except ImportError as error:
                problems.append(f"line {line}: {error}")
                continue
            if name is None or name == "*" or hasattr(imported, name):
                continue
            if f"{module}.{name}" in MODULES or f"{module}.{name}" in PACKAGE_NAMES:
                continue
            with contextlib.suppress(ImportError):  # `from package import submodule`
                importlib.import_module(f"{module}.{name}")
                continue
            problems.append(f"line {line}: {unsupported_message(module, name)}")
    return problems


# ------------------------------------------------------------------------------------ dialects

#: `--airflow-version`: the Airflow whose semantics every Airflow file gets, instead of its imports'.
AIRFLOW_VERSIONS = ("2", "3")
#: Imports only Airflow 3 has.
AIRFLOW3_ONLY_MODULES = ("airflow.sdk",)
#: Imports Airflow 3 removed (it keeps some as deprecated shims): a file using them was written for 2.
AIRFLOW2_MODULES = (
    "airflow.decorators", "airflow.operators", "airflow.sensors", "airflow.models", "airflow.utils.dates",
    "airflow.datasets", "airflow.contrib",
)  # fmt: skip
#: DAG arguments and context names Airflow 3 removed.
AIRFLOW2_ARGUMENTS = ("schedule_interval", "concurrency", "sla_miss_callback")
AIRFLOW2_CONTEXT_NAMES = (
    "execution_date", "next_ds", "prev_ds", "tomorrow_ds", "yesterday_ds", "next_execution_date",
    "prev_execution_date",
)  # fmt: skip


@dataclass(frozen=True)
class Dialect:
    """Which Airflow a DAG file is read as ("2" or "3"), and why (shown by `zonda dags render --report`)."""

    version: str
    reason: str


def _is_within(module: str, prefixes: Sequence[str]) -> bool:
    return any(module == prefix or module.startswith(prefix + ".") for prefix in prefixes)


def file_dialect(source: str, *, forced: str | None = None) -> Dialect | None:
    """The Airflow a file was written for, from what it imports and uses; None if it imports no `airflow`.

    Any `airflow.sdk` import makes it Airflow 3. Otherwise the first Airflow-2-only import, DAG argument
    (`schedule_interval`) or context name in a string (`execution_date`, `next_ds`...) makes it Airflow 2,
    and a file with neither (`from airflow import DAG` and the standard provider) is read as Airflow 2 too,
    Zonda's semantics before Airflow 3. `forced` (`--airflow-version`) overrides all of it.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    imports = _airflow_imports(tree)
    if not imports:
        return None
    if forced is not None:
        return Dialect(forced, f"--airflow-version {forced}")
    for line, module, _ in imports:
        if _is_within(module, AIRFLOW3_ONLY_MODULES):
            return Dialect("3", f"line {line}: imports {module}")
    for line, module, _ in imports:
        if _is_within(module, AIRFLOW2_MODULES):
            return Dialect("2", f"line {line}: imports {module}")
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg in AIRFLOW2_ARGUMENTS:
            return Dialect("2", f"line {node.value.lineno}: {node.arg}=")
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            used = next((name for name in AIRFLOW2_CONTEXT_NAMES if name in node.value), None)
            if used is not None:
                return Dialect("2", f"line {node.lineno}: uses {used}")
    return Dialect("2", "no Airflow 3-only import (airflow.sdk)")
