"""Compile a `DAG` object into the `DAG` resource the controller runs: deterministic YAML, sorted keys.

What a task was given in the DAG file becomes its spec: Airflow's scheduler arguments (`retries`,
`trigger_rule`, ...) become task fields, the operator's own arguments become `args` (JSON), DAG and
task-group `default_args` become `defaultArgs`. How one value or function is written (JSON, or a
`pkg.module:function` / `dagfile:` reference the task runner follows) is
`zonda.authoring.manifest_values`; this module lays out the DAG, its tasks and its groups.

The manifest is validated with the same `resolve_dag` the controller uses, so a file renders only
if the controller would accept it.
"""

from __future__ import annotations

import datetime as dt
import enum
import importlib
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from zonda.authoring import compat, template_files
from zonda.authoring.assets import (
    Asset,
    AssetAlias,
    AssetOrTimeSchedule,
    BaseAsset,
    PartitionedAssetTimetable,
    PartitionedAtRuntime,
    schedule_expression,
)
from zonda.authoring.manifest_values import DAG_FILE_MODULES, ValueWriter, utc_iso
from zonda.authoring.relations import Node
from zonda.authoring.task_groups import TaskGroup
from zonda.operators.base import SCHEDULER_ARGUMENTS
from zonda.operators.container import ContainerOperator
from zonda.resources import names
from zonda.resources.durations import format_duration
from zonda.resources.models import API_VERSION, TaskDefaults, WeightRule
from zonda.resources.wire import ANNOTATION_DAG_ID
from zonda.specs import operator_registry
from zonda.specs.dags import TASK_CALLBACKS, TASK_HOOKS, parse_dag_spec, resolve_dag
from zonda.specs.priority_strategies import PriorityWeightStrategy
from zonda.tries.retry_policies import RetryPolicy, policy_reference

if TYPE_CHECKING:
    from zonda.authoring.dags import DAG
    from zonda.operators.base import BaseOperator

#: Label on every rendered DAG: `zonda dags apply --prune` deletes only DAGs carrying it.
MANAGED_BY_LABEL = ("app.kubernetes.io/managed-by", "zonda-dags")
DAG_ID_ANNOTATION = ANNOTATION_DAG_ID
DAG_FILE_ANNOTATION = "zonda.dev/dag-file"

_DEFAULT_FIELDS = set(TaskDefaults.model_fields) - {"args", "container", "pod_override"}
#: Operator arguments Zonda accepts and does not act on, with what to do instead (for `--report`).
UNSUPPORTED_TASK_ARGUMENTS = {
    "email": "e-mail is not sent",
    "email_on_failure": "e-mail is not sent",
    "email_on_retry": "e-mail is not sent",
    "run_as_user": "set securityContext through executor_config's pod_override",
    "assigned_users": "shown with the human-in-the-loop request, not enforced: Kubernetes RBAC (the chart's "
    "hitl-responder Role) decides who may answer",
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


class _LiteralBlockDumper(yaml.SafeDumper):
    """PyYAML's safe dumper, writing a multi-line string as a literal block (`|`)."""


#: Line breaks YAML reads besides "\n": a literal block would turn each into "\n" (or a key's into a
#: space, differently from PyYAML's own quoting), so a string holding one keeps PyYAML's default style.
_OTHER_LINE_BREAKS = frozenset("\r\x85\u2028\u2029")


def _string(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    # PyYAML's emitter falls back to a quoted scalar where a block cannot hold the text exactly
    # (trailing spaces on a line, a key), so the document always loads back to the same value
    block = "\n" in value and _OTHER_LINE_BREAKS.isdisjoint(value)
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if block else None)


_LiteralBlockDumper.add_representer(str, _string)


def dump_yaml(manifests: list[dict[str, Any]]) -> str:
    """Byte-identical for the same manifests: sorted keys, block style, one document each; a multi-line
    string (a template file, a bash script, `doc_md`) as a literal block, line by line, so a GitOps diff
    of the rendered YAML shows the lines that changed."""
    return "".join(
        "---\n"
        + yaml.dump(
            manifest,
            Dumper=_LiteralBlockDumper,
            sort_keys=True,
            default_flow_style=False,
            allow_unicode=True,
            width=100,
        )
        for manifest in manifests
    )


#: Schedules that are not cron expressions in either Airflow.
NON_CRON_SCHEDULES = ("@once", "@continuous")


def access_controlled_assets(dag: DAG) -> list[str]:
    """The names of the DAG's assets (its schedule's, its tasks' outlets and inlets) that carry an
    `AssetAccessControl`: accepted, not acted on (the report says so)."""
    scheduled = dag.timetable if dag.timetable is not None else dag.schedule_interval
    roots: list[Any] = [getattr(scheduled, "assets", scheduled)]
    for task in dag.tasks:
        arguments = getattr(task, "authored_arguments", {})
        roots += [arguments.get("outlets") or [], arguments.get("inlets") or []]
    found: set[str] = set()
    for root in roots:
        for item in root if isinstance(root, list | tuple) else [root]:
            if isinstance(item, BaseAsset):
                found.update(a.name for a in item.iter_assets() if getattr(a, "access_control", None))
    return sorted(found)


class _Compiler(ValueWriter):
    def __init__(self, dag: DAG, dags_folder: Path | None) -> None:
        super().__init__(dag, dags_folder)
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
        if dag.airflow_version is not None:
            spec["airflowVersion"] = dag.airflow_version
        if controlled := access_controlled_assets(dag):
            self.dag.unsupported.setdefault(
                "access_control",
                f"AssetAccessControl on {', '.join(controlled)}: accepted, not enforced — a consumer sees "
                "its own namespace's events, every producer's there (Airflow with multi_team off); events "
                "across namespaces are not provided",
            )
        if dag.dag_display_name:
            spec["displayName"] = dag.dag_display_name
        scheduled = dag.timetable if dag.timetable is not None else dag.schedule_interval
        if isinstance(scheduled, AssetOrTimeSchedule):
            spec.update(self.asset_schedule(scheduled.assets))
            scheduled = scheduled.timetable
        elif isinstance(scheduled, PartitionedAssetTimetable):
            spec.update(self.asset_schedule(scheduled.assets))
            spec["assetPartitions"] = scheduled.to_manifest()
            scheduled = None
        elif isinstance(scheduled, PartitionedAtRuntime):
            spec["partitionedAtRuntime"] = True
            scheduled = None
        elif schedule_expression(scheduled) is not None:
            spec.update(self.asset_schedule(scheduled))
            scheduled = None
        if scheduled is not None and not isinstance(scheduled, str | dt.timedelta):
            spec["timetable"] = self.timetable(scheduled)
        elif (trigger := self.airflow3_trigger(dag, scheduled)) is not None:
            spec["timetable"] = trigger
        else:
            spec["schedule"] = self.schedule(scheduled)
        if dag.start_date is not None:
            spec["startDate"] = utc_iso(dag.start_date)
            spec["timezone"] = _zone_name(dag.start_date)
        if dag.end_date is not None:
            spec["endDate"] = utc_iso(dag.end_date)
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
        found = template_files.collect(dag)
        if found.files:
            spec["templateFiles"] = found.files
        if (too_large := found.too_large()) is not None:
            self.errors.append(too_large)
        dag.warnings = template_files.missing_warnings(found)
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

    def asset_schedule(self, value: Any) -> dict[str, Any]:
        """`schedule=[Dataset(...)]`, `Asset(...) | Asset(...)`...: the `assetSchedule` and its run type."""
        expression = schedule_expression(value)
        if expression is None:
            self.errors.append(f"schedule {value!r}: expected assets, aliases or AssetAll/AssetAny of them")
            return {}
        condition, run_type = expression
        return {"assetSchedule": condition, "assetRunType": run_type.value}

    def asset_refs(self, value: Any) -> list[dict[str, Any]]:
        """A task's `outlets`/`inlets`: assets and aliases (other lineage objects are dropped, as
        Zonda has no lineage backend)."""
        items = value if isinstance(value, list | tuple) else [value]
        return [item.to_manifest() for item in items if isinstance(item, Asset | AssetAlias)]

    def airflow3_trigger(self, dag: DAG, value: Any) -> dict[str, Any] | None:
        """Airflow 3 reads a cron string or preset as a `CronTriggerTimetable` and a `timedelta` as a
        `DeltaTriggerTimetable` (a run at each firing, no data interval; `[scheduler]
        create_cron_data_intervals = False`), Airflow 2 as the data-interval timetables `schedule:` means."""
        if dag.airflow_version != "3":
            return None
        from zonda.timetables.base import AirflowTimetableInvalid
        from zonda.timetables.trigger import CronTriggerTimetable, DeltaTriggerTimetable

        try:
            if isinstance(value, dt.timedelta):
                return self.timetable(DeltaTriggerTimetable(value))
            if not isinstance(value, str) or value.strip() in NON_CRON_SCHEDULES:
                return None
            zone = _zone_name(dag.start_date) if dag.start_date is not None else "UTC"
            return self.timetable(CronTriggerTimetable(value.strip(), timezone=zone))
        except AirflowTimetableInvalid as error:
            self.errors.append(f"schedule {value!r}: {error}")
            return None

    def timetable(self, timetable: Any) -> dict[str, Any]:
        klass = type(timetable)
        self.importable_class(klass, "timetable")
        return {
            "class": f"{klass.__module__}.{klass.__qualname__}",
            "params": self.json(timetable.serialize(), "timetable"),
        }

    def importable_class(self, klass: type, what: str, importer: str = "the controller") -> None:
        """A class the controller imports by path: not one defined in a DAG file (its `plugins/` aside)."""
        in_plugins = klass.__module__.split(".")[0] == PLUGINS_PACKAGE  # Airflow's plugins folder
        if (
            "<locals>" in klass.__qualname__
            or (klass.__module__ in DAG_FILE_MODULES and not in_plugins)
            or (klass.__module__ == "__main__")
        ):
            self.errors.append(
                f"{what} class {klass.__qualname__} must live in an importable module ({importer} "
                "imports it), not in a DAG file"
            )

    def weight_rule(self, value: Any, where: str) -> dict[str, Any]:
        """Airflow's `weight_rule`: a built-in rule's name, or a `PriorityWeightStrategy` (an instance, or
        its class's import path as Airflow's plugin registry names it) as `weight_strategy`."""
        if isinstance(value, enum.Enum):
            value = value.value
        if isinstance(value, str) and value in set(WeightRule):
            return {"weight_rule": value}
        strategy = value
        if isinstance(value, str):
            strategy = self.strategy_class(value, where)
            if strategy is None:
                return {}
        if isinstance(strategy, type) and issubclass(strategy, PriorityWeightStrategy):
            strategy = strategy()
        if not isinstance(strategy, PriorityWeightStrategy):
            self.errors.append(
                f"{where}: expected 'downstream', 'upstream', 'absolute' or a PriorityWeightStrategy, "
                f"not {value!r}"
            )
            return {}
        klass = type(strategy)
        self.importable_class(klass, "priority weight strategy")
        return {
            "weight_strategy": {
                "class": f"{klass.__module__}.{klass.__qualname__}",
                "params": self.json(strategy.serialize(), where),
            }
        }

    def retry_policy(self, policy: Any, where: str) -> dict[str, Any]:
        """Airflow 3.3's `retry_policy`: the class the task runner imports, and its `serialize()`."""
        if not isinstance(policy, RetryPolicy):
            self.errors.append(f"{where}: expected a RetryPolicy (airflow.sdk), not {policy!r}")
            return {}
        self.importable_class(type(policy), "retry policy", "the task runner")
        try:
            reference = policy_reference(policy)
        except NotImplementedError as error:
            self.errors.append(f"{where}: {error} (the task runner rebuilds the policy from it)")
            return {}
        return {"class": reference["class"], "params": self.json(reference["params"], where)}

    def strategy_class(self, path: str, where: str) -> type | None:
        """The class a `weight_rule` import path names, imported as the DAG file's imports are (so
        `airflow.example_dags.plugins.X` is the DAGs folder's `plugins.X`)."""
        module_name, _, attribute = path.rpartition(".")
        try:
            found = None
            if module_name:
                found = getattr(importlib.import_module(compat.module_for(module_name)), attribute)
        except Exception as exc:  # ImportError, AttributeError, or anything its module raises
            self.errors.append(f"{where}: unknown priority strategy {path!r} ({type(exc).__name__}: {exc})")
            return None
        if not (isinstance(found, type) and issubclass(found, PriorityWeightStrategy)):
            self.errors.append(f"{where}: unknown priority strategy {path!r}: not a PriorityWeightStrategy")
            return None
        return found

    def defaults(
        self, default_args: Mapping[str, Any], where: str, *, of_dag: bool = False
    ) -> dict[str, Any]:
        """`default_args` as `TaskDefaults`: scheduler fields as fields, operator arguments in `args`."""
        fields: dict[str, Any] = {}
        args: dict[str, Any] = {}
        for name, value in default_args.items():
            self.note_unsupported(name, value)
            if name in TASK_CALLBACKS or name in TASK_HOOKS:
                fields[name] = self.callbacks(
                    value, f"{where} {name}", {"default_arg": name} if of_dag else None
                )
            elif name == "weight_rule" and value is not None:
                fields.update(self.weight_rule(value, f"{where} weight_rule"))
            elif name == "retry_policy" and value is not None:
                fields["retry_policy"] = self.retry_policy(value, f"{where} retry_policy")
            elif name in _DEFAULT_FIELDS:
                fields[name] = self.field(name, value, where)
            elif name == "executor_config":
                fields.update(self.executor_config(value, where))
            elif name not in SCHEDULER_ARGUMENTS:
                args[name] = self.json(value, f"{where}[{name!r}]")
        if args:
            fields["args"] = args
        return TaskDefaults.model_validate(fields).to_wire() if not self.errors else fields

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
            if name == "task_display_name":
                if value:  # Airflow shows the id when unset
                    body["displayName"] = str(value)
                continue
            if name == "max_active_tis_per_dagrun" and value is not None:
                body["maxActiveTisPerDagrun"] = value
                continue
            if container_task and name in _CONTAINER_OPERATOR_ARGUMENTS:
                continue  # compiled into `container` by the operator itself
            if name in ("outlets", "inlets"):
                if refs := self.asset_refs(value):
                    body[name] = refs
            elif name in TASK_CALLBACKS or name in TASK_HOOKS:
                query = {"task_id": str(task.task_id), "callback": name}
                if value is not None:  # Airflow's default: none
                    body[_camel(name)] = self.callbacks(value, f"{where} {name}", query)
            elif name in getattr(type(task), "callback_arguments", ()):  # a HITL operator's notifiers
                query = {"task_id": str(task.task_id), "callback": name}
                if value:
                    args[name] = self.callbacks(value, f"{where} argument {name!r}", query)
            elif name == "retry_policy" and value is not None:
                body["retryPolicy"] = self.retry_policy(value, f"{where} retry_policy")
            elif name == "weight_rule" and value is not None:
                body.update(
                    {_camel(k): v for k, v in self.weight_rule(value, f"{where} weight_rule").items()}
                )
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
        rule = getattr(task, "trigger_rule", None)  # `task.trigger_rule = ...` after construction
        if rule is not None and rule != task.authored_arguments.get("trigger_rule", "all_success"):
            body["triggerRule"] = self.field("trigger_rule", rule, where)
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
        """A mapped task's `expand` (`zonda.resources.models.ExpandSpec`): its sources as the manifest writes
        them."""
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


#: A DAGs folder's `plugins/` package holds plugin classes (timetables) as Airflow's plugins folder:
#: the controller imports them with the DAGs folder on its path.
PLUGINS_PACKAGE = "plugins"


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _zone_name(moment: dt.datetime) -> str:
    zone = moment.tzinfo
    if zone is None:
        return "UTC"
    name = getattr(zone, "name", None) or getattr(zone, "key", None)
    if isinstance(name, str) and name not in ("+00:00",):
        return "UTC" if name in ("UTC", "Etc/UTC", "utc") else name
    return "UTC"  # a fixed offset has no IANA name; the start date itself is written in UTC
