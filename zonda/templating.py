"""Jinja templating of operator arguments, with Airflow's template context.

`build_context` turns a `TaskInvocation` into the variables Airflow gives templates (`ds`, `ts`,
`logical_date`, `data_interval_start`, `params`, `dag_run`, `ti`, `macros`...) with Airflow's names,
types (pendulum datetimes in UTC) and formats; `render` renders a template field as Airflow's
`render_template` does: strings are templates, containers are rendered element by element.

The environment is Airflow's: sandboxed (DagRun `conf` and `params` come from whoever triggers the run,
so nothing reachable from a template may lead to Python internals), `StrictUndefined` (a misspelt
variable is an error naming it, never an empty string), the `do` extension and Airflow's date filters.
As in Airflow, attributes starting with one underscore are allowed and those with two are not.
Unlike Airflow, `macros.json`, `macros.time` and `macros.uuid` expose the useful functions only, not
the modules, because a module leads to the modules it imports (`uuid.os.system`).
"""

from __future__ import annotations

import copy
import datetime as dt
import functools
import json
import re
import time
import types
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import pendulum
from pendulum import DateTime

from zonda import mapping, variables, xcoms
from zonda.imports import import_string
from zonda.invocations import TaskInvocation

if TYPE_CHECKING:
    import jinja2

#: The key of a task's return value among its XComs.
XCOM_RETURN_KEY = xcoms.RETURN_KEY

#: Airflow variables Zonda does not provide, and what to write instead: added to "is undefined" errors.
_MISSING_VARIABLE_HINTS = {
    "yesterday_ds": "use {{ macros.ds_add(ds, -1) }}",
    "tomorrow_ds": "use {{ macros.ds_add(ds, 1) }}",
    "next_ds": "use {{ data_interval_end | ds }}",
    "prev_ds": "use {{ data_interval_start | ds }} for the data interval's start",
    "next_execution_date": "use data_interval_end",
    "prev_execution_date": "use data_interval_start or prev_data_interval_start_success",
}


class TemplateError(ValueError):
    """A template field that cannot be rendered; the message names the field and Jinja's reason."""

    def __init__(self, field: str | None, reason: str) -> None:
        super().__init__(f"cannot render {field or 'template'}: {reason}")
        self.field = field
        self.reason = reason


class XComReader(Protocol):
    """Reads the XCom `key` of a task of the same DAG run; None when there is none."""

    def __call__(self, task_id: str, key: str) -> Any: ...


class EarlierXComReader(Protocol):
    """Reads the XCom `key` of a task instance (`ti_key`) in the DAG's earlier runs, latest first."""

    def __call__(self, ti_key: str, key: str) -> list[Any]: ...


def read_invocation_xcoms(invocation: TaskInvocation) -> XComReader:
    """The XComs the controller hands the runner: finished tasks' return values and pushed keys."""

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
    logical_date: DateTime
    data_interval_start: DateTime
    data_interval_end: DateTime
    #: Zonda's addition: the run's namespace, where operators acting on other runs look for them.
    namespace: str | None = None

    @property
    def execution_date(self) -> DateTime:
        """Airflow's deprecated name of `logical_date`."""
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
    logical_date: DateTime
    xcom_reader: XComReader = field(repr=False)
    map_index: int = -1
    #: What this try pushed with `xcom_push`, by key (the runner returns it with the result).
    pushed: dict[str, Any] = field(default_factory=dict, repr=False)
    #: The DAG's earlier runs (`include_prior_dates`); None where they cannot be read.
    earlier_reader: EarlierXComReader | None = field(default=None, repr=False)

    @property
    def execution_date(self) -> DateTime:
        """Airflow's deprecated name of `logical_date`."""
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
        """This try's own pushes first (Airflow stores them at once), then finished tasks' XComs."""
        if task_id == self.task_id and key in self.pushed:
            return self.pushed[key]
        return self.xcom_reader(task_id, key)

    def xcom_push(self, key: str, value: Any, execution_date: Any = None) -> None:
        """Airflow's `TaskInstance.xcom_push`: the value becomes this task's XCom `key` when it succeeds.

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
) -> dict[str, Any]:
    """Airflow's template context (`TaskInstance.get_template_context`) for one try.

    `params` are the DAG's, then the task's (`task_params`), then the DagRun's `conf` on top, as
    Airflow with `dag_run_conf_overrides_params`. Dates are in UTC, as Airflow's are. Every value is
    built afresh (conf and params deep-copied) so a template or an operator changing them changes
    nothing else. `xcom_reader` defaults to the XComs carried by the invocation; `earlier_reader` reads
    the DAG's earlier runs for `include_prior_dates` (none: such a pull is refused).
    """
    reader = folding_mapped(xcom_reader or read_invocation_xcoms(invocation), invocation.mapped_counts)
    logical_date = _utc(invocation.logical_date)
    ds = logical_date.strftime("%Y-%m-%d")
    ts = logical_date.isoformat()
    run_id = invocation.run_name
    conf = copy.deepcopy(invocation.conf)
    params = {**copy.deepcopy(invocation.params), **copy.deepcopy(dict(task_params or {})), **conf}
    dag = ContextDag(dag_id=invocation.dag_name, timezone=pendulum.timezone(invocation.timezone))
    dag_run = ContextDagRun(
        dag_id=invocation.dag_name,
        run_id=run_id,
        run_type=invocation.run_type.value,
        conf=copy.deepcopy(conf),
        logical_date=logical_date,
        data_interval_start=_utc(invocation.data_interval_start),
        data_interval_end=_utc(invocation.data_interval_end),
        namespace=invocation.namespace,
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
    )
    return {
        "conf": AirflowConfig(configuration or {}),
        "dag": dag,
        "dag_run": dag_run,
        "data_interval_start": dag_run.data_interval_start,
        "data_interval_end": dag_run.data_interval_end,
        "ds": ds,
        "ds_nodash": ds.replace("-", ""),
        "execution_date": logical_date,
        "inlets": [],
        "logical_date": logical_date,
        "macros": MACROS,
        "outlets": [],
        "params": params,
        "prev_data_interval_start_success": _utc_or_none(invocation.prev_data_interval_start_success),
        "prev_data_interval_end_success": _utc_or_none(invocation.prev_data_interval_end_success),
        "run_id": run_id,
        "task": ContextTask(task_id=invocation.task_id, dag_id=invocation.dag_name),
        "task_instance": task_instance,
        "task_instance_key_str": f"{invocation.dag_name}__{invocation.task_id}__{ds.replace('-', '')}",
        "templates_dict": None,
        "test_mode": False,
        "ti": task_instance,
        "ts": ts,
        "ts_nodash": logical_date.strftime("%Y%m%dT%H%M%S"),
        "ts_nodash_with_tz": ts.replace("-", "").replace(":", ""),
        **variables.template_variables(),  # var, conn: read from the try's environment
    }


def _utc(moment: dt.datetime) -> DateTime:
    """A pendulum DateTime in UTC; a naive datetime is taken as UTC (the CRDs store UTC)."""
    return pendulum.instance(moment, tz=pendulum.UTC).in_timezone(pendulum.UTC)


def _utc_or_none(moment: dt.datetime | None) -> DateTime | None:
    return None if moment is None else _utc(moment)


# --------------------------------------------------------------------------------------- rendering


@functools.cache
def _environment_classes() -> tuple[
    type[jinja2.Environment], type[jinja2.Environment], type[jinja2.Undefined]
]:
    """Airflow's sandbox (text and native), with Zonda's undefined-name hints; Jinja is imported only
    when a try needs it."""
    import jinja2.nativetypes
    import jinja2.sandbox

    class ContextUndefined(jinja2.StrictUndefined):
        """StrictUndefined that says what to write instead of an Airflow variable Zonda lacks."""

        __slots__ = ()

        @property
        def _undefined_message(self) -> str:
            message: str = super()._undefined_message
            if self._undefined_obj is jinja2.utils.missing and not self._undefined_hint:
                hint = _MISSING_VARIABLE_HINTS.get(str(self._undefined_name))
                if hint:
                    return f"{message}: {hint}"
            return message

    class SandboxedEnvironment(jinja2.sandbox.SandboxedEnvironment):
        def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
            """Airflow's rule: ``_private`` attributes are readable, ``__internal__`` ones never."""
            return not jinja2.sandbox.is_internal_attribute(obj, attr)

    class SandboxedNativeEnvironment(SandboxedEnvironment, jinja2.nativetypes.NativeEnvironment):
        """`render_template_as_native_obj`: Jinja's native types, still sandboxed (Airflow's is not)."""

    return SandboxedEnvironment, SandboxedNativeEnvironment, ContextUndefined


def _date_filter(fmt: str) -> Callable[[dt.date | None], str | None]:
    def apply(value: dt.date | None) -> str | None:
        return None if value is None else value.strftime(fmt)

    return apply


def _ts_filter(value: dt.date | None) -> str | None:
    return None if value is None else value.isoformat()


def _ts_nodash_with_tz_filter(value: dt.date | None) -> str | None:
    return None if value is None else value.isoformat().replace("-", "").replace(":", "")


#: Airflow's template filters (`airflow/templates.py`).
FILTERS: dict[str, Callable[[dt.date | None], str | None]] = {
    "ds": _date_filter("%Y-%m-%d"),
    "ds_nodash": _date_filter("%Y%m%d"),
    "ts": _ts_filter,
    "ts_nodash": _date_filter("%Y%m%dT%H%M%S"),
    "ts_nodash_with_tz": _ts_nodash_with_tz_filter,
}


def create_environment(
    *,
    native: bool = False,
    macros: Mapping[str, Any] | None = None,
    filters: Mapping[str, Callable[..., Any]] | None = None,
) -> jinja2.Environment:
    """Airflow's template environment (`DAG.get_template_env`): sandboxed, strict about undefined names,
    `do` and date filters; `macros` become globals and `filters` filters, as a DAG's user-defined ones;
    `native` renders to Python objects (`render_template_as_native_obj`)."""
    text_class, native_class, undefined = _environment_classes()
    environment_class = native_class if native else text_class
    environment = environment_class(undefined=undefined, extensions=["jinja2.ext.do"], cache_size=0)
    environment.filters.update(FILTERS)
    environment.filters.update(filters or {})
    environment.globals.update(macros or {})
    return environment


def invocation_environment(invocation: TaskInvocation) -> jinja2.Environment | None:
    """The environment the DAG's templating settings ask for; None for the default one.

    User-defined macros and filters are import paths or `dagfile:` references, imported here (in the
    task runner): one that cannot be imported is a `TemplateError` naming it.
    """
    if not (
        invocation.user_defined_macros
        or invocation.user_defined_filters
        or invocation.render_template_as_native_obj
    ):
        return None
    return create_environment(
        native=invocation.render_template_as_native_obj,
        macros=_import_all(invocation.user_defined_macros, "user_defined_macros"),
        filters=_import_all(invocation.user_defined_filters, "user_defined_filters"),
    )


def _import_all(paths: Mapping[str, str], where: str) -> dict[str, Any]:
    imported: dict[str, Any] = {}
    for name, path in paths.items():
        try:
            if path.startswith("dagfile:"):
                from zonda.authoring.dag_files import load_template_value  # imports the user's DAG file

                imported[name] = load_template_value(path)
            else:
                imported[name] = import_string(path)
        except ImportError as error:
            raise TemplateError(f"{where}.{name}", f"cannot import {path!r}: {error}") from error
    return imported


@functools.cache
def _default_environment() -> jinja2.Environment:
    return create_environment()


def render(
    value: Any,
    context: Mapping[str, Any],
    *,
    field: str | None = None,
    environment: jinja2.Environment | None = None,
) -> Any:
    """Render a template field as Airflow's `render_template`: strings are templates; lists, tuples,
    sets and dict values are rendered element by element (dict keys are not); anything else is
    returned as is. Errors raise `TemplateError` naming `field` and the path inside it."""
    return _render(value, dict(context), field, environment)


def render_fields(
    values: Mapping[str, Any], fields: Iterable[str], context: Mapping[str, Any]
) -> dict[str, Any]:
    """A copy of `values` with the entries named in `fields` (an operator's `template_fields`) rendered."""
    rendered = dict(values)
    for name in fields:
        if name in rendered:
            rendered[name] = render(rendered[name], context, field=name)
    return rendered


#: Jinja's newlines: a template's text comes out with each turned into "\n".
_NEWLINES = re.compile(r"\r\n|\r|\n")


def _as_plain_text(template: str) -> str:
    """What Jinja renders for a template without `{` (no tag can start): its text, with newlines
    normalised and one trailing newline dropped (`keep_trailing_newline=False`), as Jinja's lexer does."""
    lines = _NEWLINES.split(template)
    if lines[-1] == "":
        del lines[-1]
    return "\n".join(lines)


def _render(
    value: Any, context: dict[str, Any], path: str | None, environment: jinja2.Environment | None
) -> Any:
    if isinstance(value, str):
        if "{" not in value and environment is None:
            return _as_plain_text(value)  # most commands: no need to import and run Jinja
        import jinja2

        try:
            return (environment or _default_environment()).from_string(value).render(context)
        except jinja2.TemplateSyntaxError as exc:
            raise TemplateError(path, f"{exc.message} (line {exc.lineno})") from exc
        except jinja2.TemplateError as exc:  # undefined names, sandbox refusals
            raise TemplateError(path, str(exc.message)) from exc
        except Exception as exc:  # raised by what the template called (macros, methods)
            raise TemplateError(path, f"{type(exc).__name__}: {exc}") from exc
    if isinstance(value, Mapping):
        return {key: _render(item, context, f"{path or ''}.{key}".lstrip("."), environment)
                for key, item in value.items()}  # fmt: skip
    if isinstance(value, list | tuple):
        items = [
            _render(item, context, f"{path or ''}[{index}]", environment) for index, item in enumerate(value)
        ]
        if isinstance(value, tuple):
            return type(value)(*items) if hasattr(value, "_fields") else tuple(items)  # namedtuples too
        return items
    if isinstance(value, set | frozenset):
        return type(value)(_render(item, context, path, environment) for item in value)
    return value
