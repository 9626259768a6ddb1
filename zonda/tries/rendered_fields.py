"""A task instance's rendered template fields, as Airflow's UI shows them ("Rendered Template").

The UI renders the task's `template_fields` with the same invocation
(`invocation_builder.task_invocation`), context (`task_context.build_context`) and sandbox the runner
uses for that try, so what it shows is what the try rendered.
Deliberate differences, said on the page and in docs/ui.md: `var` and `conn` are read from the
try's environment (its pod's secrets), which the UI does not have, so a template using them shows an
error rather than the UI process's own environment; `prev_data_interval_*_success` are not looked up;
and only built-in and provider operators are imported to learn their `template_fields` (the UI does not
import a user's import path).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from zonda.resources.dagrun_models import DagRunSpec, DagRunStatus
from zonda.resources.models import DagSpec
from zonda.specs import operator_registry
from zonda.specs.dags import DagInvalid, resolve_dag
from zonda.tries import invocation_builder, task_context, templating


class RenderingUnavailable(ValueError):
    """Why a task's fields cannot be rendered at all (no operator, run not started, unknown fields)."""


@dataclass(frozen=True)
class RenderedField:
    """One template field: its rendered value, or the error rendering it raised."""

    name: str
    value: Any = None
    error: str | None = None


class _NotInTheUi:
    """Stands for `var` and `conn`: the try reads them from its own environment, the UI cannot."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, key: str) -> Any:
        raise LookupError(f"{self._name}.{key} is read from the try's environment and not rendered by the UI")

    def __getitem__(self, key: str) -> Any:
        return getattr(self, key)

    def get(self, key: str, *_: Any) -> Any:
        return getattr(self, key)


def template_fields_of(operator: str) -> Sequence[str]:
    """The `template_fields` of a built-in or provider operator; raises `RenderingUnavailable` otherwise."""
    return tuple(getattr(_operator_class(operator), "template_fields", ()))


def template_ext_of(operator: str, args: Mapping[str, Any]) -> tuple[str, ...]:
    """The template file extensions of a built-in or provider operator given `args` (`templates_exts`
    on a Python task is its `template_ext`, as Airflow's `PythonOperator`)."""
    given = args.get("templates_exts")
    if isinstance(given, list) and given:
        return tuple(str(ext) for ext in given)
    return tuple(getattr(_operator_class(operator), "template_ext", ()))


def _operator_class(operator: str) -> type:
    known = {**operator_registry.BUILTIN_OPERATORS, **operator_registry.provider_operators()}
    if operator not in known:
        raise RenderingUnavailable(f"{operator} is a user's import path: the UI does not import it")
    module_name, _, class_name = known[operator].rpartition(".")
    try:
        operator_class = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError) as error:
        raise RenderingUnavailable(f"cannot import {operator}: {error}") from error
    return operator_class  # type: ignore[no-any-return]


def render_task_fields(run: Mapping[str, Any], task_id: str, try_number: int) -> list[RenderedField]:
    """Render task `task_id`'s template fields for try `try_number` of the DagRun body `run`.

    A field whose template fails gets the error text; anything that prevents rendering at all
    (unreadable run, container task, custom operator) raises `RenderingUnavailable`.
    """
    raw_status = run.get("status") or {}
    try:
        spec = DagRunSpec.model_validate(run.get("spec") or {})
        status = DagRunStatus.model_validate(raw_status)
        dag_spec = DagSpec.model_validate(raw_status.get("dagSpec") or {})
        task = resolve_dag(spec.dag_name, dag_spec).tasks[task_id]
    except (ValueError, KeyError, DagInvalid) as error:
        raise RenderingUnavailable(f"the run's record cannot be read: {error}") from error
    if task.operator is None:
        raise RenderingUnavailable("a container task has no template fields")
    if status.dag_spec is None:
        raise RenderingUnavailable("the run has not started")
    fields = template_fields_of(task.operator)
    template_ext = template_ext_of(task.operator, task.args)
    invocation = invocation_builder.task_invocation(
        run_name=run["metadata"]["name"],
        spec=spec,
        status=status,
        dag_spec=dag_spec,
        task=task,
        try_number=max(try_number, 1),
        namespace=run["metadata"].get("namespace"),
    )
    task_params = invocation.args.get("params")
    context = task_context.build_context(
        invocation, task_params=task_params if isinstance(task_params, Mapping) else None
    )
    context.update(var=_NotInTheUi("var"), conn=_NotInTheUi("conn"))
    try:
        environment = templating.invocation_environment(invocation)  # the DAG's macros, filters, native
    except templating.TemplateError as error:
        raise RenderingUnavailable(str(error)) from error
    rendered = []
    spent = templating.budget()  # the task's, as its try would: a template that is too big or slow says so
    for name in fields:
        if name not in invocation.args:
            continue
        try:
            rendered.append(
                RenderedField(
                    name,
                    templating.render(
                        invocation.args[name],
                        context,
                        field=name,
                        environment=environment,
                        budget=spent,
                        template_ext=template_ext,
                    ),
                )
            )
        except templating.TemplateError as error:
            rendered.append(RenderedField(name, error=str(error)))
    return rendered
