"""Which class runs a task: Airflow's operator names mapped to Zonda's implementations.

A DAG names its operator the way an Airflow user would (`BashOperator`), or by import path
(`pkg.mod.Class` / `pkg.mod:Class`) for user-written operators. Operators of provider packages
(Zonda's own Kubernetes-aware ones live in `controller.providers`) are registered the way Airflow's
providers are: an entry point in the `zonda.operators` group, declared in the provider's
pyproject.toml, so this module names no package above it. Nothing here imports an operator:
the controller decides and validates DAGs in an image that may not contain the user's package, so an
import path is only checked for shape; the task runner imports it where the user's code lives.
"""

from __future__ import annotations

import difflib
import functools
import re

#: Airflow-style operator name -> import path of Zonda's implementation.
BUILTIN_OPERATORS: dict[str, str] = {
    "EmptyOperator": "zonda.operators.empty.EmptyOperator",
    # Airflow's pre-2.4 name of EmptyOperator, still common in DAGs being ported.
    "DummyOperator": "zonda.operators.empty.EmptyOperator",
    "BashOperator": "zonda.operators.bash.BashOperator",
    "PythonOperator": "zonda.operators.python.PythonOperator",
    "BranchPythonOperator": "zonda.operators.python.BranchPythonOperator",
    "ShortCircuitOperator": "zonda.operators.python.ShortCircuitOperator",
    "PythonVirtualenvOperator": "zonda.operators.python.PythonVirtualenvOperator",
    "ExternalPythonOperator": "zonda.operators.python.ExternalPythonOperator",
    "BranchPythonVirtualenvOperator": "zonda.operators.python.BranchPythonVirtualenvOperator",
    "BranchExternalPythonOperator": "zonda.operators.python.BranchExternalPythonOperator",
    "BranchDateTimeOperator": "zonda.operators.datetime.BranchDateTimeOperator",
    "BranchDayOfWeekOperator": "zonda.operators.weekday.BranchDayOfWeekOperator",
    "DayOfWeekSensor": "zonda.sensors.weekday.DayOfWeekSensor",
    "BashSensor": "zonda.sensors.bash.BashSensor",
    "EmailOperator": "zonda.operators.email.EmailOperator",
    "LatestOnlyOperator": "zonda.operators.latest_only.LatestOnlyOperator",
    "KubernetesPodOperator": "zonda.operators.kubernetes_pod.KubernetesPodOperator",
    "PythonSensor": "zonda.sensors.python.PythonSensor",
    "TimeSensor": "zonda.sensors.time.TimeSensor",
    "DateTimeSensor": "zonda.sensors.time.DateTimeSensor",
    "TimeDeltaSensor": "zonda.sensors.time.TimeDeltaSensor",
    "TimeSensorAsync": "zonda.sensors.time.TimeSensorAsync",
    "DateTimeSensorAsync": "zonda.sensors.time.DateTimeSensorAsync",
    "TimeDeltaSensorAsync": "zonda.sensors.time.TimeDeltaSensorAsync",
    "FileSensor": "zonda.sensors.filesystem.FileSensor",
    "ExternalTaskMarker": "zonda.sensors.external_task.ExternalTaskMarker",
    **{
        name: f"zonda.operators.hitl.{name}"
        for name in ("HITLOperator", "ApprovalOperator", "HITLBranchOperator", "HITLEntryOperator")
    },
}
#: The entry-point group in which provider packages register their operators by name.
PROVIDER_GROUP = "zonda.operators"

#: Operators the scheduler decides by itself, without launching a Pod or a process.
NO_POD_OPERATORS = frozenset({"EmptyOperator", "DummyOperator", "ExternalTaskMarker", "LatestOnlyOperator"})
#: Of those, the ones that succeed without doing anything (Airflow 2.3+: a marker is an EmptyOperator
#: that matters only when cleared), and LatestOnly's.
EMPTY_OPERATORS = frozenset({"EmptyOperator", "DummyOperator", "ExternalTaskMarker"})
LATEST_ONLY_OPERATORS = NO_POD_OPERATORS - EMPTY_OPERATORS
#: Operators whose Pod runs the user's container rather than the Zonda task runner.
CONTAINER_OPERATORS = frozenset({"KubernetesPodOperator"})

_IDENTIFIER = r"[A-Za-z_][A-Za-z0-9_]*"
#: `pkg.mod.Class` (at least a module and a class) or `pkg.mod:Class`.
_IMPORT_PATH = re.compile(rf"^{_IDENTIFIER}(\.{_IDENTIFIER})*(\.|:){_IDENTIFIER}$")


class UnknownOperator(ValueError):
    """An operator that is neither a built-in name nor an import path."""


def is_builtin(name: str) -> bool:
    return name in BUILTIN_OPERATORS


@functools.cache
def provider_operators() -> dict[str, str]:
    """Operator name -> import path, from the installed providers' `zonda.operators` entry points.

    Read from package metadata, nothing is imported. A provider cannot shadow a built-in name.
    """
    import importlib.metadata  # only for names that are not built in: a `BashOperator` try skips it

    return {
        entry.name: entry.value.replace(":", ".")
        for entry in importlib.metadata.entry_points(group=PROVIDER_GROUP)
        if entry.name not in BUILTIN_OPERATORS
    }


def is_import_path(name: str) -> bool:
    """Whether `name` has the shape of `pkg.mod.Class` or `pkg.mod:Class` (nothing is imported)."""
    return _IMPORT_PATH.match(name) is not None


def operator_classpath(name: str) -> str:
    """The import path of the class that runs operator `name`, without importing it.

    Raises `UnknownOperator` (with close built-in names as suggestions) for anything else.
    """
    if name in BUILTIN_OPERATORS:
        return BUILTIN_OPERATORS[name]
    if name in (providers := provider_operators()):
        return providers[name]
    if is_import_path(name):
        return name
    close = difflib.get_close_matches(name, [*BUILTIN_OPERATORS, *providers], n=3)
    hint = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
    raise UnknownOperator(
        f"unknown operator {name!r}{hint}: use a built-in name such as 'BashOperator' "
        "or an import path 'pkg.module.Class'"
    )
