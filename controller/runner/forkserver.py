"""A pre-imported task runner that forks one child per try (the local executor's fork server).

A fresh `python -m controller.runner` spends most of a `true` task's time starting an interpreter and
importing pydantic, Jinja and pendulum. Airflow's LocalExecutor forks its workers for the same reason.
`python -m controller.runner.forkserver` imports the runner and Zonda's built-in operators once, then
serves requests from the local executor, one JSON line each on stdin:

    {"attempt": "<dir>", "argv": [...], "env": {...}, "cwd": "<dir>", "log": "<file>"}

and answers on stdout: `{"ready": true}` once its imports are done; `{"attempt", "pid"}` once the
child exists (or `{"attempt", "error"}`); `{"attempt", "pid", "exit_code"}` when it has exited
(negative: killed by that signal).

Each child is as isolated as a fresh process: its own session and process group (so the executor
kills it and everything it started with one `killpg`), the try's environment and working directory,
stdin from /dev/null, stdout and stderr appended to the try's log, default signal handlers, and a
fresh import of the user's code (only Zonda's modules are pre-imported). A child never returns into
the server's loop: it leaves through `process.leave` (threads joined, atexit run, `os._exit`).

When its stdin closes (the controller stopped) the server exits and leaves running children alone:
they belong to their own sessions, and a restarted controller adopts them from their state files.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import select
import signal
import sys
import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from controller.processes import try_claims
from controller.runner import process
from zonda.specs import operator_registry
from zonda.specs.imports import import_string

#: Pre-imported so that a forked try finds them loaded (user modules are imported by each child).
PRELOADED_MODULES = (
    "jinja2.sandbox",
    "pendulum",
    "zonda.triggers",
    "zonda.tries.templating",
    "zonda.tries.task_context",
)


def preload() -> None:
    """Import what most tries need, then freeze the heap so children share it copy-on-write."""
    for module in PRELOADED_MODULES:
        __import__(module)
    for classpath in operator_registry.BUILTIN_OPERATORS.values():
        if classpath.startswith("zonda."):
            import_string(classpath)
    gc.freeze()


def run_child(
    request: Mapping[str, Any], close_fds: Sequence[int], entry: Callable[[list[str]], int]
) -> None:
    """In the forked child: become the try's own process, run it, and never return."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.setsid()
        for fd in close_fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        if not try_claims.claim(Path(request["attempt"]), os.getpid()):
            code = try_claims.CLAIM_LOST  # an earlier process runs this try: run nothing
            return
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        null = os.open(os.devnull, os.O_RDONLY)
        log = os.open(request["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(null)
        os.close(log)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        code = entry(list(request["argv"]))
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        process.leave(code)


class Server:
    """The loop: read requests, fork, reap, report. Single-threaded, so forking is safe."""

    def __init__(self, requests_fd: int, replies_fd: int, entry: Callable[[list[str]], int]) -> None:
        self.requests_fd = requests_fd
        self.replies_fd = replies_fd
        self.entry = entry
        self.children: dict[int, str] = {}  # pid -> attempt
        self.wake_read, self.wake_write = os.pipe()
        os.set_blocking(self.wake_read, False)
        os.set_blocking(self.wake_write, False)

    def reply(self, message: Mapping[str, Any]) -> None:
        data = (json.dumps(message) + "\n").encode()
        while data:
            data = data[os.write(self.replies_fd, data) :]

    def serve(self) -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the controller's Ctrl-C ends us through EOF
        signal.signal(signal.SIGCHLD, lambda signum, frame: None)
        signal.set_wakeup_fd(self.wake_write)
        pending = b""
        while True:
            try:
                ready, _, _ = select.select([self.requests_fd, self.wake_read], [], [])
            except InterruptedError:
                continue
            if self.wake_read in ready:
                with contextlib.suppress(BlockingIOError):
                    os.read(self.wake_read, 4096)
            self.reap()
            if self.requests_fd in ready:
                chunk = os.read(self.requests_fd, 65536)
                if not chunk:
                    return
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    if line.strip():
                        self.start(json.loads(line))

    def start(self, request: Mapping[str, Any]) -> None:
        attempt = request["attempt"]
        try:
            pid = os.fork()
        except OSError as error:
            self.reply({"attempt": attempt, "error": f"cannot fork: {error}"})
            return
        if pid == 0:
            run_child(
                request, [self.requests_fd, self.replies_fd, self.wake_read, self.wake_write], self.entry
            )
        self.children[pid] = attempt
        self.reply({"attempt": attempt, "pid": pid})

    def reap(self) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            attempt = self.children.pop(pid, None)
            if attempt is not None:
                self.reply({"attempt": attempt, "pid": pid, "exit_code": os.waitstatus_to_exitcode(status)})


def main() -> int:
    preload()
    # The protocol owns fds 0 and 1: move them aside so no print() in the server can corrupt it.
    requests_fd, replies_fd = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(2, 1)
    os.close(null)
    server = Server(requests_fd, replies_fd, process.main)
    server.reply({"ready": True})
    server.serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
