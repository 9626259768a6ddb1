"""Variables and connections read as Airflow's environment-variable backend reads them.

Real: the process environment (set per test with monkeypatch), the template sandbox, Airflow's URI and
JSON connection forms. Where they come from in a cluster is `test_secret_refs.py` and the cluster tier.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import pytest

from zonda.resources.invocations import TaskInvocation
from zonda.resources.run_types import RunType
from zonda.tries.task_context import build_context
from zonda.tries.templating import TemplateError, render
from zonda.variables import BaseHook, Connection, ConnectionNotFound, Variable, VariableNotFound


@pytest.fixture
def environment(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    monkeypatch.setenv("AIRFLOW_VAR_BUCKET", "s3://sales")
    monkeypatch.setenv("AIRFLOW_VAR_SETTINGS", json.dumps({"limit": 5, "tables": ["a", "b"]}))
    monkeypatch.setenv("AIRFLOW_VAR_lower_case_key", "from a ConfigMap")  # envFrom keeps the key's case
    monkeypatch.setenv(
        "AIRFLOW_CONN_WAREHOUSE", "postgresql://etl:p%40ss%2Fword@db.example:5433/sales?sslmode=require"
    )
    monkeypatch.setenv(
        "AIRFLOW_CONN_API",
        json.dumps({"conn_type": "http", "host": "api.example", "login": "bot", "password": "s3cret",
                    "port": 443, "extra": {"verify": False}}),
    )  # fmt: skip
    monkeypatch.delenv("AIRFLOW_VAR_MISSING", raising=False)
    return monkeypatch


def rendered(template: str) -> object:
    invocation = TaskInvocation(
        dag_name="etl", run_name="etl-manual-1", run_type=RunType.MANUAL, task_id="load", try_number=1,
        logical_date=datetime.fromisoformat("2024-03-05T00:00:00+00:00"),
        data_interval_start=datetime.fromisoformat("2024-03-04T00:00:00+00:00"),
        data_interval_end=datetime.fromisoformat("2024-03-05T00:00:00+00:00"),
    )  # fmt: skip
    return render(template, build_context(invocation), field="bash_command")


# ------------------------------------------------------------------------------------------- Variable


@pytest.mark.usefixtures("environment")
def test_variable_get_reads_airflows_environment_name() -> None:
    assert Variable.get("bucket") == "s3://sales"
    assert Variable.get("BUCKET") == "s3://sales"


@pytest.mark.usefixtures("environment")
def test_a_configmap_key_keeps_its_case_and_is_found() -> None:
    assert Variable.get("lower_case_key") == "from a ConfigMap"


@pytest.mark.usefixtures("environment")
def test_deserialize_json_returns_the_value_as_json() -> None:
    assert Variable.get("settings", deserialize_json=True) == {"limit": 5, "tables": ["a", "b"]}


@pytest.mark.usefixtures("environment")
def test_a_missing_variable_takes_the_default_even_when_it_is_none() -> None:
    assert Variable.get("missing", default_var="fallback") == "fallback"
    assert Variable.get("missing", default_var=None) is None


@pytest.mark.usefixtures("environment")
def test_a_missing_variable_without_default_is_airflows_key_error_saying_where_variables_live() -> None:
    with pytest.raises(KeyError) as caught:
        Variable.get("missing")
    assert isinstance(caught.value, VariableNotFound)
    assert "Variable missing does not exist" in str(caught.value)
    assert "zonda.dev/variables" in str(caught.value)


@pytest.mark.parametrize("write", [Variable.set, Variable.update])
def test_writing_a_variable_is_refused_saying_where_it_lives(write: object) -> None:
    with pytest.raises(PermissionError, match=r"live in ConfigMaps and Secrets labelled zonda.dev/variables"):
        write("bucket", "other")  # type: ignore[operator]


def test_deleting_a_variable_is_refused() -> None:
    with pytest.raises(PermissionError, match="kubectl edit configmap"):
        Variable.delete("bucket")


# ----------------------------------------------------------------------------------------- Connection

URIS = [
    pytest.param(
        "my-conn-type://login:password@host:5432/schema?param1=val1&param2=val2",
        {"conn_type": "my_conn_type", "login": "login", "password": "password", "host": "host", "port": 5432,
         "schema": "schema", "extra_dejson": {"param1": "val1", "param2": "val2"}},
        id="Airflow's documented URI: dashes in the type become underscores, query is the extra",
    ),
    pytest.param(
        "postgresql://etl:p%40ss%2Fword@db.example:5433/sales",
        {"conn_type": "postgres", "login": "etl", "password": "p@ss/word", "host": "db.example", "port": 5433,
         "schema": "sales", "extra_dejson": {}},
        id="postgresql is postgres and percent-encoded parts are decoded",
    ),
    pytest.param(
        "google-cloud-platform://?__extra__=%7B%22project%22%3A+%22p1%22%2C+%22n%22%3A+1%7D",
        {"conn_type": "google_cloud_platform", "host": None, "login": None, "password": None, "port": None,
         "extra_dejson": {"project": "p1", "n": 1}},
        id="__extra__ carries a JSON extra with non-string values",
    ),
    pytest.param(
        "aws://",
        {"conn_type": "aws", "host": None, "schema": None, "extra": None},
        id="a bare type has no other field",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("uri", "fields"), URIS)
def test_a_uri_parses_as_airflow_parses_it(uri: str, fields: dict[str, object]) -> None:
    connection = Connection.parse("c", uri)
    assert {name: getattr(connection, name) for name in fields} == fields


def test_the_json_form_parses_as_airflow_parses_it() -> None:
    text = json.dumps({"conn_type": "my-conn-type", "login": "my-login", "password": "my-password",
                       "host": "my-host", "port": 1234, "schema": "my-schema",
                       "extra": {"param1": "val1", "param2": "val2"}})  # fmt: skip
    connection = Connection.parse("c", text)
    assert (connection.conn_type, connection.login, connection.password, connection.host) == (
        "my-conn-type", "my-login", "my-password", "my-host",
    )  # fmt: skip
    assert (connection.port, connection.schema) == (1234, "my-schema")
    assert connection.extra_dejson == {"param1": "val1", "param2": "val2"}


def test_get_uri_round_trips() -> None:
    original = Connection.parse("c", "postgresql://etl:p%40ss%2Fword@db.example:5433/sales?sslmode=require")
    again = Connection.parse("c", original.get_uri())
    assert again == original


def test_a_value_neither_uri_nor_json_is_refused_naming_the_connection() -> None:
    with pytest.raises(ValueError, match="'broken': not a URI"):
        Connection.parse("broken", "just-a-host")


def test_the_password_is_not_in_the_connections_repr() -> None:
    assert "s3cret" not in repr(Connection.parse("c", "http://bot:s3cret@api"))


@pytest.mark.usefixtures("environment")
def test_base_hook_get_connection_reads_airflow_conn_variables() -> None:
    warehouse = BaseHook.get_connection("warehouse")
    assert (warehouse.conn_id, warehouse.host, warehouse.password) == ("warehouse", "db.example", "p@ss/word")
    assert warehouse.extra_dejson == {"sslmode": "require"}
    assert BaseHook.get_connection("api").extra_dejson == {"verify": False}


@pytest.mark.usefixtures("environment")
def test_a_missing_connection_says_where_connections_live() -> None:
    with pytest.raises(
        ConnectionNotFound, match=r"The conn_id `nowhere` isn't defined.*zonda.dev/connections"
    ):
        BaseHook.get_connection("nowhere")


# ------------------------------------------------------------------------------------------ templates

TEMPLATES = [
    pytest.param("{{ var.value.bucket }}", "s3://sales", id="var.value reads a variable"),
    pytest.param("{{ var.json.settings.tables[1] }}", "b", id="var.json deserializes it"),
    pytest.param("{{ var.value.get('missing', 'none') }}", "none", id="var.value.get takes a default"),
    pytest.param("{{ var.json.get('missing', {}) }}", "{}", id="var.json.get takes a default"),
    pytest.param("{{ conn.warehouse.host }}:{{ conn.warehouse.port }}", "db.example:5433", id="conn fields"),
    pytest.param("{{ conn.api.extra_dejson.verify }}", "False", id="conn extra_dejson"),
    pytest.param("{{ conn.get('nowhere') }}", "None", id="conn.get of a missing connection is None"),
]


@pytest.mark.usefixtures("environment")
@pytest.mark.parametrize(("template", "expected"), TEMPLATES)
def test_templates_read_variables_and_connections(template: str, expected: str) -> None:
    assert rendered(template) == expected


@pytest.mark.usefixtures("environment")
def test_a_missing_connection_in_a_template_is_an_error_naming_it() -> None:
    with pytest.raises(TemplateError, match="The conn_id `nowhere` isn't defined"):
        rendered("{{ conn.nowhere.host }}")


@pytest.mark.usefixtures("environment")
@pytest.mark.parametrize(
    "template",
    ["{{ var.value.__class__ }}", "{{ conn.__init__.__globals__ }}", "{{ var.value.get.__globals__ }}"],
)
def test_the_accessors_lead_nowhere_else(template: str) -> None:
    with pytest.raises(TemplateError, match=r"unsafe|undefined|has no attribute"):
        rendered(template)


# ------------------------------------------------------------------------------- --airflow-compat

AIRFLOW_IMPORTS = """
from airflow.models import Variable, Connection
from airflow.models.variable import Variable as V2
from airflow.hooks.base import BaseHook
from airflow.hooks.base_hook import BaseHook as OldBaseHook
"""


@pytest.mark.usefixtures("environment")
def test_airflow_imports_of_variable_connection_and_base_hook_are_zondas() -> None:
    from zonda.authoring import compat

    assert compat.unsupported_imports(AIRFLOW_IMPORTS) == []
    with compat.airflow_imports(enabled=True):
        namespace: dict[str, Any] = {}
        exec(AIRFLOW_IMPORTS, namespace)
    assert namespace["Variable"] is Variable and namespace["V2"] is Variable
    assert namespace["BaseHook"].get_connection("warehouse").schema == "sales"
    assert namespace["OldBaseHook"] is BaseHook and namespace["Connection"] is Connection
