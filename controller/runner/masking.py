"""Secrets masked in what a try writes to its log (Airflow's secrets masker, `zonda.secrets_masker`).

`install_for_try` runs once per try, before the task's code: it installs the masker of the Airflow
the DAG was written for, registers the secrets the try was given in its environment (each
`AIRFLOW_CONN_*` connection's password and sensitive extra keys, each `AIRFLOW_VAR_*` variable
whose key is sensitive), and masks both ways a try writes its log: the logging handlers get
Airflow's filter (a record's message, arguments and extras redacted, a sensitive key's whole value
hidden), and `sys.stdout`/`sys.stderr` become streams that replace masked values in every write
(`print`, tracebacks, a BashOperator's command output as it logs it).

Registering from the environment goes beyond Airflow, which masks a value when the task reads it
(`Variable.get`, `get_connection`, which Zonda's do too): a pod's environment holds exactly the
secrets its task names, and a task that echoes `$AIRFLOW_CONN_X` leaks nothing either. Not masked:
what a child process writes to an inherited file descriptor rather than through the task's Python
(a container task's own command, `subprocess.run` without capturing), as in Airflow.
"""

from __future__ import annotations

import contextlib
import io
import logging
import sys
from collections.abc import Mapping
from typing import Any, TextIO

from zonda import secrets_masker
from zonda.secrets_masker import SecretsMasker
from zonda.variables import CONNECTION_ENV_PREFIX, VARIABLE_ENV_PREFIX, Connection


class MaskedStream(io.TextIOBase):
    """A text stream that writes what it is given with the process's masked values replaced."""

    def __init__(self, target: TextIO) -> None:
        self.target = target

    def write(self, text: str) -> int:
        self.target.write(secrets_masker.secrets_masker().redact_text(text))
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        self.target.flush()

    def fileno(self) -> int:
        return self.target.fileno()

    def isatty(self) -> bool:
        return self.target.isatty()

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.target, "encoding", "utf-8")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.target, name)


class MaskingFilter(logging.Filter):
    """Airflow's `SecretsMasker.filter`: every field of a record a log call set (its message, its
    arguments, its `extra`) redacted, and its exception's arguments."""

    _DEFAULT_FIELDS = frozenset(
        logging.LogRecord("x", logging.INFO, __file__, 1, "", (), None, func="f").__dict__
    ) - {"msg", "args"}

    def filter(self, record: logging.LogRecord) -> bool:
        masker = secrets_masker.secrets_masker()
        if masker.replacer is None:  # as Airflow's: nothing is redacted before a secret is registered
            return True
        for key, value in list(record.__dict__.items()):
            if key not in self._DEFAULT_FIELDS:
                record.__dict__[key] = masker.redact(value)
        if record.exc_info and record.exc_info[1] is not None:
            error = record.exc_info[1]
            with contextlib.suppress(AttributeError, TypeError):  # an extension's may not allow it
                error.args = tuple(masker.redact(arg) for arg in error.args)
        return True


def register_environment(masker: SecretsMasker, environment: Mapping[str, str]) -> None:
    """The secrets a try was given: connections (password, sensitive extra keys) and variables whose
    key is sensitive, as reading each would mask it."""
    for name, value in environment.items():
        if name.startswith(CONNECTION_ENV_PREFIX) and value:
            try:
                connection = Connection.parse(name[len(CONNECTION_ENV_PREFIX) :].lower(), value)
            except ValueError:
                continue  # reading it fails the task, saying why
            masker.mask_connection(connection.password, connection.extra_dejson, connection.extra)
        elif name.startswith(VARIABLE_ENV_PREFIX) and value:
            masker.add_mask(value, name[len(VARIABLE_ENV_PREFIX) :].lower())


def install_for_try(airflow_version: str | None, environment: Mapping[str, str]) -> SecretsMasker:
    """The try's masker, its secrets registered, on the log handlers and on stdout and stderr."""
    masker = SecretsMasker.for_airflow(airflow_version, environment)
    secrets_masker.install(masker)
    register_environment(masker, environment)
    masked: dict[int, MaskedStream] = {}
    for name in ("stdout", "stderr"):
        current = getattr(sys, name)
        if not isinstance(current, MaskedStream):
            masked[id(current)] = MaskedStream(current)
            setattr(sys, name, masked[id(current)])
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, MaskingFilter) for f in handler.filters):
            handler.addFilter(MaskingFilter())
        if isinstance(handler, logging.StreamHandler) and id(handler.stream) in masked:
            handler.setStream(masked[id(handler.stream)])
    return masker


__all__ = ["MaskedStream", "MaskingFilter", "install_for_try", "register_environment"]
