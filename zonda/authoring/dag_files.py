"""Load DAG files as Airflow's DagBag does: a folder tree, `.airflowignore`, safe mode, zipped packages.

Each Python file is imported as a module named after its path in the DAGs folder (`team/etl.py` ->
`team.etl`), with the DAGs folder on `sys.path` as Airflow puts it, so a DAG file imports its helper
modules the same way under `zonda dags render` and in the task runner. The DAG objects at the top level
of a module are its DAGs, and so are those its top-level code used as a context manager (`with DAG(...):`,
Airflow 2.4's `auto_register`). A file that fails to import is reported with its line and traceback tail; the
other files still load.

The task runner uses `load_task_callable` to follow a `dagfile:` reference (see
`zonda.authoring.manifests`): it imports that one file from the DAGs folder named by `$ZONDA_DAGS_FOLDER`.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
import traceback
import urllib.parse
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pathspec

from zonda.authoring import compat, contexts, manifest_values
from zonda.authoring.dags import DAG

#: Where task runners (and `zonda dags test`) find DAG files; `zonda dags render` uses its PATH argument.
DAGS_FOLDER_ENV = "ZONDA_DAGS_FOLDER"
#: `regexp` (Airflow's default) or `glob`: the syntax of `.airflowignore` files.
IGNORE_SYNTAX_ENV = "ZONDA_DAG_IGNORE_FILE_SYNTAX"
IGNORE_FILE = ".airflowignore"
#: Lines of traceback kept in an import error.
TRACEBACK_TAIL = 6


@dataclass
class ImportFailure:
    file: str
    line: int | None
    message: str
    traceback: str


@dataclass
class FileResult:
    """What one DAG file gave: its DAGs in file order, or why it failed."""

    path: Path
    dags: list[DAG] = field(default_factory=list)
    failure: ImportFailure | None = None


def dags_folder() -> Path:
    return Path(os.environ.get(DAGS_FOLDER_ENV) or ".").resolve()


# ------------------------------------------------------------------------------------ discovery


def list_dag_files(folder: Path, *, safe_mode: bool = True, ignore_syntax: str | None = None) -> list[Path]:
    """Python files and zip packages under `folder`, sorted, minus what `.airflowignore` files exclude.

    Safe mode keeps only files mentioning both "dag" and "airflow" or "zonda" (Airflow's
    `DAG_DISCOVERY_SAFE_MODE`, case-insensitive).
    """
    syntax = ignore_syntax or os.environ.get(IGNORE_SYNTAX_ENV) or "regexp"
    if syntax not in ("regexp", "glob"):
        raise ValueError(f"unknown .airflowignore syntax {syntax!r}: use 'regexp' or 'glob'")
    if folder.is_file():
        return [folder] if _is_candidate(folder, safe_mode) else []
    found: list[Path] = []
    for directory, rules in _walk(folder.resolve(), syntax):
        for entry in sorted(directory.iterdir()):
            if entry.is_file() and not _ignored(entry, rules) and _is_candidate(entry, safe_mode):
                found.append(entry)
    return found


@dataclass(frozen=True)
class _Rule:
    base: Path
    regexp: re.Pattern[str] | None = None
    spec: pathspec.GitIgnoreSpec | None = None


def _walk(root: Path, syntax: str) -> Iterator[tuple[Path, list[_Rule]]]:
    pending: list[tuple[Path, list[_Rule]]] = [(root, [])]
    while pending:
        directory, inherited = pending.pop(0)
        rules = [*inherited, *_read_rules(directory, syntax)]
        yield directory, rules
        for entry in sorted(directory.iterdir()):
            if entry.is_dir() and entry.name != "__pycache__" and not _ignored(entry, rules):
                pending.append((entry, rules))


def _read_rules(directory: Path, syntax: str) -> list[_Rule]:
    ignore_file = directory / IGNORE_FILE
    if not ignore_file.is_file():
        return []
    lines = [
        line.split("#", 1)[0].strip() if syntax == "regexp" else line.rstrip("\n")
        for line in ignore_file.read_text().splitlines()
    ]
    lines = [line for line in lines if line.strip() and not line.lstrip().startswith("#")]
    if syntax == "glob":
        return [_Rule(directory, spec=pathspec.GitIgnoreSpec.from_lines(lines))]
    rules = []
    for line in lines:
        try:
            rules.append(_Rule(directory, regexp=re.compile(line)))
        except re.error as error:
            raise ValueError(f"{ignore_file}: invalid regular expression {line!r}: {error}") from error
    return rules


def _ignored(path: Path, rules: list[_Rule]) -> bool:
    ignored = False
    for rule in rules:
        relative = path.relative_to(rule.base).as_posix()
        if rule.regexp is not None and rule.regexp.search(relative):
            return True
        if rule.spec is not None:
            candidate = relative + "/" if path.is_dir() else relative
            result = rule.spec.check_file(candidate)
            if result.include is not None:
                ignored = bool(result.include)
    return ignored


def _is_candidate(path: Path, safe_mode: bool) -> bool:
    if path.suffix == ".zip" and zipfile.is_zipfile(path):
        return True
    if path.suffix != ".py":
        return False
    if not safe_mode:
        return True
    content = path.read_bytes().lower()
    return b"dag" in content and (b"airflow" in content or b"zonda" in content)


# -------------------------------------------------------------------------------------- loading


def load_file(path: Path, folder: Path) -> list[FileResult]:
    """Import a DAG file (or each top-level .py of a zip package) and collect its top-level DAGs."""
    if path.suffix == ".zip":
        return _load_zip(path, folder)
    return [_load_module(path, folder, _module_name(path, folder))]


def _module_name(path: Path, folder: Path) -> str:
    try:
        relative = path.resolve().relative_to(folder.resolve())
    except ValueError:
        return path.stem
    return ".".join(relative.with_suffix("").parts)


def _load_module(path: Path, folder: Path, name: str, *, zip_path: Path | None = None) -> FileResult:
    result = FileResult(path=path)
    with compat.on_sys_path(zip_path or folder):
        sys.modules.pop(name, None)
        manifest_values.DAG_FILE_MODULES.add(name)
        contexts.start_collecting()
        try:
            if zip_path is not None:
                module = importlib.import_module(name)
            else:
                spec = importlib.util.spec_from_file_location(name, path)
                assert spec is not None and spec.loader is not None
                module = importlib.util.module_from_spec(spec)
                sys.modules[name] = module
                spec.loader.exec_module(module)
        except BaseException as error:  # a DAG file may raise anything, SystemExit included
            sys.modules.pop(name, None)
            if isinstance(error, KeyboardInterrupt):
                raise
            result.failure = describe_import_error(path, error)
            return result
    found = top_level_dags(module)
    result.dags = found + [dag for dag in contexts.collected() if dag not in found]
    return result


def _load_zip(path: Path, folder: Path) -> list[FileResult]:
    results = []
    with zipfile.ZipFile(path) as archive:
        names = sorted(n for n in archive.namelist() if n.endswith(".py") and "/" not in n)
    for member in names:
        results.append(_load_module(path / member, folder, member[:-3], zip_path=path))
    return results


def top_level_dags(module: ModuleType) -> list[DAG]:
    """The DAG objects in the module's globals, once each, in the order they were defined."""
    seen: dict[int, DAG] = {}
    for value in vars(module).values():
        if isinstance(value, DAG):
            seen.setdefault(id(value), value)
    return list(seen.values())


def describe_import_error(path: Path, error: BaseException) -> ImportFailure:
    """The failing file's line (the deepest frame in that file, or a SyntaxError's line) and the tail."""
    line: int | None = None
    if isinstance(error, SyntaxError) and error.filename and Path(error.filename).resolve() == path.resolve():
        line = error.lineno
    for frame in traceback.extract_tb(error.__traceback__):
        if Path(frame.filename).resolve() == path.resolve():
            line = frame.lineno
    frames = [
        frame
        for frame in traceback.extract_tb(error.__traceback__)
        if not frame.filename.startswith("<frozen") and Path(frame.filename).parent != _HERE
    ]
    message = "".join(traceback.format_exception_only(error)).strip()
    tail = "".join(traceback.format_list(frames[-TRACEBACK_TAIL:])).rstrip()
    return ImportFailure(
        file=str(path),
        line=line,
        message=message,
        traceback=(tail + "\n" if tail else "") + message,
    )


_HERE = Path(__file__).parent


# ------------------------------------------------------------------------------ the task runner


def load_task_callable(reference: str) -> Any:
    """The `python_callable` of the task a `dagfile:` reference names, from a fresh import of its file."""
    dag, query = _load_referenced_dag(reference)
    task_id = query.get("task_id", [""])[0]
    if "map" in query:  # an `XComArg.map()` function of a mapped task
        functions = getattr(dag.get_task(task_id), "map_functions", [])
        position = int(query["map"][0])
        if position >= len(functions):
            raise ImportError(f"task {task_id!r} of DAG {dag.dag_id!r} has no .map() function {position}")
        return functions[position]
    function = getattr(dag.get_task(task_id), "python_callable", None)
    if function is None:
        raise ImportError(f"task {task_id!r} of DAG {dag.dag_id!r} has no python_callable")
    return function


def load_template_value(reference: str) -> Any:
    """A user-defined macro (`&macro=name`) or filter (`&filter=name`) of the DAG a `dagfile:`
    reference names, from a fresh import of its file: what a DAG file defines (a lambda, a constant)."""
    dag, query = _load_referenced_dag(reference)
    for key, values in (("macro", dag.user_defined_macros), ("filter", dag.user_defined_filters)):
        name = query.get(key, [None])[0]
        if name is not None:
            if name not in values:
                raise ImportError(f"DAG {dag.dag_id!r} has no user-defined {key} {name!r}")
            return values[name]
    raise ImportError(f"{reference!r} names neither a macro nor a filter")


def load_callback(reference: str) -> Any:
    """A callback the DAG file defines, named by a `dagfile:` reference: a task's (`&task_id=..&callback=..`),
    a `default_args` one (`&default_arg=..`) or the DAG's (`&dag_callback=..`), `&index=` in a list."""
    dag, query = _load_referenced_dag(reference)
    task_id, index = query.get("task_id", [None])[0], int(query.get("index", ["0"])[0])
    if (name := query.get("callback", [None])[0]) is not None and task_id is not None:
        value = dag.get_task(task_id).authored_arguments.get(name)
    elif (name := query.get("default_arg", [None])[0]) is not None:
        value = dag.default_args.get(name)
    elif (name := query.get("dag_callback", [None])[0]) is not None:
        value = getattr(dag, name, None)
    else:
        raise ImportError(f"{reference!r} names no callback")
    values = list(value) if isinstance(value, list | tuple) else [value]
    if index >= len(values) or not callable(values[index]):
        raise ImportError(f"DAG {dag.dag_id!r} has no callable {name} at {reference!r}")
    return values[index]


def _load_referenced_dag(reference: str) -> tuple[DAG, dict[str, list[str]]]:
    parsed = urllib.parse.urlparse(reference)
    query = urllib.parse.parse_qs(parsed.query)
    relative = urllib.parse.unquote(parsed.path)
    dag_id = query.get("dag_id", [""])[0]
    folder = dags_folder()
    path = folder / relative
    if ".zip/" in relative:
        zip_part, _, member = relative.partition(".zip/")
        results = [r for r in _load_zip(folder / f"{zip_part}.zip", folder) if r.path.name == member]
    elif not path.is_file():
        raise ImportError(
            f"DAG file {relative!r} is not in the DAGs folder {str(folder)!r}: set ${DAGS_FOLDER_ENV} to the "
            "folder the DAGs were rendered from (the image or the local executor must have it)"
        )
    else:
        from zonda.authoring import compat

        with compat.airflow_imports(enabled=compat.wanted(path)):
            results = [_load_module(path, folder, _module_name(path, folder))]
    for result in results:
        if result.failure is not None:
            raise ImportError(f"cannot import DAG file {relative!r}: {result.failure.message}")
        for dag in result.dags:
            if dag.dag_id == dag_id:
                return dag, query
    raise ImportError(f"DAG file {relative!r} defines no DAG {dag_id!r} at its top level")
