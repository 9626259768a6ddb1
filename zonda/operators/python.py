"""Airflow's `PythonOperator`, `BranchPythonOperator` and `ShortCircuitOperator`.

A DAG written in YAML cannot hold a function, so `python_callable` may also be an import path,
`"pkg.module:function"`, imported where the task runs, or (as `zonda dags render` writes for functions
defined in a DAG file, nested ones and lambdas) `"dagfile:<file>?dag_id=..&task_id=.."`: the runner
re-imports that DAG file from `$ZONDA_DAGS_FOLDER` and takes the function from the task.
"""

from __future__ import annotations

import ast
import asyncio
import hashlib
import importlib.util
import inspect
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import types
from collections.abc import Callable, Collection, Container, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from zonda.context import Context
from zonda.context import get_current_context as get_current_context  # Airflow's home of it
from zonda.exceptions import AirflowException, AirflowSkipException
from zonda.operators.base import BaseOperator, SkipMixin
from zonda.specs.imports import import_string
from zonda.tries import asset_events

#: Prefix of a callable reference into a DAG file (`zonda.authoring.manifests` writes them).
DAG_FILE_SCHEME = "dagfile:"


def resolve_python_callable(python_callable: Callable[..., Any] | str) -> Callable[..., Any]:
    """The callable itself, or the one an import path names; anything else is an `AirflowException`."""
    if isinstance(python_callable, str) and python_callable.startswith(DAG_FILE_SCHEME):
        from zonda.authoring.dag_files import load_task_callable  # imports the user's DAG file

        try:
            python_callable = load_task_callable(python_callable)
        except ImportError as error:
            raise AirflowException(f"Cannot load python_callable {python_callable!r}: {error}") from error
    elif isinstance(python_callable, str):
        try:
            python_callable = import_string(python_callable)
        except ImportError as error:
            raise AirflowException(f"Cannot import python_callable {python_callable!r}: {error}") from error
    if not callable(python_callable):
        raise AirflowException("`python_callable` param must be callable")
    return python_callable


def determine_kwargs(
    func: Callable[..., Any], args: Collection[Any], kwargs: Mapping[str, Any]
) -> Mapping[str, Any]:
    """The keyword arguments `func` asks for: all of `kwargs` if it has `**kwargs`, else those it names.

    Airflow's `determine_kwargs`: a function declaring `ti` and `ds` receives just those context
    variables. A positional argument may not share its name with a keyword one.
    """
    signature = inspect.signature(func)
    for name, parameter in itertools.islice(signature.parameters.items(), len(args)):
        if parameter.kind in (parameter.KEYWORD_ONLY, parameter.VAR_KEYWORD):
            continue
        if name in kwargs:
            raise ValueError(f"The key {name!r} in args is a part of kwargs and therefore reserved.")
    if any(parameter.kind == parameter.VAR_KEYWORD for parameter in signature.parameters.values()):
        return kwargs
    return {name: kwargs[name] for name in signature.parameters if name in kwargs}


def context_merge(context: Context, *args: Mapping[str, Any], **kwargs: Any) -> None:
    """Merge mappings into the context in place (Airflow's `context_merge`)."""
    for mapping in args:
        context.update(mapping)
    context.update(kwargs)


class PythonOperator(BaseOperator):
    """Call a Python function; its return value is the task's XCom.

    The function receives `op_args`, `op_kwargs`, and the context variables its signature names (all of
    them if it takes `**kwargs`), as in Airflow.

    :param python_callable: a callable, or an import path `"pkg.module:function"`.
    :param op_args: positional arguments. (templated)
    :param op_kwargs: keyword arguments. (templated)
    :param templates_dict: rendered, then given to the callable as the context variable
        `templates_dict`. (templated)
    :param templates_exts: the extensions of template files (Airflow's `template_ext`): a templated
        string ending with one names a file read when the DAG is rendered (docs/authoring.md).
    :param show_return_value_in_logs: log the return value (turn off for large values).
    :param multiple_outputs: each key of the returned dict is also an XCom of its own (set by `@task`,
        as Airflow's decorated operator; `xcom_pull(key=...)` then reads it).
    """

    template_fields: Sequence[str] = ("templates_dict", "op_args", "op_kwargs")

    def __init__(
        self,
        *,
        python_callable: Callable[..., Any] | str,
        op_args: Collection[Any] | None = None,
        op_kwargs: Mapping[str, Any] | None = None,
        templates_dict: dict[str, Any] | None = None,
        templates_exts: Sequence[str] | None = None,
        show_return_value_in_logs: bool = True,
        multiple_outputs: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.multiple_outputs = multiple_outputs
        self.python_callable = resolve_python_callable(python_callable)
        self.op_args: Collection[Any] = op_args or ()
        self.op_kwargs: Mapping[str, Any] = op_kwargs or {}
        self.templates_dict = templates_dict
        if templates_exts:
            self.template_ext = tuple(templates_exts)
        self.show_return_value_in_logs = show_return_value_in_logs

    def execute(self, context: Context) -> Any:
        context_merge(context, self.op_kwargs, templates_dict=self.templates_dict)
        self.op_kwargs = self.determine_kwargs(context)
        return_value = self.execute_callable()
        if inspect.isgenerator(return_value):  # a task that yields Metadata(asset, extra)
            return_value = asset_events.drain_metadata(return_value, context.get("outlet_events"))
        if self.show_return_value_in_logs:
            self.log.info("Done. Returned value was: %s", return_value)
        else:
            self.log.info("Done. Returned value not shown")
        return return_value

    def determine_kwargs(self, context: Mapping[str, Any]) -> Mapping[str, Any]:
        return determine_kwargs(self.python_callable, self.op_args, context)

    def execute_callable(self) -> Any:
        result = self.python_callable(*self.op_args, **self.op_kwargs)
        if inspect.iscoroutine(result):  # an `async def` callable (Airflow 3.2+): run on an event loop
            return asyncio.run(result)
        return result


class BranchPythonOperator(PythonOperator, SkipMixin):
    """Follow the direct downstream task(s) whose id(s) the callable returns; skip the others.

    The callable returns a task id, a list of task ids, or None (skip every direct downstream task).
    """

    def execute(self, context: Context) -> Any:
        branch = super().execute(context)
        self.skip_all_except(context.get("ti"), branch)
        return branch


class ShortCircuitOperator(PythonOperator, SkipMixin):
    """Go on downstream only if the callable returns a truthy value.

    :param ignore_downstream_trigger_rules: on a falsy value, skip every downstream task whatever its
        trigger rule (default); if False, skip only the direct downstream tasks and let the trigger
        rules of the tasks after them decide.
    """

    def __init__(self, *, ignore_downstream_trigger_rules: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.ignore_downstream_trigger_rules = ignore_downstream_trigger_rules

    def execute(self, context: Context) -> Any:
        condition = super().execute(context)
        self.log.info("Condition result is %s", condition)
        if condition:
            self.log.info("Proceeding with downstream tasks...")
            return condition
        self.log.info("Skipping downstream tasks")
        self.skip_downstream(ignore_downstream_trigger_rules=self.ignore_downstream_trigger_rules)
        return condition


# ---------------------------------------------------------------- virtualenv and external Python


def is_venv_installed() -> bool:
    """Whether this Python can build virtualenvs (Airflow's check for the `virtualenv` tool).

    Zonda builds them with the standard library's `venv` (with pip from `ensurepip`), so the answer is
    yes wherever `ensurepip` or `virtualenv` is present.
    """
    return bool(
        shutil.which("virtualenv")
        or importlib.util.find_spec("virtualenv")
        or importlib.util.find_spec("ensurepip")
    )


#: Context values a function in another interpreter may receive (strings): Airflow's base set.
BASE_SERIALIZABLE_CONTEXT_KEYS = frozenset({
    "ds", "ds_nodash", "expanded_ti_count", "inlets", "map_index_template", "next_ds", "next_ds_nodash",
    "outlets", "prev_ds", "prev_ds_nodash", "run_id", "task_instance_key_str", "test_mode", "tomorrow_ds",
    "tomorrow_ds_nodash", "ts", "ts_nodash", "ts_nodash_with_tz", "yesterday_ds", "yesterday_ds_nodash",
})  # fmt: skip
#: ... and these pendulum datetimes, when the other interpreter has pendulum.
PENDULUM_SERIALIZABLE_CONTEXT_KEYS = frozenset({
    "data_interval_end", "data_interval_start", "execution_date", "logical_date", "next_execution_date",
    "prev_data_interval_end_success", "prev_data_interval_start_success", "prev_execution_date",
    "prev_execution_date_success", "prev_start_date_success", "prev_end_date_success",
})  # fmt: skip

#: Airflow's serializers of arguments and results: the module is imported when the try runs (dill
#: and cloudpickle must be installed there, and in the virtualenv: added to its requirements).
SERIALIZERS = ("pickle", "dill", "cloudpickle")

_SCRIPT = """\
import {serializer} as pickle
import sys

{source}

with open(sys.argv[1], "rb") as file:
    arg_dict = pickle.load(file)
with open(sys.argv[3], "r") as file:
    virtualenv_string_args = list(map(lambda x: x.strip(), list(file)))
try:
    res = {name}(*arg_dict["args"], **arg_dict["kwargs"])
except Exception as e:
    with open(sys.argv[4], "w") as file:
        file.write(str(e))
    raise
with open(sys.argv[2], "wb") as file:
    if res is not None:
        pickle.dump(res, file)
"""


class _BasePythonVirtualenvOperator(PythonOperator):
    """Run the function's source in another Python interpreter (Airflow's base of the next four).

    The function must be a `def` that imports what it uses; its arguments and return value cross by
    pickle, so they must be picklable there. `string_args` are the global `virtualenv_string_args`.
    """

    template_fields: Sequence[str] = (*PythonOperator.template_fields, "string_args")

    def __init__(
        self,
        *,
        python_callable: Callable[..., Any] | str,
        serializer: str | None = None,
        string_args: Iterable[str] | None = None,
        expect_airflow: bool = True,
        skip_on_exit_code: int | Container[int] | None = None,
        env_vars: dict[str, str] | None = None,
        inherit_env: bool = True,
        use_dill: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(python_callable=python_callable, **kwargs)
        function = self.python_callable
        if not isinstance(function, types.FunctionType) or function.__name__ == "<lambda>":
            raise ValueError(f"{type(self).__name__} only supports functions for python_callable arg")
        if inspect.isgeneratorfunction(function):
            raise ValueError(f"{type(self).__name__} does not support using 'yield' in python_callable")
        serializer = "dill" if use_dill else (serializer or "pickle")
        if serializer not in SERIALIZERS:
            raise AirflowException(
                f"Unsupported serializer {serializer!r}. Expected one of {', '.join(map(repr, SERIALIZERS))}"
            )
        self.serializer = serializer
        self.string_args = list(string_args or [])
        self.expect_airflow = expect_airflow
        if isinstance(skip_on_exit_code, int):
            self.skip_on_exit_code: Container[int] = [skip_on_exit_code]
        else:
            self.skip_on_exit_code = skip_on_exit_code if skip_on_exit_code is not None else []
        self.env_vars = env_vars
        self.inherit_env = inherit_env

    def _has_pendulum(self) -> bool:
        return False

    def determine_kwargs(self, context: Mapping[str, Any]) -> Mapping[str, Any]:
        keys = set(BASE_SERIALIZABLE_CONTEXT_KEYS) | set(self.op_kwargs) | {"templates_dict", "params"}
        if self._has_pendulum():
            keys |= PENDULUM_SERIALIZABLE_CONTEXT_KEYS
        values = {key: value for key, value in context.items() if key in keys}
        if "params" in values:
            values["params"] = dict(values["params"])
        return determine_kwargs(self.python_callable, self.op_args, values)

    def get_python_source(self) -> str:
        """The function's own source, without its decorators (`@task.virtualenv(...)`)."""
        source = textwrap.dedent(inspect.getsource(self.python_callable))
        tree = ast.parse(source)
        definition = tree.body[0]
        start = definition.lineno - 1  # the `def` line: decorators come before it
        return "\n".join(source.splitlines()[start:])

    def _python_path(self, directory: Path) -> str:
        raise NotImplementedError

    def execute_callable(self) -> Any:
        with tempfile.TemporaryDirectory(prefix="venv-call") as tmp:
            directory = Path(tmp)
            python = self._python_path(directory)
            script = directory / "script.py"
            source, name = self.get_python_source(), self.python_callable.__name__
            script.write_text(_SCRIPT.format(source=source, name=name, serializer=self.serializer))
            serializer = importlib.import_module(self.serializer)
            inputs, output = directory / "script.in", directory / "script.out"
            strings, termination = directory / "string_args.txt", directory / "termination.log"
            inputs.write_bytes(serializer.dumps({"args": list(self.op_args), "kwargs": dict(self.op_kwargs)}))
            strings.write_text("\n".join(map(str, self.string_args)))
            env = dict(os.environ) if self.inherit_env else {}
            env.update(self.env_vars or {})
            command = [python, str(script), str(inputs), str(output), str(strings), str(termination)]
            self.log.info("Running %s", " ".join(command))
            done = subprocess.run(
                command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False
            )
            for line in done.stdout.decode(errors="replace").splitlines():
                self.log.info("%s", line)
            if done.returncode in self.skip_on_exit_code:
                raise AirflowSkipException(f"Process exited with code {done.returncode}. Skipping.")
            if done.returncode != 0:
                message = f"Process returned non-zero exit status {done.returncode}."
                if termination.exists() and termination.stat().st_size > 0:
                    message += "\n" + termination.read_text()
                raise AirflowException(message)
            if output.stat().st_size == 0:
                return None
            return serializer.loads(output.read_bytes())


class PythonVirtualenvOperator(_BasePythonVirtualenvOperator):
    """Run the function in a virtualenv built for the try from `requirements` (Airflow's operator).

    The virtualenv is built where the task runs (its pod, or the `zonda dags test` process) with the
    standard library's `venv` and pip; a requirement pip cannot install (no index reachable, no such
    version) fails the try naming it. `venv_cache_path` keeps built virtualenvs there, one per
    requirements set, as Airflow does.

    :param requirements: requirement strings, or one string (a requirements line).
    :param python_version: `python{version}` on PATH builds the virtualenv; None: the runner's Python.
    :param system_site_packages: the virtualenv sees the runner's packages (Airflow's default).
    :param pip_install_options: extra `pip install` options.
    :param index_urls: the index (first) and extra indexes pip installs from.
    """

    def __init__(
        self,
        *,
        python_callable: Callable[..., Any] | str,
        requirements: Iterable[str] | str | None = None,
        python_version: str | None = None,
        system_site_packages: bool = True,
        pip_install_options: list[str] | None = None,
        index_urls: Collection[str] | str | None = None,
        venv_cache_path: str | os.PathLike[str] | None = None,
        **kwargs: Any,
    ) -> None:
        if (
            python_version
            and str(python_version)[0] != str(sys.version_info.major)
            and (kwargs.get("op_args") or kwargs.get("op_kwargs"))
        ):
            raise AirflowException(
                "Passing op_args or op_kwargs is not supported across different Python "
                "major versions for PythonVirtualenvOperator. Please use string_args."
            )
        if isinstance(requirements, str):
            self.requirements: list[str] = [requirements]
        else:
            self.requirements = list(requirements or [])
        self.python_version = None if python_version is None else str(python_version)
        self.system_site_packages = system_site_packages
        self.pip_install_options = list(pip_install_options or [])
        self.index_urls = [index_urls] if isinstance(index_urls, str) else list(index_urls or []) or None
        self.venv_cache_path = None if venv_cache_path is None else str(venv_cache_path)
        super().__init__(python_callable=python_callable, **kwargs)

    def _has_pendulum(self) -> bool:
        return self.system_site_packages or any(
            r.split("=")[0].strip() == "pendulum" for r in self.requirements
        )

    def _python_path(self, directory: Path) -> str:
        if self.venv_cache_path:
            key = json.dumps(
                [sorted(self.requirements), self.pip_install_options, self.index_urls, self.python_version,
                 self.system_site_packages], sort_keys=True,
            )  # fmt: skip
            venv = Path(self.venv_cache_path) / f"venv-{hashlib.sha256(key.encode()).hexdigest()[:8]}"
            if (venv / "bin" / "python").exists():
                self.log.info("Reusing the cached virtualenv %s", venv)
                return str(venv / "bin" / "python")
        else:
            venv = directory / "venv"
        requirements = list(self.requirements)
        if (
            not self.system_site_packages
            and self.serializer != "pickle"
            and self.serializer not in requirements
        ):
            requirements.append(self.serializer)
        build_virtualenv(
            venv,
            python=f"python{self.python_version}" if self.python_version else sys.executable,
            system_site_packages=self.system_site_packages,
            requirements=requirements,
            pip_install_options=self.pip_install_options,
            index_urls=self.index_urls,
        )
        return str(venv / "bin" / "python")


def build_virtualenv(
    venv: Path,
    *,
    python: str,
    system_site_packages: bool,
    requirements: Sequence[str],
    pip_install_options: Sequence[str] = (),
    index_urls: Sequence[str] | None = None,
) -> None:
    """A virtualenv at `venv` with `requirements` installed; an `AirflowException` names what failed."""
    interpreter = python if os.path.isabs(python) else shutil.which(python)
    if interpreter is None:
        raise AirflowException(f"{python} is not installed where the task runs: cannot build its virtualenv")
    command = [
        interpreter,
        "-m",
        "venv",
        *(["--system-site-packages"] if system_site_packages else []),
        str(venv),
    ]
    built = subprocess.run(command, capture_output=True, text=True, check=False)
    if built.returncode != 0:
        raise AirflowException(
            f"could not build a virtualenv with {interpreter}: {built.stderr.strip()[-500:]}"
        )
    if not requirements:
        return
    indexes: list[str] = []
    if index_urls:
        indexes = ["--index-url", index_urls[0], *[f"--extra-index-url={url}" for url in index_urls[1:]]]
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check", *indexes,
           *pip_install_options, *requirements]  # fmt: skip
    installed = subprocess.run(pip, capture_output=True, text=True, check=False)
    if installed.returncode != 0:
        output = (installed.stdout + installed.stderr).strip()
        missing = re.findall(r"(?:No matching distribution found for|Could not find a version that satisfies "
                             r"the requirement) (\S+)", output)  # fmt: skip
        named = ", ".join(dict.fromkeys(missing)) or ", ".join(requirements)
        raise AirflowException(
            f"pip could not install {named} into the task's virtualenv (is the package index reachable from "
            f"where the task runs?): {output.splitlines()[-1] if output else 'no output'}"
        )


class ExternalPythonOperator(_BasePythonVirtualenvOperator):
    """Run the function with an interpreter that already exists (`python`: its path), as Airflow.

    :param python: the interpreter's path, e.g. a virtualenv's `bin/python` baked into the image.
    """

    template_fields: Sequence[str] = (*_BasePythonVirtualenvOperator.template_fields, "python")

    def __init__(self, *, python: str, python_callable: Callable[..., Any] | str, **kwargs: Any) -> None:
        if not python:
            raise ValueError("Python Path must be defined in ExternalPythonOperator")
        self.python = python
        super().__init__(python_callable=python_callable, **kwargs)

    def _has_pendulum(self) -> bool:
        probe = subprocess.run([self.python, "-c", "import pendulum"], capture_output=True, check=False)
        return probe.returncode == 0

    def _python_path(self, directory: Path) -> str:
        if not os.path.exists(self.python):
            raise ValueError(f"Python Path '{self.python}' must exists")
        if not os.path.isfile(self.python):
            raise ValueError(f"Python Path '{self.python}' must be a file")
        if not os.path.isabs(self.python):
            raise ValueError(f"Python Path '{self.python}' must be an absolute path.")
        return self.python


class BranchPythonVirtualenvOperator(PythonVirtualenvOperator, SkipMixin):
    """A `PythonVirtualenvOperator` whose function returns the task id(s) to follow (a branch)."""

    def execute(self, context: Context) -> Any:
        branch = super().execute(context)
        self.skip_all_except(context.get("ti"), branch)
        return branch


class BranchExternalPythonOperator(ExternalPythonOperator, SkipMixin):
    """An `ExternalPythonOperator` whose function returns the task id(s) to follow (a branch)."""

    def execute(self, context: Context) -> Any:
        branch = super().execute(context)
        self.skip_all_except(context.get("ti"), branch)
        return branch
