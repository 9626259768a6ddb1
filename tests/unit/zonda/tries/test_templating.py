"""Templates see Airflow's context in Airflow's formats, in a sandbox that untrusted conf cannot escape."""

from __future__ import annotations

from collections import namedtuple
from datetime import datetime
from typing import Any

import pendulum
import pytest

from zonda.resources.invocations import TaskInvocation
from zonda.resources.run_types import RunType
from zonda.tries.task_context import build_context
from zonda.tries.templating import TemplateError, render, render_fields


def invocation(**overrides: Any) -> TaskInvocation:
    """The third try of `load` in a daily run whose logical date is 2024-03-05 06:07:08 in Paris."""
    fields: dict[str, Any] = {
        "dag_name": "etl",
        "run_name": "etl-scheduled-20240305",
        "run_type": RunType.SCHEDULED,
        "task_id": "load",
        "try_number": 3,
        "max_tries": 4,
        "operator": "BashOperator",
        "logical_date": datetime.fromisoformat("2024-03-05T06:07:08+01:00"),
        "data_interval_start": datetime.fromisoformat("2024-03-04T00:00:00+00:00"),
        "data_interval_end": datetime.fromisoformat("2024-03-05T00:00:00+00:00"),
        "timezone": "Europe/Paris",
        "conf": {"table": "sales", "limit": 10},
        "params": {"limit": 5, "region": "eu"},
        "xcoms": {"extract": {"rows": 42}, "count": 7},
        "keyed_xcoms": {"extract": {"path": "/data/x"}, "check": {"path": "/data/c"}},
        "prev_data_interval_start_success": datetime.fromisoformat("2024-03-03T00:00:00+00:00"),
        "prev_data_interval_end_success": datetime.fromisoformat("2024-03-04T00:00:00+00:00"),
    }
    fields.update(overrides)
    return TaskInvocation(**fields)


def rendered(template: str, **overrides: Any) -> Any:
    return render(template, build_context(invocation(**overrides)), field="bash_command")


CONTEXT_VARIABLES = [
    pytest.param("{{ ds }}", "2024-03-05", id="ds is the logical date in UTC as YYYY-MM-DD"),
    pytest.param("{{ ds_nodash }}", "20240305", id="ds_nodash drops the dashes"),
    pytest.param("{{ ts }}", "2024-03-05T05:07:08+00:00", id="ts is the logical date in UTC in ISO format"),
    pytest.param("{{ ts_nodash }}", "20240305T050708", id="ts_nodash has no dashes, colons nor offset"),
    pytest.param("{{ ts_nodash_with_tz }}", "20240305T050708+0000", id="ts_nodash_with_tz keeps the offset"),
    pytest.param("{{ logical_date }}", "2024-03-05 05:07:08+00:00", id="logical_date is a UTC datetime"),
    pytest.param(
        "{{ logical_date.add(days=1) | ds }}", "2024-03-06", id="logical_date is a pendulum DateTime"
    ),
    pytest.param(
        "{{ execution_date | ts }}", "2024-03-05T05:07:08+00:00", id="execution_date is logical_date"
    ),
    pytest.param("{{ data_interval_start | ts }}", "2024-03-04T00:00:00+00:00", id="data_interval_start"),
    pytest.param("{{ data_interval_end | ds_nodash }}", "20240305", id="data_interval_end"),
    pytest.param(
        "{{ prev_data_interval_start_success | ds }}", "2024-03-03", id="prev_data_interval_start_success"
    ),
    pytest.param(
        "{{ prev_data_interval_end_success | ds }}", "2024-03-04", id="prev_data_interval_end_success"
    ),
    pytest.param("{{ run_id }}", "etl-scheduled-20240305", id="run_id is the DagRun's name"),
    pytest.param("{{ dag_run.run_id }}", "etl-scheduled-20240305", id="dag_run.run_id"),
    pytest.param(
        "{{ dag_run.run_type }}", "scheduled", id="dag_run.run_type is Airflow's value, not an enum repr"
    ),
    pytest.param("{{ dag_run.conf.table }}", "sales", id="dag_run.conf is the run's conf"),
    pytest.param("{{ dag_run.logical_date | ds }}", "2024-03-05", id="dag_run.logical_date"),
    pytest.param("{{ dag_run.external_trigger }}", "False", id="a scheduled run is not externally triggered"),
    pytest.param("{{ dag.dag_id }}", "etl", id="dag.dag_id"),
    pytest.param("{{ dag.timezone.name }}", "Europe/Paris", id="dag.timezone is the DAG's timezone"),
    pytest.param("{{ task.task_id }}", "load", id="task.task_id"),
    pytest.param("{{ ti.try_number }}/{{ ti.max_tries }}", "3/4", id="ti knows its try"),
    pytest.param(
        "{{ task_instance.dag_id }}.{{ ti.task_id }}@{{ ti.run_id }}",
        "etl.load@etl-scheduled-20240305",
        id="ti and task_instance name the dag, task and run",
    ),
    pytest.param("{{ task_instance_key_str }}", "etl__load__20240305", id="task_instance_key_str"),
    pytest.param(
        "{{ params.limit }} {{ params.region }} {{ params.table }}",
        "10 eu sales",
        id="conf overrides params and adds its own keys, as dag_run_conf_overrides_params",
    ),
    pytest.param("{{ macros.ds_add(ds, -1) }}", "2024-03-04", id="macros.ds_add goes back a day"),
    pytest.param("{{ macros.ds_add(ds, 0) }}", "2024-03-05", id="macros.ds_add of zero days is the same day"),
    pytest.param("{{ macros.ds_format(ds, '%Y-%m-%d', '%d/%m/%y') }}", "05/03/24", id="macros.ds_format"),
    pytest.param(
        "{{ (macros.datetime(2024, 1, 2) + macros.timedelta(days=1)).day }}",
        "3",
        id="macros.datetime and macros.timedelta",
    ),
    pytest.param("{{ macros.json.dumps(params.region) }}", '"eu"', id="macros.json"),
    pytest.param("{{ macros.uuid.uuid5(macros.uuid.NAMESPACE_DNS, 'x').version }}", "5", id="macros.uuid"),
    pytest.param("{{ macros.time.strftime('%Y', macros.time.gmtime(0)) }}", "1970", id="macros.time"),
    pytest.param(
        "{{ conf.get('core', 'dags_folder', 'none') }}",
        "none",
        id="conf is Airflow's configuration, not the run's conf",
    ),
    pytest.param("{% set n = [] %}{% do n.append(1) %}{{ n }}", "[1]", id="the do extension is enabled"),
]


@pytest.mark.parametrize(("template", "expected"), CONTEXT_VARIABLES)
def test_context_variables(template: str, expected: str) -> None:
    assert rendered(template) == expected


def test_dates_are_pendulum_datetimes_in_utc() -> None:
    context = build_context(invocation())
    for name in ("logical_date", "execution_date", "data_interval_start", "data_interval_end"):
        assert isinstance(context[name], pendulum.DateTime)
        assert context[name].utcoffset().total_seconds() == 0


def test_missing_previous_success_is_none() -> None:
    context = build_context(
        invocation(prev_data_interval_start_success=None, prev_data_interval_end_success=None)
    )
    assert context["prev_data_interval_start_success"] is None
    assert render("{{ prev_data_interval_end_success | ds }}", context) == "None"


def test_a_manual_run_is_externally_triggered() -> None:
    assert (
        rendered("{{ dag_run.external_trigger }} {{ dag_run.run_type }}", run_type=RunType.MANUAL)
        == "True manual"
    )


XCOM_PULLS = [
    pytest.param("{{ ti.xcom_pull(task_ids='extract')['rows'] }}", "42", id="one task id gives its value"),
    pytest.param("{{ ti.xcom_pull('count') }}", "7", id="task_ids is the first positional argument"),
    pytest.param(
        "{{ ti.xcom_pull(task_ids=['count', 'extract']) }}",
        "[7, {'rows': 42}]",
        id="a list of task ids gives a list of values in that order",
    ),
    pytest.param(
        "{{ ti.xcom_pull(task_ids=['count', 'nothing']) }}",
        "[7]",
        id="tasks without an XCom are left out of a list, as Airflow's query",
    ),
    pytest.param("{{ ti.xcom_pull(task_ids='nothing') }}", "None", id="a task without an XCom gives None"),
    pytest.param("{{ ti.xcom_pull(task_ids='nothing', default='-') }}", "-", id="or the default asked for"),
    pytest.param(
        "{{ ti.xcom_pull(task_ids='count', key='other') }}",
        "None",
        id="a key the task did not push has no value",
    ),
    pytest.param("{{ ti.xcom_pull('extract', key='path') }}", "/data/x", id="a pushed key"),
    pytest.param(
        "{{ ti.xcom_pull(['extract', 'count', 'check'], key='path') }}",
        "['/data/x', '/data/c']",
        id="a pushed key from several tasks: the values found, in the order asked",
    ),
    pytest.param("{{ ti.xcom_pull('count', map_indexes=-1) }}", "7", id="an unmapped task's map index is -1"),
    pytest.param(
        "{{ ti.xcom_pull('count', map_indexes=[0, 1], default='-') }}",
        "[]",
        id="other map indexes of an unmapped task find nothing (a list of indexes: a list, as Airflow)",
    ),
    pytest.param("{{ ti.xcom_pull('count', map_indexes=0, default='-') }}", "-", id="one index: the default"),
]


@pytest.mark.parametrize(("template", "expected"), XCOM_PULLS)
def test_xcom_pull(template: str, expected: str) -> None:
    assert rendered(template) == expected


def test_xcom_pull_uses_the_given_reader() -> None:
    asked: list[tuple[str, str]] = []

    def reader(task_id: str, key: str) -> Any:
        asked.append((task_id, key))
        return f"{task_id}:{key}"

    context = build_context(invocation(), xcom_reader=reader)
    assert render("{{ ti.xcom_pull('a', key='k') }}", context) == "a:k"
    assert asked == [("a", "k")]


@pytest.mark.parametrize(
    ("template", "reason"),
    [
        pytest.param(
            "{{ ti.xcom_pull() }}", "xcom_pull needs task_ids", id="pulling from any task is refused"
        ),
        pytest.param(
            "{{ ti.xcom_pull('a', dag_id='other') }}",
            "not from 'other'",
            id="pulling from another DAG is refused",
        ),
        pytest.param(
            "{{ ti.xcom_pull('a', include_prior_dates=True) }}",
            "include_prior_dates needs the DAG's runs",
            id="pulling from earlier runs is refused where they cannot be read",
        ),
        pytest.param(
            "{{ ti.xcom_push('k', ti) }}",
            "XCom 'k': ContextTaskInstance",
            id="pushing what JSON cannot hold names the key",
        ),
    ],
)
def test_unsupported_xcom_uses_fail_with_a_reason(template: str, reason: str) -> None:
    with pytest.raises(TemplateError, match=reason):
        rendered(template)


# ------------------------------------------------------------------------------------------ errors

UNDEFINED = [
    pytest.param("{{ nope }}", "'nope' is undefined", id="an undefined variable is named"),
    pytest.param("{{ params.missing }}", "has no attribute 'missing'", id="an undefined param is named"),
    pytest.param("{{ dag_run.conf['missing'] }}", "'missing'", id="a missing conf key is named"),
    pytest.param(
        "{{ yesterday_ds }}",
        "'yesterday_ds' is undefined: use {{ macros.ds_add(ds, -1) }}",
        id="a removed Airflow variable says what to write instead",
    ),
    pytest.param(
        "{{ var.value.zonda_test_absent }}",
        "Variable zonda_test_absent does not exist (variables live in ConfigMaps and Secrets labelled",
        id="a missing Airflow Variable says where variables live",
    ),
]


@pytest.mark.parametrize(("template", "message"), UNDEFINED)
def test_undefined_is_an_error_naming_what_is_missing(template: str, message: str) -> None:
    with pytest.raises(TemplateError) as caught:
        rendered(template)
    assert caught.value.field == "bash_command"
    assert message in str(caught.value)
    assert str(caught.value).startswith("cannot render bash_command: ")


UNSAFE = "unsafe"
SANDBOX_ESCAPES = [
    pytest.param("{{ ''.__class__.__mro__ }}", UNSAFE, id="the class of a string"),
    pytest.param("{{ ''.__class__.__mro__[1].__subclasses__() }}", UNSAFE, id="object's subclasses"),
    pytest.param("{{ dag_run.conf.__class__ }}", UNSAFE, id="the class of the run's conf"),
    pytest.param("{{ params.__init__.__globals__ }}", UNSAFE, id="a method's globals"),
    pytest.param("{{ macros.ds_add.__globals__ }}", UNSAFE, id="a macro's globals"),
    pytest.param("{{ ti.xcom_pull.__func__ }}", UNSAFE, id="a bound method's function"),
    pytest.param("{{ cycler.__init__.__globals__.os }}", UNSAFE, id="Jinja's own globals"),
    pytest.param("{{ (ds|attr('__class__')) }}", UNSAFE, id="the attr filter"),
    pytest.param(
        "{{ macros.uuid.os.system('true') }}",
        "has no attribute 'os'",
        id="a module imported by a macro module",
    ),
]


@pytest.mark.parametrize(("template", "reason"), SANDBOX_ESCAPES)
def test_the_sandbox_refuses_to_reach_python_internals(template: str, reason: str) -> None:
    with pytest.raises(TemplateError, match=reason):
        rendered(template)


def test_a_conf_value_is_data_not_a_template() -> None:
    assert rendered("{{ dag_run.conf.cmd }}", conf={"cmd": "{{ ''.__class__ }}"}) == "{{ ''.__class__ }}"


@pytest.mark.parametrize(
    ("name", "template"),
    [
        pytest.param("ds", "{{ ds }}", id="ds"),
        pytest.param("ts", "{{ ts }}", id="ts"),
        pytest.param("run_id", "{{ run_id }}", id="run_id"),
        pytest.param("logical_date", "{{ logical_date | ds }}", id="logical_date"),
        pytest.param("macros", "{{ macros.ds_add(ds, 1) }}", id="macros"),
        pytest.param("ti", "{{ ti.task_id }}", id="ti"),
        pytest.param("dag_run", "{{ dag_run.run_id }}", id="dag_run"),
        pytest.param("dag", "{{ dag.dag_id }}", id="dag"),
        pytest.param("task", "{{ task.task_id }}", id="task"),
    ],
)
def test_conf_cannot_override_built_in_variables(name: str, template: str) -> None:
    assert rendered(template, conf={name: "overridden"}) == rendered(template, conf={})


def test_changes_made_by_a_template_stay_in_its_context() -> None:
    source = invocation()
    context = build_context(source)
    render("{% do dag_run.conf.update({'table': 'x'}) %}{% do params.update({'region': 'x'}) %}", context)
    assert source.conf["table"] == "sales" and source.params["region"] == "eu"
    assert build_context(source)["dag_run"].conf["table"] == "sales"


def test_a_syntax_error_names_the_field_and_line() -> None:
    with pytest.raises(TemplateError, match=r"cannot render bash_command: .* \(line 2\)"):
        rendered("ok\n{% if %}")


def test_an_error_raised_by_a_macro_names_the_field() -> None:
    with pytest.raises(TemplateError, match="cannot render bash_command: ValueError: time data 'x'"):
        rendered("{{ macros.ds_add('x', 1) }}")


# --------------------------------------------------------------------------------------- recursion


def test_rendering_recurses_into_nested_containers_and_leaves_keys_and_non_strings() -> None:
    context = build_context(invocation())
    Pair = namedtuple("Pair", "left right")
    value = {
        "env": {"DAY": "{{ ds }}", "{{ ds }}": 1},
        "args": ["--date", "{{ ds_nodash }}", ("{{ ts }}", 2)],
        "pair": Pair("{{ run_id }}", None),
        "tags": {"{{ dag.dag_id }}"},
        "retries": 3,
        "flag": True,
    }
    assert render(value, context) == {
        "env": {"DAY": "2024-03-05", "{{ ds }}": 1},
        "args": ["--date", "20240305", ("2024-03-05T05:07:08+00:00", 2)],
        "pair": Pair("etl-scheduled-20240305", None),
        "tags": {"etl"},
        "retries": 3,
        "flag": True,
    }


def test_an_error_deep_inside_names_its_path() -> None:
    context = build_context(invocation())
    with pytest.raises(TemplateError, match=r"cannot render env_vars\.A\[1\]\.b: 'missing' is undefined"):
        render({"A": ["fine", {"b": "{{ missing }}"}]}, context, field="env_vars")


def test_render_fields_renders_only_the_template_fields() -> None:
    context = build_context(invocation())
    values = {"bash_command": "echo {{ ds }}", "cwd": "{{ ds }}"}
    assert render_fields(values, ["bash_command", "env"], context) == {
        "bash_command": "echo 2024-03-05",
        "cwd": "{{ ds }}",
    }


def test_xcom_push_is_pulled_back_by_the_same_try_and_carried_as_json() -> None:
    context = build_context(invocation())
    ti = context["ti"]
    ti.xcom_push(key="when", value=pendulum.datetime(2024, 3, 5, 6, tz="Europe/Paris"))
    ti.xcom_push(key="pair", value=(1, "a"))
    assert render("{{ ti.xcom_pull('load', key='pair') }}", context) == "[1, 'a']"
    assert ti.pushed == {"when": "2024-03-05T06:00:00+01:00", "pair": [1, "a"]}
    ti.xcom_push(key="pair", value=None)
    assert ti.pushed["pair"] is None  # a later push replaces an earlier one


def test_xcom_push_refuses_a_naive_datetime() -> None:
    with pytest.raises(ValueError, match="naive datetime"):
        build_context(invocation())["ti"].xcom_push(key="when", value=datetime(2024, 1, 1))
