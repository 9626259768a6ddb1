"""Airflow's `Param`: a DAG parameter's default value with a JSON-schema, checked when the DAG is parsed."""

from __future__ import annotations

from typing import Any

import jsonschema


class _NoDefault:
    def __repr__(self) -> str:
        return "NOTSET"


NOTSET: Any = _NoDefault()


class ParamValidationError(ValueError):
    """A param's value does not match its schema."""


class Param:
    """A DAG param: `Param(5, type="integer", minimum=3)`; `schema` holds every JSON-schema keyword."""

    def __init__(self, default: Any = NOTSET, description: str | None = None, **schema: Any) -> None:
        self.value = default
        self.description = description
        self.schema = schema

    def __repr__(self) -> str:
        return f"Param({self.value!r}, {self.schema!r})"

    def resolve(self, value: Any = NOTSET) -> Any:
        """`value` (or the default) checked against the schema, as Airflow's `Param.resolve`."""
        final = self.value if value is NOTSET else value
        if final is NOTSET:
            raise ParamValidationError("No value passed and Param has no default value")
        try:
            jsonschema.validate(final, self.schema, format_checker=jsonschema.FormatChecker())
        except jsonschema.ValidationError as error:
            raise ParamValidationError(f"Invalid input for param: {error.message}") from error
        return final

    def dump(self) -> dict[str, Any]:
        return {"value": None if self.value is NOTSET else self.value, "schema": self.schema}


def resolve_params(params: dict[str, Any]) -> dict[str, Any]:
    """Plain default values of a DAG's params (`spec.params`); a `Param` without a default has none:
    `params_schema` lists it as required, so each run's conf must give it."""
    resolved: dict[str, Any] = {}
    for name, value in params.items():
        if isinstance(value, Param):
            if value.value is NOTSET:
                continue
            try:
                resolved[name] = value.resolve()
            except ParamValidationError as error:
                raise ParamValidationError(f"param {name!r}: {error}") from error
        else:
            resolved[name] = value
    return resolved


def params_schema(params: dict[str, Any]) -> dict[str, Any] | None:
    """`spec.paramsSchema`: a JSON schema with each `Param`'s keywords and description (None: no `Param`).

    A `Param` without a default is `required`, as Airflow refuses a run that does not give it; a plain
    value has no schema (Airflow accepts any value for it).
    """
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, value in params.items():
        if not isinstance(value, Param):
            continue
        properties[name] = dict(value.schema)
        if value.description is not None:
            properties[name]["description"] = value.description
        if value.value is NOTSET:
            required.append(name)
    if not properties:
        return None
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema


class ParamsDict(dict[str, Any]):
    """Airflow's `ParamsDict`, the type of the context's `params`: a task reads values by name."""
