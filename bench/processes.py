"""A bench's child process: started in a process group of its own, waited for, and stopped whole."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path


@contextlib.contextmanager
def running(
    args: Sequence[str],
    log: Path,
    *,
    ready: Callable[[str], bool],
    what: str,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = 60,
    stop_timeout: float = 15,
) -> Iterator[subprocess.Popen[bytes]]:
    """Run `args` with its output appended to `log`; yield it once `ready(what it has logged so far)`
    (only this process's lines: a log an earlier round appended to already holds its start-up line),
    or fail with the log's end if it exits or `timeout` passes first. SIGTERM to its whole group on the
    way out, SIGKILL after `stop_timeout`."""
    offset = log.stat().st_size if log.exists() else 0
    with log.open("ab") as out:
        process = subprocess.Popen(
            list(args),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + timeout
        while not ready(log.read_bytes()[offset:].decode(errors="replace")):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{what} did not start: {log.read_text(errors='replace')[-3000:]}")
            time.sleep(0.1)
        yield process
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=stop_timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
