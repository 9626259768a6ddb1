"""Which variables and connections a task's pod gets, as environment references (pure, no client).

A pod gets every variable ConfigMap (they hold no secrets) and, from Secrets, only the keys its task
names: `connections` and `variables` in the task spec, `conn_id`/`*_conn_id` operator arguments, and
`conn.ID` / `var.value.KEY` / `var.json.KEY` written in its templated arguments. Each becomes an
`env` entry with a `secretKeyRef` under Airflow's name (`AIRFLOW_CONN_ID`, `AIRFLOW_VAR_KEY`), so the
kubelet resolves the value: it never appears in the pod spec, the controller's memory beyond the
gather, or its logs. A name found in no labelled Secret gets no entry; the task's `Variable.get` or
`get_connection` then fails with a message saying where to add it (or takes its default).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from zonda.specs.dags import ResolvedTask
from zonda.variables import VARIABLE_ENV_PREFIX, connection_env_name, variable_env_name

_NAME = r"([A-Za-z_][A-Za-z0-9_]*)"
_QUOTED = r"""\(\s*['"]([^'"]+)['"]"""
_CONNECTION_PATTERNS = (re.compile(r"\bconn\." + _NAME), re.compile(r"\bconn\.get" + _QUOTED))
_VARIABLE_PATTERNS = (
    re.compile(r"\bvar\.(?:value|json)\." + _NAME),
    re.compile(r"\bvar\.(?:value|json)\.get" + _QUOTED),
)
_ACCESSOR_METHODS = frozenset({"get"})


@dataclass(frozen=True)
class LabelledSecret:
    """A Secret labelled as variables or connections: its name and key names (never its values)."""

    name: str
    keys: frozenset[str]


@dataclass(frozen=True)
class Sources:
    """What the namespace offers, gathered by label before a launch."""

    variable_config_maps: Sequence[str] = ()
    variable_secrets: Sequence[LabelledSecret] = ()
    connection_secrets: Sequence[LabelledSecret] = ()


@dataclass(frozen=True)
class PodReferences:
    """`envFrom` and `env` entries for the task's container."""

    env_from: list[dict[str, Any]] = field(default_factory=list)
    env: list[dict[str, Any]] = field(default_factory=list)


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)


def _templated(value: Any) -> list[str]:
    return [text for text in _strings(value) if "{{" in text or "{%" in text]


def _found(patterns: Iterable[re.Pattern[str]], texts: Iterable[str]) -> set[str]:
    names = {match.group(1) for pattern in patterns for text in texts for match in pattern.finditer(text)}
    return names - _ACCESSOR_METHODS


def named_connections(task: ResolvedTask) -> list[str]:
    """Connection ids the task names: the spec's list, `*conn_id` arguments, `conn.ID` in templates."""
    names = set(task.connections)
    for key, value in task.args.items():
        if (key == "conn_id" or key.endswith("_conn_id")) and isinstance(value, str) and "{" not in value:
            names.add(value)
    names |= _found(_CONNECTION_PATTERNS, _templated(task.args))
    return sorted(names)


def named_variables(task: ResolvedTask) -> list[str]:
    """Variables the task names: the spec's list and `var.value.KEY` / `var.json.KEY` in templates."""
    return sorted(set(task.variables) | _found(_VARIABLE_PATTERNS, _templated(task.args)))


def _holder(secrets: Sequence[LabelledSecret], key: str) -> str | None:
    """The Secret holding `key`; with several, the first by name (deterministic, documented)."""
    return next((s.name for s in sorted(secrets, key=lambda s: s.name) if key in s.keys), None)


def _secret_env(env_name: str, secret: str, key: str) -> dict[str, Any]:
    return {"name": env_name, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}


def plan_references(task: ResolvedTask, sources: Sources) -> PodReferences:
    """The references a try of `task` gets (Secret-held entries in `env` win over ConfigMaps'
    `envFrom`, as Kubernetes gives `env` precedence)."""
    env_from = [
        {"prefix": VARIABLE_ENV_PREFIX, "configMapRef": {"name": name, "optional": True}}
        for name in sorted(set(sources.variable_config_maps), reverse=True)
    ]  # a later envFrom wins: in reverse order, the first ConfigMap by name wins, as for Secrets
    env = []
    for conn_id in named_connections(task):
        secret = _holder(sources.connection_secrets, conn_id)
        if secret is not None:
            env.append(_secret_env(connection_env_name(conn_id), secret, conn_id))
    for key in named_variables(task):
        secret = _holder(sources.variable_secrets, key)
        if secret is not None:
            env.append(_secret_env(variable_env_name(key), secret, key))
    return PodReferences(env_from=env_from, env=env)


def apply_references(pod: dict[str, Any], references: PodReferences) -> dict[str, Any]:
    """Add the references to the pod's task container (the first one, `base`), keeping the user's
    own entries of the same name: what a task sets by hand wins."""
    if not references.env_from and not references.env:
        return pod
    container = pod["spec"]["containers"][0]
    own = {entry.get("name") for entry in container.get("env", [])}
    container["env"] = [*container.get("env", []), *(e for e in references.env if e["name"] not in own)]
    container["envFrom"] = [*references.env_from, *container.get("envFrom", [])]
    return pod
