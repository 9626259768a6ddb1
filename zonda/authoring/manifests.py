"""Compile a `DAG` object into the `DAG` resource the controller runs: deterministic YAML, sorted keys.

What a task was given in the DAG file becomes its spec: Airflow's scheduler arguments (`retries`,
`trigger_rule`, ...) become task fields, the operator's own arguments become `args` (JSON), DAG and
task-group `default_args` become `defaultArgs`. A function becomes a reference the task runner can
follow: `pkg.module:function` when it lives in an importable module, else (defined in a DAG file,
nested in `@dag`, a lambda) `dagfile:<path in the DAGs folder>?dag_id=..&task_id=..`, and the runner
re-imports that DAG file and takes the function from the task, as Airflow's workers do.

The manifest is validated with the same `resolve_dag` the controller uses, so a file renders only
if the controller would accept it.
"""

from __future__ import annotations

import datetime as dt
import enum
import math
import urllib.parse
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from zonda import mapped_groups, mapping, names, operator_registry
from zonda.authoring.relations import Node
from zonda.authoring.task_groups import TaskGroup
from zonda.dags import TASK_CALLBACKS, parse_dag_spec, resolve_dag
from zonda.durations import format_duration
from zonda.models import API_VERSION, TaskDefaults
from zonda.operators.base import SCHEDULER_ARGUMENTS
from zonda.operators.container import ContainerOperator
from zonda.wire import ANNOTATION_DAG_ID

if TYPE_CHECKING:
    from zonda.authoring.dags import DAG
    from zonda.operators.base import BaseOperator

#: Label on every rendered DAG: `zonda dags apply --prune` deletes only DAGs carrying it.
MANAGED_BY_LABEL = ("app.kubernetes.io/managed-by", "zonda-dags")
DAG_ID_ANNOTATION = ANNOTATION_DAG_ID
DAG_FILE_ANNOTATION = "zonda.dev/dag-file"
#: Scheme of a callable reference into a DAG file (see the module docstring).
DAG_FILE_SCHEME = "dagfile:"

_DEFAULT_FIELDS = set(TaskDefaults.model_fields) - {"args", "container", "pod_override"}
_DURATION_FIELDS = {"retry_delay", "max_retry_delay", "execution_timeout", "sla"}
#: Modules created by importing DAG files (`zonda.authoring.dag_files` adds to it).
DAG_FILE_MODULES: set[str] = set()
#: Operator arguments Zonda accepts and does not act on, with what to do instead (for `--report`).
UNSUPPORTED_TASK_ARGUMENTS = {
    "pre_execute": "not run; put the code in the task",
    "post_execute": "not run; put the code in the task",
    "email": "e-mail is not sent",
    "email_on_failure": "e-mail is not sent",
    "email_on_retry": "e-mail is not sent",
    "run_as_user": "set securityContext through executor_config's pod_override",
}
_CONTAINER_OPERATOR_ARGUMENTS = {"image", "command", "args", "env", "container"}

#: `BUILTIN_OPERATORS` reversed: the first (canonical) name of each class.
_BUILTIN_NAMES: dict[str, str] = {}
for _name, _path in operator_registry.BUILTIN_OPERATORS.items():
    _BUILTIN_NAMES.setdefault(_path, _name)


class ManifestError(ValueError):
    """A DAG that cannot be written as a manifest; `errors` are sentences a user can act on."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors


def resource_name(dag_id: str) -> str:
    """The DAG resource's name: the dag id lower-cased, with `_` and other characters as `-`."""
    try:
        return names.dag_resource_name(dag_id)
    except ValueError as exc:
        raise ManifestError([str(exc)]) from exc


def dag_manifest(dag: DAG, *, dags_folder: Path | None = None) -> dict[str, Any]:
    """The DAG resource for `dag`, validated as the controller validates it; raises `ManifestError`."""
    compiler = _Compiler(dag, dags_folder)
    spec = compiler.spec()
    if compiler.errors:
        raise ManifestError(compiler.errors)
    try:
        parsed = parse_dag_spec(spec)
        resolve_dag(resource_name(dag.dag_id), parsed)
    except ValueError as error:
        raise ManifestError(getattr(error, "errors", [str(error)])) from error
    metadata: dict[str, Any] = {
        "name": resource_name(dag.dag_id),
        "labels": {MANAGED_BY_LABEL[0]: MANAGED_BY_LABEL[1]},
        "annotations": {DAG_ID_ANNOTATION: dag.dag_id},
    }
    if compiler.relative_file:
        metadata["annotations"][DAG_FILE_ANNOTATION] = compiler.relative_file
    if dag.description:
        metadata["annotations"]["zonda.dev/description"] = dag.description
    wire = parsed.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    return {"apiVersion": API_VERSION, "kind": "DAG", "metadata": metadata, "spec": wire}


def dump_yaml(manifests: list[dict[str, Any]]) -> str:
    """Byte-identical for the same manifests: sorted keys, block style, one document each."""
    return "".join(
        "---\n"
        + yaml.safe_dump(manifest, sort_keys=True, default_flow_style=False, allow_unicode=True, width=100)
        for manifest in manifests
    )


class _Compiler:
    def __init__(self, dag: DAG, dags_folder: Path | None) -> None:
        self.dag = dag
        self.dags_folder = dags_folder
        self.errors: list[str] = []
        self.relative_file = _relative(dag.fileloc, dags_folder)
        self.task_positions: dict[Node, int] = {task: i for i, task in enumerate(dag.tasks)}
        self.group_positions: dict[Node, int] = {group: i for i, group in enumerate(dag.task_groups)}

    def spec(self) -> dict[str, Any]:
        dag = self.dag
        spec: dict[str, Any] = {
            "catchup": dag.catchup,
            "maxActiveRuns": dag.max_active_runs,
            "maxActiveTasks": dag.max_active_tasks,
            "tags": list(dag.tags),
            "tasks": [self.task(task) for task in dag.tasks],
            "taskGroups": [self.group(group) for group in dag.task_groups],
        }
        if dag.timetable is not None:
            spec["timetable"] = self.timetable(dag.timetable)
        else:
            spec["schedule"] = self.schedule(dag.schedule_interval)
        if dag.start_date is not None:
            spec["startDate"] = _utc_iso(dag.start_date)
            spec["timezone"] = _zone_name(dag.start_date)
        if dag.end_date is not None:
            spec["endDate"] = _utc_iso(dag.end_date)
        if dag.dagrun_timeout is not None:
            spec["dagrunTimeout"] = format_duration(dag.dagrun_timeout)
        if dag.doc_md:
            spec["docMd"] = dag.doc_md
        if dag.is_paused_upon_creation:
            spec["paused"] = True
        if dag.user_defined_macros:
            spec["userDefinedMacros"] = self.importables(
                dag.user_defined_macros, "user_defined_macros", "macro"
            )
        if dag.user_defined_filters:
            spec["userDefinedFilters"] = self.importables(
                dag.user_defined_filters, "user_defined_filters", "filter"
            )
        if dag.render_template_as_native_obj:
            spec["renderTemplateAsNativeObj"] = True
        if dag.params:
            from zonda.authoring.params import params_schema, resolve_params

            try:
                spec["params"] = self.json(resolve_params(dag.params), "params")
            except ValueError as error:
                self.errors.append(str(error))
            schema = params_schema(dag.params)
            if schema is not None:
                spec["paramsSchema"] = self.json(schema, "params")
        for name in ("on_success_callback", "on_failure_callback", "sla_miss_callback"):
            if (value := getattr(dag, name)) is not None:
                spec[_camel(name)] = self.callbacks(value, name, {"dag_callback": name})
        defaults = self.defaults(dag.default_args, "default_args", of_dag=True)
        if defaults:
            spec["defaultArgs"] = defaults
        return spec

    # ---- DAG-level values

    def schedule(self, value: Any) -> str | None:
        if value is None or isinstance(value, str):
            return value
        if isinstance(value, dt.timedelta):
            return format_duration(value)
        self.errors.append(
            f"schedule {value!r} is not supported: use a cron expression, a preset, a timedelta, a timetable"
        )
        return None

    def timetable(self, timetable: Any) -> dict[str, Any]:
        klass = type(timetable)
        if "<locals>" in klass.__qualname__ or klass.__module__ in DAG_FILE_MODULES | {"__main__"}:
            self.errors.append(
                f"timetable class {klass.__qualname__} must live in an importable module (the controller "
                "imports it), not in a DAG file"
            )
        return {
            "class": f"{klass.__module__}.{klass.__qualname__}",
            "params": self.json(timetable.serialize(), "timetable"),
        }

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

    def defaults(
        self, default_args: Mapping[str, Any], where: str, *, of_dag: bool = False
    ) -> dict[str, Any]:
        """`default_args` as `TaskDefaults`: scheduler fields as fields, operator arguments in `args`."""
        fields: dict[str, Any] = {}
        args: dict[str, Any] = {}
        for name, value in default_args.items():
            self.note_unsupported(name, value)
            if name in TASK_CALLBACKS:
                fields[name] = self.callbacks(
                    value, f"{where} {name}", {"default_arg": name} if of_dag else None
                )
            elif name in _DEFAULT_FIELDS:
                fields[name] = self.field(name, value, where)
            elif name == "executor_config":
                fields.update(self.executor_config(value, where))
            elif name not in SCHEDULER_ARGUMENTS:
                args[name] = self.json(value, f"{where}[{name!r}]")
        if args:
            fields["args"] = args
        return TaskDefaults.model_validate(fields).to_wire() if not self.errors else fields

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

    def note_unsupported(self, name: str, value: Any) -> None:
        if name in UNSUPPORTED_TASK_ARGUMENTS and value not in (None, False, [], ""):
            self.dag.unsupported.setdefault(name, UNSUPPORTED_TASK_ARGUMENTS[name])

    # ---- tasks and groups

    def task(self, task: BaseOperator) -> dict[str, Any]:
        where = f"task {task.task_id!r}"
        group: TaskGroup | None = task.task_group
        body: dict[str, Any] = {"id": task.label or task.task_id}
        container_task = isinstance(task, ContainerOperator)
        if not container_task:
            body["operator"] = self.operator_name(task)
        if group is not None:
            body["group"] = group.label
        args: dict[str, Any] = {}
        for name, value in task.authored_arguments.items():
            self.note_unsupported(name, value)
            if name == "max_active_tis_per_dagrun" and value is not None:
                body["maxActiveTisPerDagrun"] = value
                continue
            if container_task and name in _CONTAINER_OPERATOR_ARGUMENTS:
                continue  # compiled into `container` by the operator itself
            if name in TASK_CALLBACKS:
                query = {"task_id": str(task.task_id), "callback": name}
                body[_camel(name)] = self.callbacks(value, f"{where} {name}", query)
            elif name in _DEFAULT_FIELDS:
                body[_camel(name)] = self.field(name, value, where)
            elif name == "executor_config":
                body.update({_camel(k): v for k, v in self.executor_config(value, where).items()})
            elif name == "params" and value:
                args[name], schema = self.task_params(value, where)
                if schema:
                    body["paramsSchema"] = schema
            elif name not in SCHEDULER_ARGUMENTS:
                args[name] = self.json(value, f"{where} argument {name!r}", task=task, argument=name)
        if args:
            body["args"] = args
        if task.expand_spec is not None:
            body["expand"] = self.expand(task, where)
        container = getattr(task, "container", None)
        if container:
            body["container"] = self.json({**body.get("container", {}), **container}, where)
        doc_md = getattr(task, "doc_md", None)
        if doc_md:
            body["docMd"] = doc_md
        if task.is_setup:
            body["isSetup"] = True
        if task.is_teardown:
            body["isTeardown"] = True
            body.setdefault("triggerRule", "all_done_setup_success")  # Airflow's teardown default
            if task.on_failure_fail_dagrun:
                body["onFailureFailDagrun"] = True
        body.update(self.upstream(task, where))
        return body

    def expand(self, task: BaseOperator, where: str) -> dict[str, Any]:
        """A mapped task's `expand` (`zonda.models.ExpandSpec`): its sources as the manifest writes them."""
        spec = task.expand_spec or {}
        result: dict[str, Any] = {}
        if spec.get("kwargs") is not None:
            result["kwargs"] = {
                name: self.json(value, f"{where} expand {name}", task=task)
                for name, value in spec["kwargs"].items()
            }
        else:
            result["kwargsList"] = self.json(spec.get("kwargs_list"), f"{where} expand_kwargs", task=task)
        if spec.get("into"):
            result["into"] = spec["into"]
        return result

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

    def group(self, group: TaskGroup) -> dict[str, Any]:
        body: dict[str, Any] = {"id": group.label, "prefixGroupId": group.prefix_group_id}
        if group.parent_group is not None:
            body["parent"] = group.parent_group.label
        if group.tooltip:
            body["tooltip"] = group.tooltip
        defaults = self.defaults(group.default_args, f"task group {group.group_id!r} default_args")
        if defaults:
            body["defaultArgs"] = defaults
        if group.expand_spec is not None:
            where = f"task group {group.group_id!r}"
            if group.expand_spec.get("kwargs") is not None:
                sources = group.expand_spec["kwargs"].items()
                body["expand"] = {
                    "kwargs": {name: self.json(value, f"{where} expand {name}") for name, value in sources}
                }
            else:
                body["expand"] = {
                    "kwargsList": self.json(group.expand_spec.get("kwargs_list"), f"{where} expand_kwargs")
                }
        body.update(self.upstream(group, f"task group {group.group_id!r}"))
        return body

    def upstream(self, node: Node, where: str) -> dict[str, Any]:
        depends_on: list[str] = []
        edge_labels: dict[str, str] = {}
        # In the order the upstream nodes were created, not the order the edges were written.
        for upstream, label in sorted(node.upstream_edges.items(), key=lambda edge: self.position(edge[0])):
            if getattr(upstream, "dag", None) is not self.dag:
                self.errors.append(
                    f"{where} depends on {upstream.node_id!r}, which is not in DAG {self.dag.dag_id!r}"
                )
                continue
            depends_on.append(upstream.node_id)
            if label is not None:
                edge_labels[upstream.node_id] = label
        result: dict[str, Any] = {}
        if depends_on:
            result["dependsOn"] = depends_on
        if edge_labels:
            result["edgeLabels"] = edge_labels
        return result

    def position(self, node: Node) -> tuple[int, int]:
        if node in self.task_positions:
            return (0, self.task_positions[node])
        return (1, self.group_positions.get(node, 0))

    def operator_name(self, task: BaseOperator) -> str:
        klass = type(task)
        path = f"{klass.__module__}.{klass.__qualname__}"
        if path in _BUILTIN_NAMES:
            return _BUILTIN_NAMES[path]
        if "<locals>" in klass.__qualname__ or klass.__module__ == "__main__":
            self.errors.append(
                f"task {task.task_id!r}: operator class {klass.__qualname__} must be defined at the top "
                "level of a module (the task runner imports it by path)"
            )
        return path

    # ---- values

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
            return _utc_iso(value)
        if isinstance(value, dt.date | dt.time):
            return value.isoformat()
        if isinstance(value, dt.timedelta):
            return format_duration(value)
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
            elif "<" not in qualname and module and module != "__main__" and module not in DAG_FILE_MODULES:
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


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _utc_iso(moment: dt.datetime) -> str:
    aware = moment if moment.tzinfo is not None else moment.replace(tzinfo=dt.UTC)
    return (
        aware.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")
        + (f".{aware.microsecond:06d}" if aware.microsecond else "")
        + "Z"
    )


def _zone_name(moment: dt.datetime) -> str:
    zone = moment.tzinfo
    if zone is None:
        return "UTC"
    name = getattr(zone, "name", None) or getattr(zone, "key", None)
    if isinstance(name, str) and name not in ("+00:00",):
        return "UTC" if name in ("UTC", "Etc/UTC", "utc") else name
    return "UTC"  # a fixed offset has no IANA name; the start date itself is written in UTC
