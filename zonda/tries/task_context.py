"""Airflow's template context for one try (`TaskInstance.get_template_context`), from its invocation.

`build_context` turns a `TaskInvocation` into the variables Airflow gives templates and operators
(`ds`, `ts`, `logical_date`, `data_interval_start`, `params`, `dag_run`, `ti`, `macros`...) with
Airflow's names, types (pendulum datetimes in UTC) and formats, and `ti.xcom_pull` reading the XComs
the invocation carries (or the XCom backend). Rendering templates with it is `zonda.tries.templating`'s.
Unlike Airflow, `macros.json`, `macros.time` and `macros.uuid` expose the useful functions only, not
the modules, because a module leads to the modules it imports (`uuid.os.system`).
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import time
import types
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import pendulum
from pendulum import DateTime

from zonda import variables
from zonda.resources.invocations import TaskInvocation
from zonda.specs import mapping
from zonda.tries import asset_events, xcoms

#: The key of a task's return value among its XComs.
XCOM_RETURN_KEY = xcoms.RETURN_KEY


class XComReader(Protocol):
    """Reads the XCom `key` of a task of the same DAG run; None when there is none."""

    def __call__(self, task_id: str, key: str) -> Any: ...


class EarlierXComReader(Protocol):
    """Reads the XCom `key` of a task instance (`ti_key`) in the DAG's earlier runs, latest first."""

    def __call__(self, ti_key: str, key: str) -> list[Any]: ...


def read_invocation_xcoms(invocation: TaskInvocation) -> XComReader:
    """The XComs the controller hands the runner: return values and pushed keys, by task id."""

    def read(task_id: str, key: str) -> Any:
        if key == XCOM_RETURN_KEY and task_id in invocation.xcoms:
            return invocation.xcoms[task_id]
        return invocation.keyed_xcoms.get(task_id, {}).get(key)

    return read


def folding_mapped(reader: XComReader, counts: Mapping[str, int]) -> XComReader:
    """`reader`, with a mapped task's XCom read as the list of its instances' values in map-index order
    (Airflow's lazy XCom sequence: the instances that pushed one); ``task[i]`` reads one instance."""
    if not counts:
        return reader

    def read(task_id: str, key: str) -> Any:
        count = counts.get(task_id)
        if count is None:
            return reader(task_id, key)
        values = (reader(mapping.ti_key(task_id, index), key) for index in range(count))
        return [value for value in values if value is not None]

    return read


# ---------------------------------------------------------------------------------- context objects


@dataclass(frozen=True)
class ContextDag:
    """What templates see as `dag`."""

    dag_id: str
    timezone: Any  # a pendulum Timezone, as Airflow's `dag.timezone`


@dataclass(frozen=True)
class ContextTask:
    """What templates see as `task` (the runner replaces it with the operator itself)."""

    task_id: str
    dag_id: str


@dataclass(frozen=True)
class ContextDagRun:
    """What templates see as `dag_run`: Airflow's `DagRun` attributes a template reads."""

    dag_id: str
    run_id: str
    run_type: str
    conf: dict[str, Any]
    #: None, with the data interval, in an Airflow 3 manual run given no logical date.
    logical_date: DateTime | None
    data_interval_start: DateTime | None
    data_interval_end: DateTime | None
    #: Zonda's addition: the run's namespace, where operators acting on other runs look for them.
    namespace: str | None = None
    #: Zonda's addition: the DagRun object's name (`run_id` is Airflow's run id, `status.runId`).
    name: str | None = None
    #: Airflow 3's: when the run could start (a scheduled run's data interval end, a manual run's
    #: trigger time); None for an Airflow 2 DAG, which has no such attribute.
    run_after: DateTime | None = None
    airflow_version: str | None = None
    #: Airflow 3.2+'s: the partition the run is for, and its start when the key is a time.
    partition_key: str | None = None
    partition_date: DateTime | None = None

    @property
    def execution_date(self) -> DateTime | None:
        """Airflow 2's deprecated name of `logical_date` (removed in Airflow 3)."""
        if self.airflow_version == "3":
            raise AttributeError("'DagRun' has no attribute 'execution_date' in Airflow 3: use logical_date")
        return self.logical_date

    @property
    def external_trigger(self) -> bool:
        return self.run_type == "manual"


@dataclass(frozen=True)
class ContextTaskInstance:
    """What templates see as `ti` and `task_instance`: the try being run, and its XCom access."""

    dag_id: str
    task_id: str
    run_id: str
    try_number: int
    max_tries: int
    logical_date: DateTime | None
    xcom_reader: XComReader = field(repr=False)
    map_index: int = -1
    #: What this try pushed with `xcom_push`, by key (the runner returns it with the result).
    pushed: dict[str, Any] = field(default_factory=dict, repr=False)
    #: The DAG's earlier runs (`include_prior_dates`); None where they cannot be read.
    earlier_reader: EarlierXComReader | None = field(default=None, repr=False)
    airflow_version: str | None = None
    #: Zonda's addition: the DagRun object's name (`run_id` is Airflow's run id, `status.runId`).
    run_name: str | None = None

    @property
    def execution_date(self) -> DateTime | None:
        """Airflow 2's deprecated name of `logical_date` (removed in Airflow 3)."""
        if self.airflow_version == "3":
            raise AttributeError(
                "'TaskInstance' has no attribute 'execution_date' in Airflow 3: use logical_date"
            )
        return self.logical_date

    def xcom_pull(
        self,
        task_ids: str | Iterable[str] | None = None,
        dag_id: str | None = None,
        key: str = XCOM_RETURN_KEY,
        include_prior_dates: bool = False,
        *,
        map_indexes: int | Iterable[int] | None = None,
        default: Any = None,
    ) -> Any:
        """Airflow's `TaskInstance.xcom_pull` within this DAG run.

        One task id gives its value (or `default`); a list gives the values found, in the order asked,
        as Airflow's query does. Pulling without task ids or from another DAG is refused rather than
        answered wrongly. `include_prior_dates` also reads the DAG's earlier runs (`_pull_prior`).
        """
        if dag_id not in (None, self.dag_id):
            raise ValueError(f"xcom_pull: Zonda pulls XComs from this DAG only, not from {dag_id!r}")
        if task_ids is None:
            raise ValueError("xcom_pull needs task_ids: name the task(s) whose XCom to read")
        if include_prior_dates:
            return self._pull_prior(task_ids, key, map_indexes, default)
        if map_indexes is not None and -1 not in (
            indexes := [map_indexes] if isinstance(map_indexes, int) else list(map_indexes)
        ):
            # Airflow filters on the map index: a mapped task's instances (an unmapped task's XCom has
            # -1, so nothing is found for it).
            ids = [task_ids] if isinstance(task_ids, str) else list(task_ids)
            found = [self._read(mapping.ti_key(task_id, index), key) for task_id in ids for index in indexes]
            if isinstance(task_ids, str) and isinstance(map_indexes, int):
                return default if found[0] is None else found[0]
            return [value for value in found if value is not None]
        if isinstance(task_ids, str):
            value = self._read(task_ids, key)
            return default if value is None else value
        values = (self._read(task_id, key) for task_id in task_ids)
        return [value for value in values if value is not None]

    def _pull_prior(
        self, task_ids: str | Iterable[str], key: str, map_indexes: int | Iterable[int] | None, default: Any
    ) -> Any:
        """Airflow's `include_prior_dates=True`: the runs at or before this one's logical date, latest
        first — this run's own value, else the latest earlier run's; a list of ids (or indexes) gives
        every value found, task by task in the order asked, each latest first."""
        if self.earlier_reader is None:
            raise ValueError("xcom_pull: include_prior_dates needs the DAG's runs, which cannot be read here")
        ids = [task_ids] if isinstance(task_ids, str) else list(task_ids)
        if map_indexes is None or isinstance(map_indexes, int):
            indexes = [-1 if map_indexes is None else map_indexes]
        else:
            indexes = list(map_indexes)
        found: list[Any] = []
        for ti_key in (mapping.ti_key(task_id, index) for task_id in ids for index in indexes):
            current = self._read(ti_key, key)
            found += ([] if current is None else [current]) + self.earlier_reader(ti_key, key)
        if isinstance(task_ids, str) and not isinstance(map_indexes, Iterable):
            return found[0] if found else default
        return found

    def _read(self, task_id: str, key: str) -> Any:
        """This try's own pushes first (Airflow stores them at once), then the run's XComs."""
        if task_id == self.task_id and key in self.pushed:
            return self.pushed[key]
        return self.xcom_reader(task_id, key)

    def xcom_push(self, key: str, value: Any, execution_date: Any = None) -> None:
        """Airflow's `TaskInstance.xcom_push`: the value becomes this task's XCom `key` when the try
        reports (it succeeds, defers or reschedules).

        The value is checked (JSON, datetimes as ISO 8601) here, so a bad one fails at the push that made
        it, as Airflow's serialisation does; a later push of the same key replaces it.
        """
        if execution_date is not None:
            raise ValueError("xcom_push: execution_date is not supported, a try pushes to its own run")
        self.pushed[key] = xcoms.deserialize(xcoms.serialize(key, value))


@dataclass(frozen=True)
class AirflowConfig:
    """What templates see as `conf`: Airflow's configuration (not the DagRun's conf), read-only."""

    sections: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    def get(self, section: str, key: str, fallback: Any = None) -> Any:
        return self.sections.get(section, {}).get(key, fallback)

    def has_option(self, section: str, key: str) -> bool:
        return key in self.sections.get(section, {})

    def getboolean(self, section: str, key: str, fallback: bool = False) -> bool:
        value = self.get(section, key)
        return fallback if value is None else str(value).strip().lower() in ("true", "t", "1", "yes")

    def getint(self, section: str, key: str, fallback: int = 0) -> int:
        value = self.get(section, key)
        return fallback if value is None else int(value)


# ------------------------------------------------------------------------------------------ macros


def ds_add(ds: str, days: int) -> str:
    """Add or subtract days from a ``YYYY-MM-DD`` (Airflow's `macros.ds_add`)."""
    if not days:
        return str(ds)
    moment = dt.datetime.strptime(str(ds), "%Y-%m-%d") + dt.timedelta(days=days)
    return moment.strftime("%Y-%m-%d")


def ds_format(ds: str, input_format: str, output_format: str) -> str:
    """Reformat a date string (Airflow's `macros.ds_format`)."""
    return dt.datetime.strptime(str(ds), input_format).strftime(output_format)


MACROS = types.SimpleNamespace(
    ds_add=ds_add,
    ds_format=ds_format,
    datetime=dt.datetime,
    timedelta=dt.timedelta,
    json=types.SimpleNamespace(dumps=json.dumps, loads=json.loads),
    time=types.SimpleNamespace(
        time=time.time, gmtime=time.gmtime, localtime=time.localtime, mktime=time.mktime,
        strftime=time.strftime, strptime=time.strptime,
    ),
    uuid=types.SimpleNamespace(
        UUID=uuid.UUID, uuid1=uuid.uuid1, uuid3=uuid.uuid3, uuid4=uuid.uuid4, uuid5=uuid.uuid5,
        NAMESPACE_DNS=uuid.NAMESPACE_DNS, NAMESPACE_URL=uuid.NAMESPACE_URL,
        NAMESPACE_OID=uuid.NAMESPACE_OID, NAMESPACE_X500=uuid.NAMESPACE_X500,
    ),
)  # fmt: skip


# ----------------------------------------------------------------------------------------- context


def build_context(
    invocation: TaskInvocation,
    *,
    xcom_reader: XComReader | None = None,
    earlier_reader: EarlierXComReader | None = None,
    task_params: Mapping[str, Any] | None = None,
    configuration: Mapping[str, Mapping[str, str]] | None = None,
    asset_event_lister: asset_events.AssetEventLister | None = None,
) -> dict[str, Any]:
    """Airflow's template context (`TaskInstance.get_template_context`) for one try.

    `params` are the DAG's, then the task's (`task_params`), then the DagRun's `conf` on top, as
    Airflow with `dag_run_conf_overrides_params`. Dates are in UTC, as Airflow's are. Every value is
    built afresh (conf and params deep-copied) so a template or an operator changing them changes
    nothing else. `xcom_reader` defaults to the XComs carried by the invocation; `earlier_reader` reads
    the DAG's earlier runs for `include_prior_dates` (none: such a pull is refused);
    `asset_event_lister` the namespace's AssetEvents for `inlet_events` (none: only the run's own).
    """
    reader = folding_mapped(xcom_reader or read_invocation_xcoms(invocation), invocation.mapped_counts)
    logical_date = _utc_or_none(invocation.logical_date)
    # Airflow's run id (``manual__2024-01-01T00:00:00+00:00``), not the object's name
    run_id = invocation.run_id or invocation.run_name
    conf = copy.deepcopy(invocation.conf)
    params = {**copy.deepcopy(invocation.params), **copy.deepcopy(dict(task_params or {})), **conf}
    dag = ContextDag(dag_id=invocation.dag_name, timezone=pendulum.timezone(invocation.timezone))
    dag_run = ContextDagRun(
        dag_id=invocation.dag_name,
        run_id=run_id,
        run_type=invocation.run_type.value,
        conf=copy.deepcopy(conf),
        logical_date=logical_date,
        data_interval_start=_utc_or_none(invocation.data_interval_start),
        data_interval_end=_utc_or_none(invocation.data_interval_end),
        namespace=invocation.namespace,
        name=invocation.run_name,
        run_after=_run_after(invocation) if invocation.airflow_version == "3" else None,
        airflow_version=invocation.airflow_version,
        partition_key=invocation.partition_key,
        partition_date=_utc_or_none(invocation.partition_date),
    )
    task_instance = ContextTaskInstance(
        dag_id=invocation.dag_name,
        task_id=invocation.task_id,
        run_id=run_id,
        try_number=invocation.try_number,
        max_tries=invocation.max_tries,
        logical_date=logical_date,
        xcom_reader=reader,
        map_index=invocation.map_index,
        earlier_reader=earlier_reader,
        airflow_version=invocation.airflow_version,
        run_name=invocation.run_name,
    )
    triggering = asset_events.triggering_events(invocation.triggering_asset_events)
    context = {
        "conf": AirflowConfig(configuration or {}),
        "dag": dag,
        "dag_run": dag_run,
        "inlets": [],
        "inlet_events": asset_events.InletEventsAccessor(triggering, asset_event_lister),
        "macros": MACROS,
        "outlets": asset_events.outlet_records(invocation.outlets),
        "outlet_events": asset_events.OutletEventAccessors(),
        "triggering_asset_events": triggering,
        "triggering_dataset_events": triggering,
        "params": params,
        "run_id": run_id,
        "task": ContextTask(task_id=invocation.task_id, dag_id=invocation.dag_name),
        "task_instance": task_instance,
        # Airflow 3's, replaced by the logical-date form below when there is a logical date
        "task_instance_key_str": f"{invocation.dag_name}__{invocation.task_id}__{run_id}",
        "templates_dict": None,
        "test_mode": False,
        "ti": task_instance,
        **variables.template_variables(),  # var, conn: read from the try's environment
    }
    if logical_date is not None:
        context.update(_logical_date_keys(invocation, logical_date, dag_run))
    if invocation.airflow_version == "3":
        _as_airflow3(context, invocation)
    elif invocation.airflow_version == "2":
        _as_airflow2(context, invocation)
    return context


#: Context keys Airflow 3 removed (`airflow.sdk.definitions.context.Context` has none of them).
AIRFLOW3_REMOVED_KEYS = ("execution_date", "conf")


def _as_airflow3(context: dict[str, Any], invocation: TaskInvocation) -> None:
    """Airflow 3's context: without the keys it removed, with `try_number`."""
    for key in AIRFLOW3_REMOVED_KEYS:
        context.pop(key, None)
    context["try_number"] = invocation.try_number
    context["partition_key"] = invocation.partition_key
    context["partition_date"] = _utc_or_none(invocation.partition_date)


def _logical_date_keys(
    invocation: TaskInvocation, logical_date: DateTime, dag_run: ContextDagRun
) -> dict[str, Any]:
    """The keys that derive from the logical date and the data interval: a run without a logical date
    (an Airflow 3 manual one) has none of them, as in Airflow 3.1's `RuntimeTaskInstance.
    get_template_context` (task-sdk `execution_time/task_runner.py`), where they "either coexist or be
    None together"."""
    ds = logical_date.strftime("%Y-%m-%d")
    ts = logical_date.isoformat()
    return {
        "data_interval_start": dag_run.data_interval_start,
        "data_interval_end": dag_run.data_interval_end,
        "ds": ds,
        "ds_nodash": ds.replace("-", ""),
        "execution_date": logical_date,
        "logical_date": logical_date,
        "prev_data_interval_start_success": _utc_or_none(invocation.prev_data_interval_start_success),
        "prev_data_interval_end_success": _utc_or_none(invocation.prev_data_interval_end_success),
        "task_instance_key_str": f"{invocation.dag_name}__{invocation.task_id}__{ds.replace('-', '')}",
        "ts": ts,
        "ts_nodash": logical_date.strftime("%Y%m%dT%H%M%S"),
        "ts_nodash_with_tz": ts.replace("-", "").replace(":", ""),
    }


def _run_after(invocation: TaskInvocation) -> DateTime | None:
    """The run's `run_after` as the controller recorded it; for an invocation without it, a manual
    run's logical date, else its data interval's end."""
    if invocation.run_after is not None:
        return _utc(invocation.run_after)
    if invocation.run_type.value == "manual":
        return _utc_or_none(invocation.logical_date)
    return _utc_or_none(invocation.data_interval_end)


def _as_airflow2(context: dict[str, Any], invocation: TaskInvocation) -> None:
    """Airflow 2's deprecated date keys, as 2.10's `get_template_context` computes them: `next_*` is the
    logical date in a manual run, else the data interval's end (the following schedule)."""
    if "logical_date" not in context:
        return
    logical_date: DateTime = context["logical_date"]
    manual = invocation.run_type.value == "manual"
    following = logical_date if manual else context["data_interval_end"]
    for name, moment in (
        ("yesterday_ds", logical_date.subtract(days=1)),
        ("tomorrow_ds", logical_date.add(days=1)),
        ("next_ds", following),
    ):
        day = moment.strftime("%Y-%m-%d")
        context[name] = day
        context[f"{name}_nodash"] = day.replace("-", "")
    context["next_execution_date"] = following


def _utc(moment: dt.datetime) -> DateTime:
    """A pendulum DateTime in UTC; a naive datetime is taken as UTC (the CRDs store UTC)."""
    return pendulum.instance(moment, tz=pendulum.UTC).in_timezone(pendulum.UTC)


def _utc_or_none(moment: dt.datetime | None) -> DateTime | None:
    return None if moment is None else _utc(moment)
