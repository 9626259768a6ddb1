"""The trigger form's params: a DAG's params as form fields, and why a conf fails its params schema.

Pure, no I/O, like `views`, from the DAG body's spec (a plain dict); the trigger page renders
`param_fields`, and the trigger action checks the submitted conf with `conf_errors` before it
creates the run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ParamField:
    name: str
    kind: str  # "string", "number", "integer", "boolean", "json"
    default: Any
    description: str = ""
    schema: Mapping[str, Any] = field(default_factory=dict)
    has_default: bool = True  # False: required by the schema; left empty, the conf does not give it


_JSON_TYPES = {str: "string", bool: "boolean", int: "integer", float: "number"}


def param_fields(spec: Mapping[str, Any]) -> list[ParamField]:
    """Form fields for a DAG's params, as Airflow's trigger form builds them.

    Each `spec.params` default is a field; `spec.paramsSchema` gives its type, `enum`, bounds and
    description (a param the schema requires may have no default). Without a declared type the
    default's JSON type chooses the input.
    """
    defaults: Mapping[str, Any] = spec.get("params") or {}
    properties: Mapping[str, Any] = (spec.get("paramsSchema") or {}).get("properties") or {}
    fields: list[ParamField] = []
    for name in [*defaults, *(n for n in properties if n not in defaults)]:
        default = defaults.get(name)
        schema = properties.get(name)
        schema = dict(schema) if isinstance(schema, Mapping) else {}
        declared = schema.get("type")
        if declared in ("string", "number", "integer", "boolean"):
            kind = declared
        elif declared is None and name in defaults:
            kind = _JSON_TYPES.get(type(default), "json")
        else:
            kind = "json"
        description = str(schema.pop("description", "") or "")
        fields.append(ParamField(name, kind, default, description, schema, name in defaults))
    return fields


def params_schema(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON schema a triggered run's params (conf over defaults) must satisfy: `spec.paramsSchema`."""
    return dict(spec.get("paramsSchema") or {"type": "object"})


def conf_errors(spec: Mapping[str, Any], conf: Mapping[str, Any]) -> list[str]:
    """Why `conf` merged over the DAG's params fails `spec.paramsSchema` (or a task's), one sentence
    per problem."""
    from zonda.specs import params

    return params.run_conf_errors(spec, conf)
