"""How a DAG file's Python values and functions are written into its manifest (JSON and references).

Split from `zonda.authoring.manifests` (which lays out the DAG, its tasks and groups): this is the
part that turns one value into JSON, reporting what cannot be written. A function becomes a
reference the task runner can follow: `pkg.module:function` when it lives in an importable module,
else (defined in a DAG file, nested in `@dag`, a lambda) `dagfile:<path in the DAGs folder>?dag_id=..
&task_id=..`, and the runner re-imports that DAG file and takes the function from the task, as
Airflow's workers do.
"""

from __future__ import annotations

import datetime as dt
import enum
import math
import urllib.parse
from collections.abc import Callable, Mapping
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Any

from zonda.resources.durations import format_duration
from zonda.specs import mapped_groups, mapping

if TYPE_CHECKING:
    from zonda.authoring.dags import DAG
    from zonda.operators.base import BaseOperator

#: Scheme of a callable reference into a DAG file (see the module docstring).
DAG_FILE_SCHEME = "dagfile:"
#: Modules created by importing DAG files (`zonda.authoring.dag_files` adds to it).
DAG_FILE_MODULES: set[str] = set()
_DURATION_FIELDS = {"retry_delay", "max_retry_delay", "execution_timeout", "sla"}


class ValueWriter:
    """Writes one DAG's values as manifest JSON; `errors` collects what cannot be written, in sentences
    a user can act on (`zonda.authoring.manifests` raises them together)."""

    def __init__(self, dag: DAG, dags_folder: Path | None) -> None:
        self.dag = dag
        self.dags_folder = dags_folder
        self.errors: list[str] = []
        self.relative_file = _relative(dag.fileloc, dags_folder)

    def importables(self, values: Mapping[str, Any], where: str, kind: str) -> dict[str, str]:
        """User-defined macros or filters as the task runner finds them: `pkg.module:name` when importable,
        else (a lambda, a constant, anything the DAG file defines) `dagfile:<file>?dag_id=..&<kind>=name`,
        which the runner follows by importing the DAG file, as for a `python_callable`."""
        paths: dict[str, str] = {}
        for name, value in values.items():
            module = getattr(value, "__module__", None) or ""
            qualname = getattr(value, "__qualname__", "")
            in_dag_file = not module or module == "__main__" or module in DAG_FILE_MODULES
            if callable(value) and not in_dag_file and "<" not in qualname and "." not in qualname:
                paths[str(name)] = f"{module}:{qualname}"
            elif self.relative_file is None:
                self.errors.append(
                    f"{where}.{name}: {qualname or type(value).__name__} is not importable "
                    "(pkg.module:name), so the task runner re-imports the DAG file, but "
                    f"{self.dag.fileloc!r} is not inside the DAGs folder {str(self.dags_folder)!r}"
                )
            else:
                query = urllib.parse.urlencode({"dag_id": self.dag.dag_id, kind: name})
                paths[str(name)] = f"{DAG_FILE_SCHEME}{self.relative_file}?{query}"
        return paths

    def field(self, name: str, value: Any, where: str) -> Any:
        if name in _DURATION_FIELDS and value is not None:
            if isinstance(value, int | float) and not isinstance(value, bool):
                value = dt.timedelta(seconds=value)
            if isinstance(value, dt.timedelta):
                return format_duration(value)
        if isinstance(value, enum.Enum):
            return value.value
        return self.json(value, f"{where} {name}")

    def executor_config(self, config: Any, where: str) -> dict[str, Any]:
        """Airflow's `executor_config`: `pod_override` (a dict or a kubernetes-client V1Pod), or the old
        `{"KubernetesExecutor": {"image": ...}}` form."""
        result: dict[str, Any] = {}
        if not isinstance(config, Mapping):
            self.errors.append(f"{where}: executor_config must be a dict")
            return result
        pod = config.get("pod_override")
        if pod is not None:
            result["pod_override"] = self.json(_from_openapi_model(pod), where)
        legacy = config.get("KubernetesExecutor")
        if isinstance(legacy, Mapping):
            container = {key: legacy[key] for key in ("image", "resources", "env") if key in legacy}
            if container:
                result["container"] = self.json(container, where)
        return result

    def task_params(self, value: Any, where: str) -> tuple[Any, Any]:
        """A task's `params`: the default values (a `Param` without one left out, as for the DAG's)
        and the JSON schema of its `Param`s (None when it has none)."""
        from zonda.authoring.params import ParamValidationError, params_schema, resolve_params

        if not isinstance(value, Mapping):
            return self.json(value, f"{where} argument 'params'"), None
        try:
            defaults = resolve_params(dict(value))
        except ParamValidationError as error:
            self.errors.append(f"{where}: {error}")
            return None, None
        schema = params_schema(dict(value))
        return self.json(defaults, f"{where} params"), self.json(schema, f"{where} params")

    def group_argument(self, value: Any, where: str, task: BaseOperator | None) -> dict[str, str]:
        """A mapped task group's parameter, used by a task inside that group only."""
        group = getattr(task, "task_group", None)
        if task is None or group is None or value.group not in group.chain():
            self.errors.append(f"{where}: {value!r} is used outside its mapped task group")
        return mapped_groups.group_argument(value.name)

    def map_callable(self, function: Callable[..., Any], where: str, task: BaseOperator | None) -> str | None:
        """An `XComArg.map()` function: `pkg.mod:fn` when importable, else its position among the task's
        `.map()` functions, which the runner finds by importing the DAG file (lambdas too)."""
        module = getattr(function, "__module__", None) or ""
        qualname = getattr(function, "__qualname__", "")
        if "<" not in qualname and module and module != "__main__" and module not in DAG_FILE_MODULES:
            return f"{module}:{qualname}"
        functions = getattr(task, "map_functions", [])
        if task is None or function not in functions or self.relative_file is None:
            self.errors.append(
                f"{where}: the .map() function {qualname or function!r} must be importable "
                "(pkg.module:function) or defined in a DAG file inside the DAGs folder"
            )
            return None
        query = urllib.parse.urlencode(
            {"dag_id": self.dag.dag_id, "task_id": task.task_id, "map": functions.index(function)}
        )
        return f"{DAG_FILE_SCHEME}{self.relative_file}?{query}"

    def json(self, value: Any, where: str, *, task: BaseOperator | None = None, argument: str = "") -> Any:
        from zonda.authoring.mapped import MapXComArg, ZipXComArg
        from zonda.authoring.params import NOTSET, Param
        from zonda.authoring.task_groups import MappedArgument
        from zonda.authoring.taskflow import XComArg

        if value is None or isinstance(value, bool | int | str):
            return value
        if isinstance(value, float):
            if not math.isfinite(value):
                self.errors.append(f"{where}: {value} cannot be written as JSON")
            return value
        if isinstance(value, MapXComArg):
            path = self.map_callable(value.function, where, task)
            return mapping.map_source(self.json(value.source, where, task=task), path or "")
        if isinstance(value, ZipXComArg):
            sources = [self.json(source, where, task=task) for source in value.sources]
            return mapping.zip_source(*sources, fillvalue=self.json(value.fillvalue, where), fill=value.fill)
        if isinstance(value, XComArg):
            return value.to_reference()
        if isinstance(value, MappedArgument):
            return self.group_argument(value, where, task)
        if isinstance(value, Param):  # task-level params, as DAG-level ones: the checked value
            try:
                return self.json(value.resolve() if value.value is not NOTSET else None, where)
            except ValueError as error:
                self.errors.append(f"{where}: {error}")
                return None
        if isinstance(value, enum.Enum):
            return value.value
        if isinstance(value, dt.datetime):
            return utc_iso(value)
        if isinstance(value, dt.date | dt.time):
            return value.isoformat()
        if isinstance(value, dt.timedelta):
            return format_duration(value)
        if isinstance(value, PurePath):  # a path argument (`venv_cache_path=Path(...)`): its text
            return str(value)
        if isinstance(value, Mapping):
            return {str(key): self.json(item, where, task=task) for key, item in value.items()}
        if isinstance(value, list | tuple | set | frozenset):
            items = sorted(value, key=repr) if isinstance(value, set | frozenset) else value
            return [self.json(item, where, task=task) for item in items]
        if callable(value):
            return self.callable_reference(value, where, task=task, argument=argument)
        self.errors.append(f"{where}: a {type(value).__name__} cannot be written to the manifest")
        return None

    def callbacks(self, value: Any, where: str, query: Mapping[str, str] | None) -> list[str]:
        """Airflow's callback argument (one callable or a list) as references the runner follows: import
        paths, or `dagfile:` references (`query` says where in the DAG file; None: must be importable)."""
        functions = list(value) if isinstance(value, list | tuple) else [value]
        references: list[str] = []
        for index, function in enumerate(functions):
            module = getattr(function, "__module__", None) or ""
            qualname = getattr(function, "__qualname__", "")
            if not callable(function):
                self.errors.append(f"{where}: {function!r} is not callable")
            elif (
                qualname  # an object (a notifier) has none: only the DAG file holds it, with its state
                and "<" not in qualname
                and module
                and module != "__main__"
                and module not in DAG_FILE_MODULES
            ):
                references.append(f"{module}:{qualname}")
            elif query is None or self.relative_file is None:
                self.errors.append(
                    f"{where}: {qualname or function!r} is defined in a DAG file or nested; here it must be "
                    "importable (pkg.module:function), or the DAG file inside the DAGs folder"
                )
            else:
                encoded = urllib.parse.urlencode({"dag_id": self.dag.dag_id, **query, "index": index})
                references.append(f"{DAG_FILE_SCHEME}{self.relative_file}?{encoded}")
        return references

    def callable_reference(
        self, function: Callable[..., Any], where: str, *, task: BaseOperator | None, argument: str
    ) -> str | None:
        module = getattr(function, "__module__", None) or ""
        qualname = getattr(function, "__qualname__", "")
        if "<" not in qualname and module and module != "__main__" and module not in DAG_FILE_MODULES:
            return f"{module}:{qualname}"
        if task is None or argument != "python_callable":
            self.errors.append(
                f"{where}: {qualname or function!r} is defined in a DAG file or nested; only python_callable "
                "may be such a function, other callables must be importable (pkg.module:function)"
            )
            return None
        if self.relative_file is None:
            self.errors.append(
                f"{where}: {qualname} is defined in a DAG file or nested, so the task runner re-imports the "
                f"DAG file, but {self.dag.fileloc!r} is not inside the DAGs folder {str(self.dags_folder)!r}"
            )
            return None
        query = urllib.parse.urlencode({"dag_id": self.dag.dag_id, "task_id": task.task_id})
        return f"{DAG_FILE_SCHEME}{self.relative_file}?{query}"


def _from_openapi_model(value: Any) -> Any:
    """A Kubernetes client model (`k8s.V1Pod(...)`) as the API's camelCase dict; other values as they are.

    Generated clients give every model `openapi_types` and `attribute_map` (snake_case -> camelCase);
    their own `to_dict()` keeps snake_case, which the apiserver would not accept.
    """
    if hasattr(value, "openapi_types") and hasattr(value, "attribute_map"):
        return {
            value.attribute_map[name]: _from_openapi_model(getattr(value, name))
            for name in value.openapi_types
            if getattr(value, name) is not None
        }
    if isinstance(value, list | tuple):
        return [_from_openapi_model(item) for item in value]
    if isinstance(value, dict):
        return {key: _from_openapi_model(item) for key, item in value.items()}
    return value


def _relative(fileloc: str, dags_folder: Path | None) -> str | None:
    if not fileloc or dags_folder is None:
        return None
    try:
        return Path(fileloc).resolve().relative_to(dags_folder.resolve()).as_posix()
    except ValueError:
        return None


def utc_iso(moment: dt.datetime) -> str:
    """RFC 3339 in UTC; the year always four digits (`strftime("%Y")` writes year 1 as "1": Airflow's
    example_outlet_event_extra starts at `datetime.min`)."""
    aware = moment if moment.tzinfo is not None else moment.replace(tzinfo=dt.UTC)
    return (
        aware.astimezone(dt.UTC).replace(tzinfo=None).isoformat(timespec="seconds")
        + (f".{aware.microsecond:06d}" if aware.microsecond else "")
        + "Z"
    )
