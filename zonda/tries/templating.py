"""Jinja templating of operator arguments, as Airflow's `render_template` does it.

`render` renders a template field: strings are templates, containers are rendered element by element;
the context comes from `zonda.tries.task_context.build_context`. The environment is Airflow's: sandboxed
(DagRun `conf` and `params` come from whoever triggers the run, so nothing reachable from a template
may lead to Python internals), `StrictUndefined` (a misspelt variable is an error naming it, never an
empty string), the `do` extension and Airflow's date filters. As in Airflow, attributes starting
with one underscore are allowed and those with two are not. Jinja is imported only when a string
has something to render.

Rendering is bounded (`TemplateLimits`): a rendered string, the strings of one task together, and the
time one task's rendering takes each have a limit, and going past one is a `TemplateError` naming the
field and the limit, raised before the memory is spent where Jinja lets us see it coming (`'a' * 10**9`,
`'x'.ljust(10**9)`, `10 ** 10 ** 9`) and as soon as the output crosses it otherwise (loops). The time
limit is checked at every call, attribute read, operator and output chunk the template makes, so it
holds in any thread (the controller and the UI render too), without signals; one C-level operation
that runs long by itself is bounded by the size checks, not interrupted. Limits come from the
environment (`TemplateLimits.from_environ`: ZONDA_TEMPLATE_MAX_CHARS, ZONDA_TEMPLATE_MAX_TASK_CHARS,
ZONDA_TEMPLATE_TIMEOUT_SECONDS), read by the process that renders; see docs/security.md.
"""

from __future__ import annotations

import contextvars
import datetime as dt
import functools
import math
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
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
    "execution_date": "removed in Airflow 3 (this DAG is read as Airflow 3): use logical_date",
    "conf": "removed from the context in Airflow 3: use `from airflow.configuration import conf`",
    **dict.fromkeys(
        (
            "ds", "ds_nodash", "ts", "ts_nodash", "ts_nodash_with_tz", "logical_date",
            "data_interval_start", "data_interval_end",
            "prev_data_interval_start_success", "prev_data_interval_end_success",
        ),
        "this run has no logical date (an Airflow 3 manual run triggered without one), so no key "
        "derived from it: use dag_run.run_after, or trigger it with a logical date",
    ),
}  # fmt: skip


class TemplateError(ValueError):
    """A template field that cannot be rendered; the message names the field and Jinja's reason."""

    def __init__(self, field: str | None, reason: str) -> None:
        super().__init__(f"cannot render {field or 'template'}: {reason}")
        self.field = field
        self.reason = reason


@dataclass(frozen=True)
class TemplateLimits:
    """How much one try's templates may render. Defaults are far above what any real template renders
    (a bash command is refused by the kernel past 128 KiB) and far below what hurts a process."""

    #: Characters one rendered string (one template) may have.
    max_chars: int = 4_000_000
    #: Characters all the strings rendered for one task (every template field) may have together.
    max_task_chars: int = 16_000_000
    #: Seconds all of one task's rendering may take.
    timeout_seconds: float = 30.0

    #: The environment variables `from_environ` reads, by field.
    ENVIRON = {
        "max_chars": "ZONDA_TEMPLATE_MAX_CHARS",
        "max_task_chars": "ZONDA_TEMPLATE_MAX_TASK_CHARS",
        "timeout_seconds": "ZONDA_TEMPLATE_TIMEOUT_SECONDS",
    }

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> TemplateLimits:
        """The limits a process's environment sets (unset: the defaults). A value that is not a positive
        number is a ValueError naming the variable."""
        values: dict[str, Any] = {}
        for name, variable in cls.ENVIRON.items():
            text = environ.get(variable)
            if text is None or text == "":
                continue
            try:
                number = float(text) if name == "timeout_seconds" else int(text)
            except ValueError:
                raise ValueError(f"{variable}={text!r} is not a number") from None
            if not number > 0:
                raise ValueError(f"{variable}={text!r} must be positive")
            values[name] = number
        return cls(**values)


class TemplateLimitExceeded(Exception):
    """Raised inside a render when a limit is crossed; `render` turns it into a TemplateError."""


@dataclass
class RenderBudget:
    """What one task's rendering has left: characters, and time until a deadline (monotonic clock).

    Made once per task (`budget`) and passed to each `render` of its fields, so the per-task limit
    counts them all; `render` without one makes a budget for that call alone."""

    limits: TemplateLimits = field(default_factory=TemplateLimits)
    chars: int = 0
    deadline: float = 0.0

    def __post_init__(self) -> None:
        if not self.deadline:
            self.deadline = render_clock() + self.limits.timeout_seconds

    def check_time(self) -> None:
        if render_clock() > self.deadline:
            raise TemplateLimitExceeded(
                f"rendering took longer than the limit of {self.limits.timeout_seconds:g}s per task "
                f"({TemplateLimits.ENVIRON['timeout_seconds']})"
            )

    def check_size(self, chars: int, *, so_far: int = 0) -> None:
        """Refuse a string of `chars` characters (in a template that has rendered `so_far` already)."""
        if so_far + chars > self.limits.max_chars:
            raise TemplateLimitExceeded(
                f"the rendered text would exceed the limit of {self.limits.max_chars} characters per "
                f"template ({TemplateLimits.ENVIRON['max_chars']})"
            )
        if self.chars + so_far + chars > self.limits.max_task_chars:
            raise TemplateLimitExceeded(
                f"the task's rendered templates would exceed the limit of {self.limits.max_task_chars} "
                f"characters per task ({TemplateLimits.ENVIRON['max_task_chars']})"
            )


def render_clock() -> float:
    """The monotonic clock the time limit is measured on (one function, so tests can pin it)."""
    return time.monotonic()


def budget(limits: TemplateLimits | None = None) -> RenderBudget:
    """A fresh budget for one task's rendering."""
    return RenderBudget(limits or TemplateLimits())


#: The budget of the render running in this context (thread or task): what the sandbox checks.
_current_budget: contextvars.ContextVar[RenderBudget | None] = contextvars.ContextVar(
    "zonda_template_budget", default=None
)

#: str methods that allocate a result sized by an argument: (method, index of the width argument).
_WIDTH_METHODS = {"ljust": 0, "rjust": 0, "center": 0, "zfill": 0, "expandtabs": 0}


def _sized(value: Any) -> int | None:
    return len(value) if isinstance(value, str | bytes | list | tuple) else None


def _check_binop(operator: str, left: Any, right: Any) -> None:
    """Refuse, before computing it, an operation whose result is past the budget's size."""
    budget = _current_budget.get()
    if budget is None:
        return
    budget.check_time()
    if operator == "*":
        for sequence, count in ((left, right), (right, left)):
            size = _sized(sequence)
            if size is not None and isinstance(count, int) and not isinstance(count, bool):
                budget.check_size(size * max(count, 0))
    elif operator == "+":
        left_size, right_size = _sized(left), _sized(right)
        if left_size is not None and right_size is not None:
            budget.check_size(left_size + right_size)
    elif operator == "%" and isinstance(left, str):
        _check_width_arguments(budget, right if isinstance(right, tuple) else (right,))
    elif (
        operator == "**"
        and isinstance(left, int)
        and isinstance(right, int)
        and abs(left) > 1
        and right > 0
        and right * math.log10(abs(left)) > budget.limits.max_chars  # the result's decimal digits
    ):
        budget.check_size(budget.limits.max_chars + 1)


def _check_width_arguments(budget: RenderBudget, args: Iterable[Any]) -> None:
    """printf-style formatting (`%`, the `format` filter) pads to any int it is given: refuse one that
    alone is past the size limit (`"%*s" % (10**9, "")`)."""
    for arg in args:
        if isinstance(arg, int) and not isinstance(arg, bool):
            budget.check_size(abs(arg))


#: Filters that pad or repeat to an argument (Jinja's `center(width)`, `indent(width)`, `format(*args)`).
_WIDTH_FILTERS = frozenset({"center", "indent", "format", "wordwrap", "truncate"})


def _bounded_filter(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    """A filter that checks the render's budget: time before, width arguments before, size after.
    `functools.wraps` keeps Jinja's `pass_context`-style markers, which live in the function's dict."""

    @functools.wraps(function)
    def bounded(*args: Any, **kwargs: Any) -> Any:
        budget = _current_budget.get()
        if budget is not None:
            budget.check_time()
            if name in _WIDTH_FILTERS:
                _check_width_arguments(budget, [*args[1:], *kwargs.values()])
        return _check_result(function(*args, **kwargs))

    return bounded


def _check_call(obj: Any, args: tuple[Any, ...]) -> None:
    budget = _current_budget.get()
    if budget is None:
        return
    budget.check_time()
    owner = getattr(obj, "__self__", None)
    index = _WIDTH_METHODS.get(getattr(obj, "__name__", ""))
    if isinstance(owner, str) and index is not None and len(args) > index and isinstance(args[index], int):
        width = args[index]
        if obj.__name__ == "expandtabs":
            width = width * max(owner.count("\t"), 0) + len(owner)
        budget.check_size(width)


def _check_result(result: Any) -> Any:
    budget = _current_budget.get()
    size = _sized(result)
    if budget is not None and size is not None:
        budget.check_size(size)
    return result


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
        #: Operators checked against the render's budget before they run (`_check_binop`).
        intercepted_binops = frozenset({"*", "+", "**", "%"})

        def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
            """Airflow's rule: ``_private`` attributes are readable, ``__internal__`` ones never. Nor
            name-mangled ones (``self._TemplateReference__context``), nor anything that is Jinja's own
            machinery: the render's Context or the Environment, which is shared by every render in
            the process (the UI's, the controller's) and whose globals and filters a template could
            otherwise change for the others."""
            if jinja2.sandbox.is_internal_attribute(obj, attr) or _NAME_MANGLED.match(attr):
                return False
            return not isinstance(value, jinja2.Environment | jinja2.runtime.Context)

        def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
            _check_binop(operator, left, right)
            return super().call_binop(context, operator, left, right)

        def getattr(self, obj: Any, attribute: str) -> Any:
            budget = _current_budget.get()
            if budget is not None:
                budget.check_time()
            return super().getattr(obj, attribute)

        def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
            _check_call(__obj, args)
            return _check_result(super().call(__context, __obj, *args, **kwargs))

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
    template_files: Mapping[str, str] | None = None,
) -> jinja2.Environment:
    """Airflow's template environment (`DAG.get_template_env`): sandboxed, strict about undefined names,
    `do` and date filters; `macros` become globals and `filters` filters, as a DAG's user-defined ones;
    `native` renders to Python objects (`render_template_as_native_obj`). Its loader is Airflow's
    `FileSystemLoader` over the DAG's folder and `template_searchpath` as the render read it: the
    `template_files` the manifest carries (`spec.templateFiles`, name -> text), so a field naming one
    (`template_ext`) and `{% include %}` find it, and any other name is `TemplateNotFound`."""
    import jinja2

    text_class, native_class, undefined = _environment_classes()
    environment_class = native_class if native else text_class
    environment = environment_class(
        undefined=undefined,
        extensions=["jinja2.ext.do"],
        cache_size=0,
        loader=jinja2.DictLoader(dict(template_files or {})),
    )
    environment.filters.update(FILTERS)
    environment.filters.update(filters or {})
    environment.filters = {name: _bounded_filter(name, f) for name, f in environment.filters.items()}
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
        or invocation.template_files
    ):
        return None
    return create_environment(
        native=invocation.render_template_as_native_obj,
        macros=_import_all(invocation.user_defined_macros, "user_defined_macros"),
        filters=_import_all(invocation.user_defined_filters, "user_defined_filters"),
        template_files=invocation.template_files,
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
    budget: RenderBudget | None = None,
    template_ext: Sequence[str] = (),
) -> Any:
    """Render a template field as Airflow's `render_template`: strings are templates; lists, tuples,
    sets and dict values are rendered element by element (dict keys are not); anything else is
    returned as is. A string ending with one of `template_ext` (the operator's) names a template file,
    found through the environment's loader (`create_environment`'s `template_files`), as Airflow's
    `jinja_env.get_template`; `"script.sh "` (a trailing space) is a string again. Errors raise
    `TemplateError` naming `field` and the path inside it, a file not found and a limit of `budget`
    (the task's; None: one of default limits for this call) crossed included."""
    spent = budget or RenderBudget()
    token = _current_budget.set(spent)
    try:
        return _render(value, dict(context), field, environment, tuple(template_ext))
    finally:
        _current_budget.reset(token)


def render_fields(
    values: Mapping[str, Any],
    fields: Iterable[str],
    context: Mapping[str, Any],
    *,
    limits: TemplateLimits | None = None,
) -> dict[str, Any]:
    """A copy of `values` with the entries named in `fields` (an operator's `template_fields`) rendered,
    all within one task's budget."""
    rendered = dict(values)
    spent = budget(limits)
    for name in fields:
        if name in rendered:
            rendered[name] = render(rendered[name], context, field=name, budget=spent)
    return rendered


#: A private attribute as Python mangles it inside a class (`_Class__name`).
_NAME_MANGLED = re.compile(r"^_[A-Za-z0-9]\w*?__\w")

#: Jinja's newlines: a template's text comes out with each turned into "\n".
_NEWLINES = re.compile(r"\r\n|\r|\n")


def _as_plain_text(template: str) -> str:
    """What Jinja renders for a template without `{` (no tag can start): its text, with newlines
    normalised and one trailing newline dropped (`keep_trailing_newline=False`), as Jinja's lexer does."""
    lines = _NEWLINES.split(template)
    if lines[-1] == "":
        del lines[-1]
    return "\n".join(lines)


def _bounded_render(template: jinja2.Template, context: dict[str, Any]) -> Any:
    """`template.render(context)`, its output counted chunk by chunk against the render's budget."""
    import jinja2.nativetypes

    budget = _current_budget.get()
    assert budget is not None  # set by `render`
    counted = 0

    def chunks() -> Iterator[Any]:
        nonlocal counted
        for chunk in template.root_render_func(template.new_context(context)):
            budget.check_time()
            if isinstance(chunk, str):
                budget.check_size(len(chunk), so_far=counted)
                counted += len(chunk)
            yield chunk

    try:
        if isinstance(template.environment, jinja2.nativetypes.NativeEnvironment):
            result = jinja2.nativetypes.native_concat(chunks())
        else:
            result = template.environment.concat(chunks())
    except TemplateLimitExceeded:
        raise
    except Exception:
        template.environment.handle_exception()  # Jinja's traceback rewriting, then re-raised
    budget.chars += counted
    return result


def _render(
    value: Any,
    context: dict[str, Any],
    path: str | None,
    environment: jinja2.Environment | None,
    template_ext: tuple[str, ...] = (),
) -> Any:
    if isinstance(value, str):
        is_file = bool(template_ext) and value.endswith(template_ext)
        if "{" not in value and environment is None and not is_file:
            return _as_plain_text(value)  # most commands: no need to import and run Jinja
        import jinja2

        env = environment or _default_environment()
        try:
            template = env.get_template(value) if is_file else env.from_string(value)
            return _bounded_render(template, context)
        except TemplateLimitExceeded as exc:
            raise TemplateError(path, str(exc)) from None
        except jinja2.TemplateNotFound as exc:  # a file named by the field, or by {% include %} in it
            raise TemplateError(path, _not_found(exc.name, env)) from exc
        except jinja2.TemplateSyntaxError as exc:
            raise TemplateError(path, f"{exc.message} (line {exc.lineno})") from exc
        except jinja2.TemplateError as exc:  # undefined names, sandbox refusals
            raise TemplateError(path, str(exc.message)) from exc
        except Exception as exc:  # raised by what the template called (macros, methods)
            raise TemplateError(path, f"{type(exc).__name__}: {exc}") from exc
    if isinstance(value, Mapping):
        return {key: _render(item, context, f"{path or ''}.{key}".lstrip("."), environment, template_ext)
                for key, item in value.items()}  # fmt: skip
    if isinstance(value, list | tuple):
        items = [
            _render(item, context, f"{path or ''}[{index}]", environment, template_ext)
            for index, item in enumerate(value)
        ]
        if isinstance(value, tuple):
            return type(value)(*items) if hasattr(value, "_fields") else tuple(items)  # namedtuples too
        return items
    if isinstance(value, set | frozenset):
        return type(value)(_render(item, context, path, environment, template_ext) for item in value)
    return value


def _not_found(name: Any, environment: jinja2.Environment) -> str:
    """Airflow's `TemplateNotFound`, saying where Zonda looked: the files the DAG's render read."""
    carried = sorted(getattr(environment.loader, "mapping", None) or ())
    known = f"it carries {', '.join(map(repr, carried))}" if carried else "it carries none"
    return (
        f"TemplateNotFound: template file {name!r} was not found: template files are read from the DAG "
        "file's folder and template_searchpath when the DAG is rendered and carried in its manifest "
        f"(spec.templateFiles); {known}"
    )
