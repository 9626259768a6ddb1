"""Template files: what Airflow's `template_ext` reads, read when the DAG is rendered.

In Airflow a templated field's string ending with one of the operator's `template_ext` (BashOperator's
`.sh`/`.bash`, `templates_exts=[".sql"]` on a Python task) names a Jinja template file, found by the
DAG's `FileSystemLoader` over the DAG file's folder, then `template_searchpath`
(`DAG.get_template_env`). Both Airflow 2.10 and 3.x read it twice: when the DAG file is parsed
(`resolve_template_files`: top-level strings and list items only; a file not found is logged, the parse
goes on) and when the task renders its fields (`render_template`: any string, nested ones too, with
`jinja_env.get_template`; a file not found raises `TemplateNotFound` and fails the task).

A Zonda try runs in a pod whose image need not hold the DAGs folder, so `collect` reads the files
when the DAG is rendered, from the same search path in the same order, and the manifest carries them
(`spec.templateFiles`, name -> text, within `MAX_TEMPLATE_FILES_BYTES`): the try's Jinja loader is that
mapping (`zonda.tries.templating.create_environment`). Templates those files (or inline templates)
name with `{% include %}`, `{% import %}`, `{% from %}` or `{% extends %}` are read too. A file not
found does not fail the render, as it fails no parse in Airflow: it is reported (a warning naming the
task, the field and the folders searched) and the try fails with `TemplateNotFound` when it renders,
as Airflow's task does. Pure of Kubernetes; reads the DAG's files.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from zonda.resources.models import MAX_TEMPLATE_FILES_BYTES

if TYPE_CHECKING:
    import jinja2

    from zonda.authoring.dags import DAG
    from zonda.operators.base import BaseOperator


@dataclass
class TemplateFiles:
    """What `collect` found: the files' text by template name, and the names not found."""

    files: dict[str, str] = field(default_factory=dict)
    #: name -> where it was named ("task 'x' field 'bash_command'", or the template including it)
    missing: dict[str, str] = field(default_factory=dict)
    #: The folders searched, in order (the DAG file's, then `template_searchpath`).
    searchpath: list[str] = field(default_factory=list)

    def size(self) -> int:
        return sum(len(text.encode()) for text in self.files.values())

    def too_large(self) -> str | None:
        """The render error when the files are more than a manifest carries, else None."""
        total = self.size()
        if total <= MAX_TEMPLATE_FILES_BYTES:
            return None
        largest = sorted(self.files, key=lambda name: -len(self.files[name].encode()))[:3]
        sizes = ", ".join(f"{name!r} ({len(self.files[name].encode())} bytes)" for name in largest)
        return (
            f"template files total {total} bytes, more than the {MAX_TEMPLATE_FILES_BYTES} a DAG's manifest "
            f"carries (largest: {sizes}): keep a large script in the task image and name it with a trailing "
            "space ('script.sh '), which Airflow runs as a command instead of reading it as a template"
        )


def searchpath(dag: DAG) -> list[str]:
    """Airflow's `DAG.get_template_env` search path: the DAG file's folder, then `template_searchpath`."""
    return [os.path.dirname(dag.fileloc), *dag.template_searchpath]


def collect(dag: DAG) -> TemplateFiles:
    """Read the template files `dag`'s tasks name, as Airflow's loader would find them."""
    import jinja2

    found = TemplateFiles(searchpath=searchpath(dag))
    environment = jinja2.Environment(loader=jinja2.FileSystemLoader(found.searchpath))
    pending: list[tuple[str, str]] = []
    for task in dag.tasks:
        template_ext = tuple(getattr(task, "template_ext", ()) or ())
        for name, value in _template_values(task):
            where = f"task {task.task_id!r} field {name!r}"
            for text in _strings(value):
                if template_ext and text.endswith(template_ext):
                    pending.append((text, where))
                elif "{%" in text:
                    pending += [(included, where) for included in _referenced(environment, text)]
    while pending:
        name, where = pending.pop(0)
        if name in found.files or name in found.missing:
            continue
        try:
            text = environment.loader.get_source(environment, name)[0]  # type: ignore[union-attr]
        except jinja2.TemplateNotFound:
            found.missing[name] = where
            continue
        found.files[name] = text
        pending += [(included, f"template {name!r}") for included in _referenced(environment, text)]
    return found


def missing_warnings(found: TemplateFiles) -> list[str]:
    """The render's warnings (`zonda dags render`, `--report`) for the files not found: as Airflow's
    parse logs "Failed to resolve template field", and the try fails on each."""
    folders = ", ".join(found.searchpath)
    return [
        f"template file {name!r} (named by {where}) not found in {folders}: the task fails with "
        "TemplateNotFound when it renders, as in Airflow"
        for name, where in found.missing.items()
    ]


def _template_values(task: BaseOperator) -> Iterator[tuple[str, Any]]:
    """Each template field's value as the DAG file gave it, and a mapped task's literal sources for it."""
    fields = tuple(getattr(task, "template_fields", ()) or ())
    for name in fields:
        yield name, getattr(task, name, None)
    spec = getattr(task, "expand_spec", None) or {}
    into = spec.get("into")
    for name, value in (spec.get("kwargs") or {}).items():
        if name in fields or (into is not None and into in fields):
            yield name, value
    kwargs_list = spec.get("kwargs_list")
    for kwargs in kwargs_list if isinstance(kwargs_list, list) else ():
        if isinstance(kwargs, Mapping):
            for name, value in kwargs.items():
                if name in fields or (into is not None and into in fields):
                    yield name, value


def _strings(value: Any) -> Iterator[str]:
    """The strings in `value` that Airflow's `render_template` renders: itself, or those in its lists,
    tuples, sets and dict values (an `XComArg` or any other object is not a string)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list | tuple | set | frozenset):
        for item in value:
            yield from _strings(item)


def _referenced(environment: jinja2.Environment, source: str) -> list[str]:
    """The template names `source` includes, imports or extends by a constant name (a name computed
    when it renders cannot be known here). A template that does not parse names none: its try says why."""
    import jinja2
    import jinja2.meta

    try:
        return [name for name in jinja2.meta.find_referenced_templates(environment.parse(source)) if name]
    except jinja2.TemplateSyntaxError:
        return []
