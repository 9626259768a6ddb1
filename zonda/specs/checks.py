"""The DAG-level checks of `zonda.specs.dags.resolve_dag`: settings, timezone, timetable, durations.

Each returns a list of problems (never raises) so `resolve_dag` can report every one at once in
its `DagInvalid`. Kept apart from `zonda.specs.dags`, which resolves the tasks, as `_dag_graph` (the
graph) and `_dag_errors` (messages for a spec that does not parse) are.
"""

from __future__ import annotations

import difflib
import zoneinfo
from datetime import datetime, timedelta

import pendulum
from pydantic.alias_generators import to_camel

from zonda.resources.durations import parse_duration
from zonda.resources.models import DagSpec, TaskDefaults
from zonda.specs import params
from zonda.specs.errors import MAX_SUGGESTIONS, did_you_mean
from zonda.specs.graph import GraphBuilder

_DURATION_FIELDS = ("retry_delay", "max_retry_delay", "execution_timeout", "sla")


def check_dag_settings(spec: DagSpec) -> list[str]:
    errors: list[str] = []
    timezone_error = _check_timezone(spec.timezone)
    if timezone_error:
        errors.append(timezone_error)
    elif spec.start_date and spec.end_date:
        start, end = (_aware(d, spec.timezone) for d in (spec.start_date, spec.end_date))
        if end < start:
            errors.append(
                f"endDate {spec.end_date.isoformat()} is before startDate {spec.start_date.isoformat()}"
            )
    if spec.schedule is not None and spec.timetable is not None:
        errors.append("set either schedule or timetable, not both")
    errors.extend(_check_timetable(spec, spec.timezone if timezone_error is None else "UTC"))
    errors.extend(_check_partitions(spec))
    if spec.dagrun_timeout is not None:
        errors.extend(_check_duration("dagrunTimeout", spec.dagrun_timeout, positive=True))
    scheduled = spec.schedule is not None or spec.timetable is not None
    errors.extend(params.schema_errors(spec.params_schema, spec.params, scheduled=scheduled))
    errors.extend(_check_weight_strategies(spec))
    for task in spec.tasks:  # Airflow's task-level Params: the task's defaults over the DAG's
        defaults = {**spec.params, **((task.args or {}).get("params") or {})}
        found = params.schema_errors(task.params_schema, defaults, scheduled=scheduled)
        errors.extend(f"task {task.id!r}: {error}" for error in found)
    return errors


def _check_partitions(spec: DagSpec) -> list[str]:
    """`assetPartitions` (PartitionedAssetTimetable) needs an `assetSchedule` and mappers Zonda knows;
    `partitionedAtRuntime` (PartitionedAtRuntime) is a schedule of its own."""
    from zonda.timetables.partitions import PartitionSpecInvalid, asset_partitions_from_manifest

    errors: list[str] = []
    if spec.asset_partitions is not None:
        if spec.asset_schedule is None:
            errors.append("assetPartitions needs an assetSchedule: the assets whose partitions it maps")
        if spec.schedule is not None or spec.timetable is not None:
            errors.append("assetPartitions: a partitioned asset schedule takes no schedule or timetable too")
        try:
            asset_partitions_from_manifest(spec.asset_partitions)
        except PartitionSpecInvalid as error:
            errors.append(str(error))
    if spec.partitioned_at_runtime and (
        spec.schedule is not None or spec.timetable is not None or spec.asset_schedule is not None
    ):
        errors.append(
            "partitionedAtRuntime: its runs are triggered with a partition key, not scheduled: unset "
            "schedule, timetable and assetSchedule"
        )
    return errors


def _check_timezone(name: str) -> str | None:
    try:
        pendulum.timezone(name)
    except Exception:  # pendulum raises InvalidTimezone, zoneinfo ValueError for malformed keys
        close = difflib.get_close_matches(name, sorted(zoneinfo.available_timezones()), MAX_SUGGESTIONS)
        return f"unknown timezone {name!r}{did_you_mean(close)}: use an IANA name such as 'Europe/Paris'"
    return None


def _check_timetable(spec: DagSpec, timezone: str) -> list[str]:
    """Build the timetable as the scheduler will, so a DAG that resolves can be scheduled.

    The timetables package is imported here, not at module level: it imports the user's timetable
    classes, which only DAG resolution needs, and `zonda.specs.dags` is imported everywhere.
    """
    from zonda.timetables import load_timetable, timetable_for_schedule

    errors: list[str] = []
    if spec.schedule is not None:
        try:
            timetable_for_schedule(spec.schedule, timezone)
        except Exception as exc:  # croniter and the timetables raise ValueError subclasses and others
            errors.append(f"schedule {spec.schedule!r}: {exc}")
    if spec.timetable is not None:
        try:
            load_timetable(spec.timetable.class_, spec.timetable.params)
        except Exception as exc:  # a user class: anything it raises makes the DAG unschedulable
            errors.append(f"timetable {spec.timetable.class_!r} cannot be used: {exc}")
    return errors


def _check_weight_strategies(spec: DagSpec) -> list[str]:
    """Import each custom priority weight strategy now (Airflow fails a DAG whose strategy it cannot
    load), so admission never meets one that does not import."""
    from zonda.specs.priority_strategies import StrategyInvalid, load_priority_strategy

    layers = [("defaultArgs", spec.default_args)]
    layers += [(f"task group {group.id!r} defaultArgs", group.default_args) for group in spec.task_groups]
    layers += [(f"task {task.id!r}", task) for task in spec.tasks]
    errors: list[str] = []
    for where, layer in layers:
        if layer is None or layer.weight_strategy is None:
            continue
        try:
            load_priority_strategy(layer.weight_strategy.class_, layer.weight_strategy.params)
        except StrategyInvalid as exc:
            errors.append(f"{where}: {exc}")
    return errors


def _check_duration(where: str, text: str, *, positive: bool = False) -> list[str]:
    try:
        duration = parse_duration(text)
    except ValueError as exc:
        return [f"{where}: {exc}"]
    if duration < timedelta(0):
        return [f"{where}: duration {text!r} is negative"]
    if positive and duration == timedelta(0):
        return [f"{where}: duration {text!r} must be longer than 0s"]
    return []


def _aware(moment: datetime, timezone: str) -> datetime:
    """Naive dates are wall-clock times in the DAG's timezone, as Airflow reads them."""
    return moment if moment.tzinfo else pendulum.instance(moment, tz=pendulum.timezone(timezone))


# ------------------------------------------------------------------------------------- defaults


def check_defaults_durations(spec: DagSpec, graph: GraphBuilder) -> list[str]:
    """Check each `defaultArgs` block once, so one bad DAG default is one error, not one per task."""
    sources: list[tuple[str, TaskDefaults | None]] = [("defaultArgs", spec.default_args)]
    sources += [
        (f"task group {group_id!r} defaultArgs", group.default_args)
        for group_id, group in graph.groups.items()
    ]
    sources += [(f"task {task_id!r}", task) for task_id, task in graph.tasks.items()]
    errors: list[str] = []
    for where, defaults in sources:
        if defaults is None:
            continue
        for field_name in _DURATION_FIELDS:
            value = getattr(defaults, field_name)
            if value is not None:
                errors.extend(_check_duration(f"{where}: {to_camel(field_name)}", value))
    return errors
