"""Templates are bounded (size per template, size per task, time per task) and known server-side
template-injection payloads stay inert in Zonda's sandbox.

The time limit is proved with a pinned clock (`templating.render_clock`), the size limits by the
memory a refused template allocated (tracemalloc), never by how long a test took.
"""

from __future__ import annotations

import itertools
import tracemalloc
from typing import Any

import pytest

from tests.unit.zonda.tries.test_templating import invocation, rendered
from zonda.operators.bash import BashOperator
from zonda.tries import templating
from zonda.tries.task_context import build_context
from zonda.tries.templating import RenderBudget, TemplateError, TemplateLimits, render, render_fields

PER_TEMPLATE = "limit of 4000000 characters per template (ZONDA_TEMPLATE_MAX_CHARS)"
PER_TASK = "characters per task (ZONDA_TEMPLATE_MAX_TASK_CHARS)"


def context() -> dict[str, Any]:
    return build_context(invocation())


# ------------------------------------------------------------------------------------------ size


HUGE = [
    pytest.param("echo {{ 'a' * 10**9 }}", id="a string repeated (the issue's 1 GB bash_command)"),
    pytest.param("{{ 10**9 * 'a' }}", id="repeated, the count first"),
    pytest.param("{{ [1] * 10**9 }}", id="a list repeated"),
    pytest.param("{{ 'x'.ljust(10**9) }}", id="str.ljust"),
    pytest.param("{{ 'x'.center(10**9) }}", id="str.center"),
    pytest.param("{{ 'x'.zfill(10**9) }}", id="str.zfill"),
    pytest.param("{{ 'x' | center(10**9) }}", id="the center filter"),
    pytest.param("{{ 'x' | indent(10**9, true) }}", id="the indent filter"),
    pytest.param("{{ '%*s' % (10**9, 'a') }}", id="printf padding"),
    pytest.param("{{ '%*s' | format(10**9, 'a') }}", id="the format filter's padding"),
    pytest.param("{{ 10 ** (10 ** 9) }}", id="an integer of a billion digits"),
    pytest.param(
        "{% for i in range(99999) %}{% for j in range(99999) %}{{ 'abcdefghij' * 9 }}"
        "{% endfor %}{% endfor %}",
        id="a loop's output",
    ),
]


@pytest.mark.parametrize("template", HUGE)
def test_a_template_past_the_size_limit_fails_naming_the_field_and_the_limit(template: str) -> None:
    tracemalloc.start()
    try:
        with pytest.raises(TemplateError) as caught:
            rendered(template)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert str(caught.value).startswith("cannot render bash_command: "), caught.value
    assert PER_TEMPLATE in str(caught.value)
    # Refused before the memory was spent: the 1 GB string (or list) was never built.
    assert peak < 64 * 1024 * 1024, f"{peak / 2**20:.0f} MiB allocated"


def test_a_template_under_the_limits_renders_as_before() -> None:
    text = rendered("{{ 'ab' * 3 }} {{ ds }} {{ 'x'.ljust(3) }}|{{ '%5s' % 'a' }}")
    assert text == "ababab 2024-03-05 x  |    a"


def test_the_task_limit_counts_every_field_of_the_task() -> None:
    limits = TemplateLimits(max_chars=1000, max_task_chars=1500)
    values = {"bash_command": "{{ 'a' * 800 }}", "env": {"X": "{{ 'b' * 800 }}"}}
    with pytest.raises(TemplateError) as caught:
        render_fields(values, ["bash_command", "env"], context(), limits=limits)
    assert caught.value.field == "env.X"
    assert "limit of 1500 characters per task (ZONDA_TEMPLATE_MAX_TASK_CHARS)" in str(caught.value)
    # each alone fits
    assert len(render_fields(values, ["bash_command"], context(), limits=limits)["bash_command"]) == 800


def test_an_operator_renders_its_fields_within_one_budget() -> None:
    operator = BashOperator(task_id="t", bash_command="echo {{ 'a' * 10**9 }}")
    with pytest.raises(TemplateError, match=r"cannot render bash_command: .*per template"):
        operator.render_template_fields(context())
    small = TemplateLimits(max_chars=10)
    operator = BashOperator(task_id="t", bash_command="echo {{ 'a' * 20 }}")
    with pytest.raises(TemplateError, match=r"limit of 10 characters per template"):
        operator.render_template_fields(context(), limits=small)


# ------------------------------------------------------------------------------------------ time


@pytest.fixture
def a_second_per_look(monkeypatch: pytest.MonkeyPatch) -> None:
    """A clock that moves one second each time the budget looks at it."""
    ticks = itertools.count()
    monkeypatch.setattr(templating, "render_clock", lambda: float(next(ticks)))


SLOW = [
    pytest.param(
        "{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}", id="loops"
    ),
    pytest.param("{% for i in range(99999) %}{{ ds }}{% endfor %}", id="output"),
    pytest.param("{% for i in range(99999) %}{% do params.get('x') %}{% endfor %}", id="calls"),
]


@pytest.mark.usefixtures("a_second_per_look")
@pytest.mark.parametrize("template", SLOW)
def test_a_template_past_the_time_limit_fails_naming_the_field_and_the_limit(template: str) -> None:
    limits = TemplateLimits(timeout_seconds=5)
    with pytest.raises(TemplateError) as caught:
        render(template, context(), field="bash_command", budget=RenderBudget(limits))
    assert str(caught.value) == (
        "cannot render bash_command: rendering took longer than the limit of 5s per task "
        "(ZONDA_TEMPLATE_TIMEOUT_SECONDS)"
    )


@pytest.mark.usefixtures("a_second_per_look")
def test_the_time_limit_is_per_task_not_per_field() -> None:
    budget = RenderBudget(TemplateLimits(timeout_seconds=4))
    render("{{ ds }}", context(), field="a", budget=budget)  # a few looks at the clock
    with pytest.raises(TemplateError, match="cannot render b: rendering took longer"):
        render("{% for i in range(10) %}{{ ds }}{% endfor %}", context(), field="b", budget=budget)


# --------------------------------------------------------------------------------- configuration


def test_limits_come_from_the_environment() -> None:
    assert TemplateLimits.from_environ({}) == TemplateLimits()
    assert TemplateLimits.from_environ(
        {"ZONDA_TEMPLATE_MAX_CHARS": "10", "ZONDA_TEMPLATE_MAX_TASK_CHARS": "20",
         "ZONDA_TEMPLATE_TIMEOUT_SECONDS": "1.5"}
    ) == TemplateLimits(max_chars=10, max_task_chars=20, timeout_seconds=1.5)  # fmt: skip


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"ZONDA_TEMPLATE_MAX_CHARS": "lots"}, "ZONDA_TEMPLATE_MAX_CHARS='lots' is not a number"),
        ({"ZONDA_TEMPLATE_TIMEOUT_SECONDS": "0"}, "ZONDA_TEMPLATE_TIMEOUT_SECONDS='0' must be positive"),
    ],
)
def test_a_bad_limit_is_an_error_naming_the_variable(environ: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TemplateLimits.from_environ(environ)


# ------------------------------------------------------------------------- template injection

#: Known server-side template injection payloads (PayloadsAllTheThings' Jinja2 list, HackTricks'
#: SSTI page, and what reaches Airflow's own context), each of which must be refused by the sandbox
#: or undefined in Zonda's context: none may reach a module, a function's globals, or Jinja itself.
INJECTIONS = [
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ ''.__class__.__base__.__subclasses__()[104].__init__.__globals__['sys'] }}",
    "{{ ().__class__.__bases__[0].__subclasses__() }}",
    "{{ [].__class__.__base__.__subclasses__() }}",
    "{{ ()|attr('__class__')|attr('__base__')|attr('__subclasses__')() }}",
    "{{ ''|attr('\\x5f\\x5fclass\\x5f\\x5f') }}",
    "{{ ''|attr('_'*2 ~ 'class' ~ '_'*2) }}",
    "{{ ''[request.args.c] }}",
    "{{ cycler.__init__.__globals__.os.popen('id').read() }}",
    "{{ joiner.__init__.__globals__.os.popen('id').read() }}",
    "{{ namespace.__init__.__globals__.os.popen('id').read() }}",
    "{{ lipsum.__globals__['os'].popen('id').read() }}",
    "{{ lipsum.__globals__.__builtins__.__import__('os').popen('id').read() }}",
    "{{ lipsum|attr('__globals__') }}",
    "{{ range.__init__.__globals__ }}",
    "{{ dict.__init__.__globals__ }}",
    "{{ request.application.__globals__.__builtins__.__import__('os').popen('id').read() }}",
    "{{ config.__class__.__init__.__globals__['os'].popen('id').read() }}",
    "{{ config.items() }}",
    "{{ get_flashed_messages.__globals__ }}",
    "{{ url_for.__globals__.os }}",
    "{{ self.__init__.__globals__.__builtins__ }}",
    "{{ self.__dict__ }}",
    "{{ self._TemplateReference__context }}",
    "{{ self._TemplateReference__context.environment.globals }}",
    "{% do self._TemplateReference__context.environment.filters.update({'ds': lipsum}) %}",
    "{{ '{0.__class__.__mro__}'.format('') }}",
    "{{ '{0.__globals__}'.format(lipsum) }}",
    "{{ ''.format_map.__self__.__class__ }}",
    "{{ ''.join.__self__.__class__ }}",
    "{{ macros.__dict__ }}",
    "{{ macros.ds_add.__globals__ }}",
    "{{ macros.json.loads.__globals__['codecs'] }}",
    "{{ macros.uuid.os }}",
    "{{ ti.xcom_pull.__func__.__globals__ }}",
    "{{ ti.__class__.__init__.__globals__ }}",
    "{{ dag_run.conf.__class__.__init__.__globals__ }}",
    "{{ params.__class__ }}",
    "{{ var.value.__class__.__init__.__globals__ }}",
    "{{ conn.__class__ }}",
    "{{ task.__class__.__mro__ }}",
    "{{ dag.__class__.__init__.__globals__ }}",
    "{{ (lipsum.__code__) }}",
    "{{ lipsum.__closure__ }}",
    "{% for x in ().__class__.__base__.__subclasses__() %}{{ x }}{% endfor %}",
    "{% set x = namespace() %}{{ x.__class__.__init__.__globals__ }}",
    "{{ ds.__len__.__self__.__class__ }}",
    "{{ ds.encode().decode.__self__.__class__ }}",
]


@pytest.mark.parametrize("template", INJECTIONS)
def test_a_known_injection_payload_is_refused(template: str) -> None:
    with pytest.raises(TemplateError) as caught:
        rendered(template)
    reason = caught.value.reason
    assert "unsafe" in reason or "undefined" in reason or "has no attribute" in reason, reason


@pytest.mark.parametrize("template", INJECTIONS)
def test_an_injection_payload_in_conf_is_data(template: str) -> None:
    """A run's conf is never rendered: the payload comes out as the text it is."""
    assert rendered("{{ dag_run.conf.x }}", conf={"x": template}) == template


def test_one_render_cannot_change_what_the_next_one_sees() -> None:
    """The default environment is shared by every render in a process (the UI renders every DAG's):
    a template must not reach it to change another's globals or filters."""
    before = rendered("{{ logical_date | ds_nodash }} {{ ds }}")
    for attempt in (
        "{% do self._TemplateReference__context.environment.filters.update({'ds_nodash': lipsum}) %}",
        "{% do self._TemplateReference__context.parent.update({'ds': 'x'}) %}",
    ):
        with pytest.raises(TemplateError):
            rendered(attempt)
    assert rendered("{{ logical_date | ds_nodash }} {{ ds }}") == before == "20240305 2024-03-05"
