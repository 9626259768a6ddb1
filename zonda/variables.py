"""Airflow's Variables and Connections, read from the task's environment (Airflow's env-var backend).

Where they live: variables in ConfigMaps and Secrets labelled `zonda.dev/variables: "true"` (each key
a variable), connections in Secrets labelled `zonda.dev/connections: "true"` (each key a conn id, each
value an `AIRFLOW_CONN_*`-style URI or JSON). The controller puts them into a task's environment under
Airflow's own names, `AIRFLOW_VAR_<KEY>` and `AIRFLOW_CONN_<CONN_ID>` (`zonda.tries.secret_refs` decides
which), so `Variable.get`, `BaseHook.get_connection` and the templates' `var` and `conn` read the
environment exactly as Airflow's `EnvironmentVariablesBackend` does. A task set up by hand (the local
executor, `dag.test()`) gets them the same way: export `AIRFLOW_VAR_X` / `AIRFLOW_CONN_Y`.

Writing is refused: a variable is changed where it lives (`kubectl edit configmap`), not by a task.
Reading one masks its secrets in the try's log as Airflow's does (`zonda.secrets_masker`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit

from zonda.secrets_masker import mask_secret, secrets_masker

#: The label that makes a ConfigMap's or Secret's keys variables.
LABEL_VARIABLES = "zonda.dev/variables"
#: The label that makes a Secret's keys connection ids.
LABEL_CONNECTIONS = "zonda.dev/connections"
VARIABLE_ENV_PREFIX = "AIRFLOW_VAR_"
CONNECTION_ENV_PREFIX = "AIRFLOW_CONN_"

_WHERE_VARIABLES_LIVE = (
    f'variables live in ConfigMaps and Secrets labelled {LABEL_VARIABLES}: "true" '
    "(change them there, e.g. kubectl edit configmap NAME)"
)


def variable_env_name(key: str) -> str:
    """Airflow's environment name of a variable: `AIRFLOW_VAR_` and the key in upper case."""
    return VARIABLE_ENV_PREFIX + key.upper()


def connection_env_name(conn_id: str) -> str:
    """Airflow's environment name of a connection: `AIRFLOW_CONN_` and the id in upper case."""
    return CONNECTION_ENV_PREFIX + conn_id.upper()


def _lookup(environment: Mapping[str, str], prefix: str, key: str) -> str | None:
    """Airflow's name first; then the key as written (a ConfigMap projected with a prefix keeps case)."""
    value = environment.get(prefix + key.upper())
    return environment.get(prefix + key) if value is None else value


class _NotFound(KeyError):
    """A KeyError (what Airflow raises) whose text is the message, not its repr."""

    def __str__(self) -> str:
        return str(self.args[0])


class VariableNotFound(_NotFound):
    """Airflow raises `KeyError(f"Variable {key} does not exist")`; so do we, saying where to add it."""

    def __init__(self, key: str) -> None:
        super().__init__(f"Variable {key} does not exist ({_WHERE_VARIABLES_LIVE})")
        self.key = key


class ConnectionNotFound(_NotFound):
    """Airflow's `AirflowNotFoundException` for a missing connection (a KeyError here)."""

    def __init__(self, conn_id: str) -> None:
        super().__init__(
            f"The conn_id `{conn_id}` isn't defined (connections live in Secrets labelled "
            f'{LABEL_CONNECTIONS}: "true"; the task names it in `connections` or a `*conn_id` argument)'
        )
        self.conn_id = conn_id


class Variable:
    """Airflow's `Variable`: `Variable.get(key, default_var=..., deserialize_json=...)`."""

    _NO_DEFAULT: Any = object()

    @classmethod
    def get(cls, key: str, default_var: Any = _NO_DEFAULT, deserialize_json: bool = False) -> Any:
        return get_variable(key, default_var, deserialize_json=deserialize_json)

    @classmethod
    def set(cls, key: str, value: Any, *args: Any, **kwargs: Any) -> None:
        raise PermissionError(f"Variable.set({key!r}) is refused: {_WHERE_VARIABLES_LIVE}")

    @classmethod
    def update(cls, key: str, value: Any, *args: Any, **kwargs: Any) -> None:
        raise PermissionError(f"Variable.update({key!r}) is refused: {_WHERE_VARIABLES_LIVE}")

    @classmethod
    def delete(cls, key: str, *args: Any, **kwargs: Any) -> int:
        raise PermissionError(f"Variable.delete({key!r}) is refused: {_WHERE_VARIABLES_LIVE}")

    @classmethod
    def setdefault(
        cls, key: str, default: Any, description: str | None = None, deserialize_json: bool = False
    ) -> Any:
        """Airflow's `setdefault` without the write: the value, or `default` when there is none."""
        return cls.get(key, default_var=default, deserialize_json=deserialize_json)


@dataclass(frozen=True)
class Connection:
    """Airflow's `Connection`: the fields a hook reads, from a URI or Airflow's JSON form."""

    conn_id: str | None = None
    conn_type: str | None = None
    description: str | None = None
    host: str | None = None
    login: str | None = None
    password: str | None = field(default=None, repr=False)
    schema: str | None = None
    port: int | None = None
    extra: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        """Airflow's `Connection.__init__`: the password, and its URL-quoted form, masked in the log."""
        if self.password:
            secrets_masker().mask_connection(self.password, {}, None)

    @classmethod
    def from_uri(cls, conn_id: str | None, uri: str) -> Connection:
        """Airflow's `Connection(uri=...)`: `type://login:password@host:port/schema?extra`."""
        if "://" not in uri:
            raise ValueError(f"connection {conn_id!r}: not a URI (scheme://...) nor JSON")
        scheme, rest = uri.split("://", 1)
        conn_type = "postgres" if scheme == "postgresql" else scheme.replace("-", "_")
        parts = urlsplit("//" + rest)
        query = dict(parse_qsl(parts.query, keep_blank_values=True))
        extra = query.pop("__extra__", None) or (json.dumps(query) if query else None)
        return cls(
            conn_id=conn_id,
            conn_type=conn_type,
            host=unquote(parts.hostname) if parts.hostname else None,
            login=unquote(parts.username) if parts.username else None,
            password=unquote(parts.password) if parts.password else None,
            schema=unquote(parts.path[1:]) if parts.path[1:] else None,
            port=parts.port,
            extra=extra,
        )

    @classmethod
    def from_json(cls, conn_id: str | None, text: str) -> Connection:
        """Airflow's `Connection.from_json`: keys conn_type, host, login, password, schema, port, extra."""
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError(f"connection {conn_id!r}: JSON must be an object")
        extra = data.get("extra")
        port = data.get("port")
        return cls(
            conn_id=conn_id,
            conn_type=data.get("conn_type"),
            description=data.get("description"),
            host=data.get("host"),
            login=data.get("login"),
            password=data.get("password"),
            schema=data.get("schema"),
            port=int(port) if port not in (None, "") else None,
            extra=json.dumps(extra) if isinstance(extra, dict) else extra,
        )

    @classmethod
    def parse(cls, conn_id: str | None, value: str) -> Connection:
        """A URI or JSON (Airflow's env-var backend accepts both since 2.3)."""
        text = value.strip()
        return cls.from_json(conn_id, text) if text.startswith("{") else cls.from_uri(conn_id, text)

    @property
    def extra_dejson(self) -> dict[str, Any]:
        """The extra as a dict ({} when absent or not a JSON object), as Airflow's."""
        if not self.extra:
            return {}
        try:
            data = json.loads(self.extra)
        except ValueError:
            return {}
        return data if isinstance(data, dict) else {}

    def get_uri(self) -> str:
        """Airflow's `get_uri`: the connection back as a URI (extra as query parameters)."""
        scheme = (self.conn_type or "").replace("_", "-")
        auth = ""
        if self.login or self.password:
            auth = quote(self.login or "", safe="")
            if self.password:
                auth += ":" + quote(self.password, safe="")
            auth += "@"
        host = quote(self.host or "", safe="")
        port = f":{self.port}" if self.port else ""
        path = "/" + quote(self.schema, safe="") if self.schema else ""
        uri = f"{scheme}://{auth}{host}{port}{path}"
        extra = self.extra_dejson
        if extra:
            flat = all(isinstance(v, str) for v in extra.values())
            uri += "?" + (urlencode(extra) if flat else urlencode({"__extra__": json.dumps(extra)}))
        return uri

    def get_password(self) -> str | None:
        return self.password

    def get_extra(self) -> str | None:
        return self.extra


def get_variable(key: str, default_var: Any = Variable._NO_DEFAULT, *, deserialize_json: bool = False) -> Any:
    """The variable `key` from the process environment; `VariableNotFound` without one or a default."""
    value = _lookup(os.environ, VARIABLE_ENV_PREFIX, key)
    if value is None:
        if default_var is not Variable._NO_DEFAULT:
            return default_var
        raise VariableNotFound(key)
    mask_secret(value, key)  # as Airflow's `Variable.get`: only when the key is sensitive
    if not deserialize_json:
        return value
    loaded = json.loads(value)
    mask_secret(loaded, key)  # Airflow 2.10's: a dict's values by their own keys
    return loaded


def get_connection(conn_id: str) -> Connection:
    """The connection `conn_id` from the process environment; `ConnectionNotFound` without one."""
    value = _lookup(os.environ, CONNECTION_ENV_PREFIX, conn_id)
    if value is None:
        raise ConnectionNotFound(conn_id)
    connection = Connection.parse(conn_id, value)
    secrets_masker().mask_connection(connection.password, connection.extra_dejson, connection.extra)
    return connection


class BaseHook:
    """Airflow's `BaseHook`, for what a DAG file calls on it: `get_connection(conn_id)`."""

    @classmethod
    def get_connection(cls, conn_id: str) -> Connection:
        return get_connection(conn_id)

    def get_conn(self) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must implement get_conn")


# ---------------------------------------------------------------------------------- template accessors


class VariableAccessor:
    """`{{ var.value.key }}` / `{{ var.json.key }}`, and `.get(key, default)`, as Airflow's accessors."""

    def __init__(self, *, deserialize_json: bool) -> None:
        self._deserialize_json = deserialize_json

    def __getattr__(self, key: str) -> Any:
        if key.startswith("__"):
            raise AttributeError(key)
        return self.get(key)

    def get(self, key: str, default_var: Any = Variable._NO_DEFAULT) -> Any:
        return get_variable(key, default_var, deserialize_json=self._deserialize_json)

    def __repr__(self) -> str:
        return "<var.json>" if self._deserialize_json else "<var.value>"


class ConnectionAccessor:
    """`{{ conn.my_conn.host }}` and `{{ conn.get('my_conn') }}`, as Airflow's `ConnectionAccessor`."""

    def __getattr__(self, conn_id: str) -> Connection:
        if conn_id.startswith("__"):
            raise AttributeError(conn_id)
        return get_connection(conn_id)

    def get(self, conn_id: str, default_conn: Any = None) -> Any:
        try:
            return get_connection(conn_id)
        except ConnectionNotFound:
            return default_conn

    def __repr__(self) -> str:
        return "<conn>"


def template_variables() -> dict[str, Any]:
    """The `var` and `conn` entries of Airflow's template context (nothing in them leads to `os`)."""
    return {
        "var": {
            "value": VariableAccessor(deserialize_json=False),
            "json": VariableAccessor(deserialize_json=True),
        },
        "conn": ConnectionAccessor(),
    }
