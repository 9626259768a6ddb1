"""Jinja templating of operator arguments, as Airflow's `render_template` does it.

`render` renders a template field: strings are templates, containers are rendered element by element;
the context comes from `zonda.tries.task_context.build_context`. The environment is Airflow's: sandboxed
(DagRun `conf` and `params` come from whoever triggers the run, so nothing reachable from a template
may lead to Python internals), `StrictUndefined` (a misspelt variable is an error naming it, never an
empty string), the `do` extension and Airflow's date filters. As in Airflow, attributes starting
with one underscore are allowed and those with two are not. Jinja is imported only when a string
has something to render.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from zonda.resources.invocations import TaskInvocation
from zonda.specs.imports import import_string

if TYPE_CHECKING:
    import jinja2


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
