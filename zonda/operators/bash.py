"""Airflow's `BashOperator`: runs `bash -c <command>` and returns the last line of its output."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from tempfile import TemporaryDirectory
from typing import Any

from zonda.context import Context
from zonda.exceptions import AirflowException, AirflowSkipException
from zonda.operators.base import BaseOperator

#: Airflow's context variables exported to the command, as `AIRFLOW_CTX_*` (context object, attribute).
_CONTEXT_ENV_VARS = (
    ("AIRFLOW_CTX_DAG_ID", "task_instance", "dag_id"),
    ("AIRFLOW_CTX_TASK_ID", "task_instance", "task_id"),
    ("AIRFLOW_CTX_EXECUTION_DATE", "task_instance", "execution_date"),
    ("AIRFLOW_CTX_TRY_NUMBER", "task_instance", "try_number"),
    ("AIRFLOW_CTX_DAG_RUN_ID", "dag_run", "run_id"),
)


class BashOperator(BaseOperator):
    """Execute a Bash command, as Airflow's `BashOperator`.

    Exit code 0 succeeds with the last line written to stdout (stderr is merged into it) as the XCom;
    an exit code in `skip_on_exit_code` (99 by default) skips the task; any other code fails it.

    :param bash_command: the command, run with `bash -c`. (templated)
    :param env: the command's whole environment, unless `append_env`; None inherits the runner's. (templated)
    :param append_env: add `env` to the inherited environment instead of replacing it.
    :param output_encoding: encoding of the command's output.
    :param skip_on_exit_code: exit code(s) that skip the task; None: every non-zero code fails it.
    :param cwd: working directory; None runs the command in a temporary directory removed afterwards.
    :param output_processor: a function of the last line whose result is returned (and pushed) instead,
        such as `json.loads`; it must be importable (`pkg.module:function`) as the task runner imports
        it. None: the line itself.
    """

    template_fields: tuple[str, ...] = ("bash_command", "env")
    template_ext = (".sh", ".bash")

    def __init__(
        self,
        *,
        bash_command: str,
        env: Mapping[str, Any] | None = None,
        append_env: bool = False,
        output_encoding: str = "utf-8",
        skip_on_exit_code: int | Collection[int] | None = 99,
        cwd: str | None = None,
        output_processor: Callable[[str], Any] | str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.bash_command = bash_command
        self.env = env
        self.append_env = append_env
        self.output_encoding = output_encoding
        self.skip_on_exit_code: Collection[int] = (
            skip_on_exit_code
            if isinstance(skip_on_exit_code, Collection)
            else [skip_on_exit_code]
            if skip_on_exit_code
            else []
        )
        self.cwd = cwd
        self.output_processor = output_processor
        self._process: subprocess.Popen[bytes] | None = None

    def get_env(self, context: Context) -> dict[str, str]:
        """The command's environment: `env` (or the runner's), plus Airflow's `AIRFLOW_CTX_*` variables."""
        if self.env is None:
            env = dict(os.environ)
        else:
            # Values may be numbers when the DAG's YAML says `PORT: 8080`; a process env holds strings.
            given = {str(name): str(value) for name, value in self.env.items()}
            env = {**os.environ, **given} if self.append_env else given
        env.update(_context_env_vars(context))
        return env

    def execute(self, context: Context) -> Any:
        if self.cwd is not None:
            if not os.path.exists(self.cwd):
                raise AirflowException(f"Can not find the cwd: {self.cwd}")
            if not os.path.isdir(self.cwd):
                raise AirflowException(f"The cwd {self.cwd} must be a directory")
        command = [shutil.which("bash") or "bash", "-c", self.bash_command]
        env = self.get_env(context)
        with _working_directory(self.cwd) as cwd:
            self.log.info("Running command: %s", command)
            # A session of its own, so that `on_kill` stops the command's children too.
            self._process = subprocess.Popen(
                command,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                cwd=cwd,
                env=env,
                start_new_session=True,
            )
            assert self._process.stdout is not None
            self.log.info("Output:")
            last_line = ""
            for raw_line in iter(self._process.stdout.readline, b""):
                last_line = raw_line.decode(self.output_encoding, errors="backslashreplace").rstrip()
                self.log.info("%s", last_line)
            exit_code = self._process.wait()
        self.log.info("Command exited with return code %s", exit_code)
        if exit_code in self.skip_on_exit_code:
            raise AirflowSkipException(f"Bash command returned exit code {exit_code}. Skipping.")
        if exit_code != 0:
            raise AirflowException(
                f"Bash command failed. The command returned a non-zero exit code {exit_code}."
            )
        if self.output_processor is None:
            return last_line
        return _processor(self.output_processor)(last_line)

    def on_kill(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self.log.info("Sending SIGTERM signal to process group")
            os.killpg(os.getpgid(self._process.pid), signal.SIGTERM)


class BashDecoratedOperator(BashOperator):
    """`@task.bash`: the function returns the Bash command, run as `BashOperator` runs its own.

    The function gets its arguments and the context variables it names, as a `@task` function; the
    command it returns is rendered as a template, then run. It must be a non-empty string (Airflow's
    TypeError otherwise).
    """

    template_fields: tuple[str, ...] = ("bash_command", "env", "op_args", "op_kwargs")

    def __init__(
        self,
        *,
        python_callable: Callable[..., Any] | str,
        bash_command: str = "",
        op_args: Collection[Any] | None = None,
        op_kwargs: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        from zonda.operators.python import resolve_python_callable

        super().__init__(bash_command=bash_command, **kwargs)  # the command: the function's, at run time
        self.python_callable = resolve_python_callable(python_callable)
        self.op_args: Collection[Any] = op_args or ()
        self.op_kwargs: Mapping[str, Any] = op_kwargs or {}
        self._jinja_env: Any = None

    def render_template_fields(self, context: Context, jinja_env: Any = None, limits: Any = None) -> None:
        self._jinja_env = jinja_env  # the command the function returns is rendered with it
        super().render_template_fields(context, jinja_env, limits)

    def execute(self, context: Context) -> Any:
        from zonda.operators.python import context_merge, determine_kwargs
        from zonda.tries import templating

        context_merge(context, self.op_kwargs)
        kwargs = determine_kwargs(self.python_callable, self.op_args, context)
        command = self.python_callable(*self.op_args, **kwargs)
        if not isinstance(command, str) or command.strip() == "":
            raise TypeError("The returned value from the TaskFlow callable must be a non-empty string.")
        self.bash_command = templating.render(  # Airflow 3: a returned "script.sh" is a template file
            command,
            context,
            field="bash_command",
            environment=self._jinja_env,
            template_ext=self.template_ext,
        )
        return super().execute(context)


def _processor(output_processor: Callable[[str], Any] | str) -> Callable[[str], Any]:
    """The output processor itself, or the function its import path (as a manifest holds it) names."""
    if callable(output_processor):
        return output_processor
    from zonda.specs.imports import import_string

    try:
        function = import_string(output_processor)
    except ImportError as error:
        raise AirflowException(f"Cannot import output_processor {output_processor!r}: {error}") from error
    if not callable(function):
        raise AirflowException(f"output_processor {output_processor!r} is not callable")
    return function  # type: ignore[no-any-return]


@contextmanager
def _working_directory(cwd: str | None) -> Iterator[str]:
    if cwd is not None:
        yield cwd
        return
    with TemporaryDirectory(prefix="airflowtmp") as temporary:
        yield temporary


def _context_env_vars(context: Context) -> dict[str, str]:
    """Airflow's `context_to_airflow_vars(context, in_env_var_format=True)`."""
    variables = {}
    for name, subject_key, attribute in _CONTEXT_ENV_VARS:
        value = getattr(context.get(subject_key), attribute, None)
        if value is None or value == "":
            continue
        variables[name] = value.isoformat() if isinstance(value, datetime) else str(value)
    return variables
