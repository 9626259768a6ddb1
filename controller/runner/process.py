"""The task runner's process: invocation in from the environment, result file and exit code out.

`main` is what `python -m controller.runner`, `zonda run-task` and the fork server's children run:
it reads the `TaskInvocation`, runs the try (`controller.runner.task.run_task`), fits the
`TaskResult` within `RESULT_LIMIT_BYTES` and writes it to `$ZONDA_RESULT_PATH`; `leave` ends the
process without the interpreter's teardown. Kept apart from `task` so the try itself (building the
operator, executing it, mapping Airflow's exceptions) reads without the process around it.

Exit code: 0 for success, skipped, deferred and reschedule; 1 for a failure. The result is written
either way (Kubernetes caps termination messages at 4096 bytes).
"""

from __future__ import annotations

import argparse
import atexit
import io
import json
import logging
import os
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import NoReturn

from controller.runner import masking
from controller.runner.task import FAILED_OUTCOMES, print_traceback, run_task, shorten
from zonda.authoring import compat
from zonda.resources.invocations import (
    DEFAULT_RESULT_PATH,
    INVOCATION_ENV,
    RESULT_LIMIT_BYTES,
    RESULT_PATH_ENV,
    TaskInvocation,
    TaskOutcome,
    TaskResult,
    pop_invocation_env,
)
from zonda.secrets_masker import redact

DESCRIPTION = "The task runner: executes one try of one task instance, in its Pod or as a local process."

log = logging.getLogger("zonda.task")


def encode_result(result: TaskResult) -> bytes:
    """The result as the compact JSON the controller parses."""
    return result.encode()


def fit_result(result: TaskResult) -> TaskResult:
    """The result, or a failure saying why when its JSON exceeds the termination message's limit."""
    payload = encode_result(result)
    if len(payload) <= RESULT_LIMIT_BYTES:
        return result
    if result.xcom is not None:
        size = len(json.dumps(result.xcom, separators=(",", ":"), ensure_ascii=False).encode())
        message = (
            f"XCom return value is {size} bytes; the limit is {RESULT_LIMIT_BYTES} (termination message); "
            "return less or write to external storage"
        )
    else:
        message = (
            f"The task's result is {len(payload)} bytes; the limit is {RESULT_LIMIT_BYTES} "
            f"(termination message); its {result.outcome.value} outcome was lost"
        )
    print(message, file=sys.stderr)
    return TaskResult(
        outcome=TaskOutcome.FAILED, message=message, started_at=result.started_at, ended_at=result.ended_at
    )


def exit_code(outcome: TaskOutcome) -> int:
    return 1 if outcome in FAILED_OUTCOMES else 0


def load_invocation(invocation_file: Path | None) -> TaskInvocation:
    """The try's invocation, from the file or `$ZONDA_TASK_INVOCATION` (or its parts: a pod's past
    128 KiB, `invocation_env`), which is then taken out of the environment: it holds the run's whole
    conf, and a process the task starts (bash, a subprocess) would inherit it, where Linux refuses to
    exec with one string past 128 KiB (MAX_ARG_STRLEN: "Argument list too long"), so a 1 MB conf
    failed every BashOperator."""
    text = pop_invocation_env(os.environ)
    if invocation_file is not None:
        return TaskInvocation.decode(invocation_file.read_bytes())
    if not text:
        raise ValueError(f"no invocation: set ${INVOCATION_ENV} or pass --invocation-file")
    return TaskInvocation.decode(text)


def configure_logging() -> None:
    """Task logs go to stdout as bare lines: the controller collects and timestamps them."""
    if isinstance(sys.stdout, io.TextIOWrapper):
        sys.stdout.reconfigure(line_buffering=True)  # interleave with the output of child processes
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logging.basicConfig(level=logging.INFO, handlers=[handler], force=True)


def add_dags_folder_to_path() -> None:
    """Operators and helpers next to DAG files import as in Airflow: the DAGs folder is on sys.path."""
    folder = os.environ.get("ZONDA_DAGS_FOLDER")
    if folder and folder not in sys.path:
        sys.path.append(folder)
        compat.install_unless_airflow_is_installed()  # DAG files' `airflow` imports, as when rendered


def main(argv: list[str] | None = None, *, started_at: datetime | None = None) -> int:
    """Run the try and write its result; `started_at` is when the process began (default: now)."""
    started_at = started_at or datetime.now(UTC)
    parser = argparse.ArgumentParser(prog="python -m controller.runner", description=DESCRIPTION)
    parser.add_argument(
        "--invocation-file", type=Path, help=f"read the invocation here rather than in ${INVOCATION_ENV}"
    )
    arguments = parser.parse_args(argv)
    configure_logging()
    add_dags_folder_to_path()
    result_path = os.environ.get(RESULT_PATH_ENV) or DEFAULT_RESULT_PATH
    try:
        invocation = load_invocation(arguments.invocation_file)
    except (OSError, ValueError) as error:
        print_traceback(error)
        result = TaskResult(outcome=TaskOutcome.FAILED, message=shorten(f"invalid invocation: {error}"))
    else:
        masking.install_for_try(invocation.airflow_version, os.environ)
        log.info(
            "Running %s, try %s of task %s in %s",
            invocation.operator,
            invocation.try_number,
            invocation.task_id,
            invocation.run_name,
        )
        result = run_task(invocation)
    if result.message:  # it reaches the run's status and Events: masked as the log is
        result = result.replace(message=str(redact(result.message)))
    result = fit_result(result.replace(started_at=started_at, ended_at=datetime.now(UTC)))
    try:
        Path(result_path).write_bytes(encode_result(result))
    except OSError as error:
        print(f"cannot write the task's result to {result_path}: {error}", file=sys.stderr)
        return 1
    log.info("Task finished: %s", result.outcome.value)
    return exit_code(result.outcome)


def leave(code: int) -> NoReturn:
    """End the process once the result is written, skipping the interpreter's teardown.

    Tearing down every module and object a try imported costs about a fifth of a `true` try's CPU
    and delays the exit that reports the result (a pod's termination message is read after it). What
    a normal exit does that matters still happens: the task's non-daemon threads are waited for,
    `atexit` handlers run (logging's flush among them), and stdout and stderr are flushed.
    """
    try:
        for thread in threading.enumerate():
            if thread is not threading.main_thread() and not thread.daemon:
                thread.join()
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
