"""DAG params' JSON schema (`spec.paramsSchema`), checked with the DAG and against each run's conf.

`spec.params` holds the plain default values templates see as `params.x`. `spec.paramsSchema` is a
standard JSON schema (`type: object`, one entry of `properties` per param, `required` for a param
without a default) that the authoring compiler writes from Airflow's `Param(default, **schema)`, or a
YAML author writes by hand. As Airflow validates params when a DagRun is created, a run's conf merged
over the defaults must satisfy the schema; the defaults alone must too, except for `required` (a
param without a default is given at trigger time).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import Any

import jsonschema
import jsonschema.exceptions
import jsonschema.validators

#: Seconds one check of values against a schema may take where the process bounds it (`bound_checks`).
CHECK_SECONDS = 2.0


class CheckTimeout(Exception):
    """Raised by a process's deadline (`bound_checks`) to stop a check past `CHECK_SECONDS`."""


Deadline = Callable[[float], AbstractContextManager[object]]


def no_deadline(seconds: float) -> AbstractContextManager[object]:
    """No limit: what a check or a user's call runs under until a process installs one."""
    return contextlib.nullcontext()


#: What a check runs under: nothing by default; the controller's and the UI's main thread install a
#: deadline (`controller.processes.deadlines`).
_deadline: Deadline = no_deadline


#: Who runs a check: the calling thread by default; the controller hands a check met in another
#: thread to its main thread, where the deadline applies (`controller.processes.deadlines.MainThreadChecks`).
Runner = Callable[[Callable[[], list[Any]]], list[Any]]


def _here(check: Callable[[], list[Any]]) -> list[Any]:
    return check()


_runner: Runner = _here


def run_checks_with(runner: Runner | None) -> None:
    """Run every check through `runner` (None: in the calling thread again)."""
    global _runner
    _runner = runner or _here


def bound_checks(deadline: Deadline) -> None:
    """Run every check of values against a schema under `deadline(CHECK_SECONDS)`, which raises
    `CheckTimeout` when it passes.

    A `pattern` is a DAG author's regular expression matched with `re` against a value a run's
    creator (or a DAG author's default) chose: `^(a+)+$` against 40 `a`s and a `!` backtracks for
    hours in C, holding the interpreter lock, so a thread with a time limit cannot stop it, and a
    process that checks a conf (the controller, the UI) would stop for everyone. `re` checks for
    signals as it goes: a process's main thread can stop it with one.
    """
    global _deadline
    _deadline = deadline


def schema_errors(
    schema: Mapping[str, Any] | None, defaults: Mapping[str, Any], *, scheduled: bool = False
) -> list[str]:
    """Why `paramsSchema` is not a valid JSON schema, or why the `params` defaults do not satisfy it.

    A `scheduled` DAG may not require a param without a default: its scheduled runs have no conf
    (Airflow: "DAG Schedule must be None, if there are any required params without default values").
    """
    if schema is None:
        return []
    validator_class = jsonschema.validators.validator_for(schema)
    try:
        validator_class.check_schema(schema)
    except jsonschema.exceptions.SchemaError as error:
        where = "".join(f"[{p!r}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
        return [f"paramsSchema{where} is not a valid JSON schema: {error.message}"]
    errors = [
        f"params defaults do not satisfy paramsSchema: {message}"
        for message in _violations(schema, defaults, skip_required=True)
    ]
    required = schema.get("required")
    missing = [n for n in required if n not in defaults] if scheduled and isinstance(required, list) else []
    if missing:
        errors.append(
            f"paramsSchema requires {', '.join(map(repr, missing))} with no default in params: a DAG "
            "with a schedule or timetable cannot (its scheduled runs have no conf); give a default or "
            "make the DAG manual (schedule: null)"
        )
    return errors


def conf_errors(
    schema: Mapping[str, Any] | None, defaults: Mapping[str, Any], conf: Mapping[str, Any]
) -> list[str]:
    """Why `conf` merged over the `params` defaults does not satisfy the schema (empty: it does)."""
    if schema is None:
        return []
    return _violations(schema, merged_params(defaults, conf), skip_required=False)


def run_conf_errors(spec: Mapping[str, Any], conf: Mapping[str, Any]) -> list[str]:
    """Why a run's conf does not fit a DAG (its spec as on the wire): the DAG's `paramsSchema` over
    its params, then each task's `paramsSchema` over the DAG's params, the task's own (`args.params`)
    and the conf on top, as Airflow merges a task's params over the DAG's and the conf over both."""
    dag_params = spec.get("params") or {}
    errors = conf_errors(spec.get("paramsSchema"), dag_params, conf)
    for task in spec.get("tasks") or []:
        schema = task.get("paramsSchema")
        if schema:
            defaults = {**dag_params, **((task.get("args") or {}).get("params") or {})}
            errors += [f"task {task.get('id')!r}: {m}" for m in conf_errors(schema, defaults, conf)]
    return errors


def merged_params(defaults: Mapping[str, Any], conf: Mapping[str, Any]) -> dict[str, Any]:
    """The params a run sees: the conf's values over the DAG's defaults (`dag_run_conf_overrides_params`)."""
    return {**defaults, **conf}


def _violations(schema: Mapping[str, Any], value: Mapping[str, Any], *, skip_required: bool) -> list[str]:
    validator = jsonschema.validators.validator_for(schema)(schema, format_checker=jsonschema.FormatChecker())

    def check() -> list[Any]:
        with _deadline(CHECK_SECONDS):
            return list(validator.iter_errors(dict(value)))

    try:
        errors = _runner(check)
    except CheckTimeout:
        return [
            f"params: checking them against the schema took more than {CHECK_SECONDS:g} s and was "
            "stopped (a 'pattern' that backtracks on the value given? e.g. '^(a+)+$' nests a "
            "repetition in a repetition: write it without the nesting)"
        ]
    return sorted(  # "param 'name': ..." sentences, so by param name
        _describe(error)
        for error in errors
        if not (skip_required and error.validator == "required" and not error.absolute_path)
    )


def _describe(error: jsonschema.exceptions.ValidationError) -> str:
    path = list(error.absolute_path)
    if not path:
        if error.validator == "required":
            name = error.message.removesuffix(" is a required property")
            return f"param {name}: no value given and it has no default"
        return f"params: {error.message}"
    rest = "".join(f"[{p!r}]" if isinstance(p, int) else f".{p}" for p in path[1:])
    return f"param {path[0]!r}{rest}: {error.message}"
