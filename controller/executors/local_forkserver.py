"""The local executor's end of the runner's fork server (`controller.runner.forkserver`).

Kept apart from `local.py` because it is one protocol (JSON lines over the server's stdin and stdout:
start it, ask for a try, hear its pid and exit code) that the executor only calls; the executor's own
file-backed state and adoption stay in `local.py`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sys
from collections.abc import Mapping
from pathlib import Path

logger = logging.getLogger(__name__)

RUNNER_MODULE = "controller.runner"


class ForkServerLost(Exception):
    """The fork server exited; tries it started live on in their own sessions."""


class ForkServer:
    """The executor's end of `controller.runner.forkserver`: start it, ask for tries, hear of exits."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = dict(env)
        self._process: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None
        self._starting = asyncio.Lock()
        self._started: dict[str, asyncio.Future[int]] = {}  # attempt -> pid
        self._exited: dict[str, asyncio.Future[int]] = {}  # attempt -> exit code
        self._closing = False
        self._ready = asyncio.Event()

    @property
    def ready(self) -> bool:
        """Whether the server has finished its imports (until then a fresh interpreter is as quick)."""
        return self._ready.is_set() and self._process is not None and self._process.returncode is None

    async def wait_ready(self) -> None:
        await self.ensure_started()
        await self._ready.wait()

    async def ensure_started(self) -> None:
        async with self._starting:
            if self._process is not None and self._process.returncode is None:
                return
            self._closing = False
            self._ready.clear()
            self._process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                f"{RUNNER_MODULE}.forkserver",
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                env=self.env,
            )
            self._reader = asyncio.create_task(self._read_replies(self._process), name="forkserver-replies")

    async def spawn(
        self, attempt: Path, *, env: Mapping[str, str], cwd: str, log: Path
    ) -> tuple[int, asyncio.Future[int]]:
        """Fork a try; once it runs, its pid and a future of its exit code."""
        await self.ensure_started()
        assert self._process is not None and self._process.stdin is not None
        key = str(attempt)
        loop = asyncio.get_running_loop()
        started = self._started[key] = loop.create_future()
        exited = self._exited[key] = loop.create_future()
        request = {"attempt": key, "argv": [], "env": dict(env), "cwd": cwd, "log": str(log)}
        try:
            self._process.stdin.write((json.dumps(request) + "\n").encode())
            await self._process.stdin.drain()
        except (BrokenPipeError, ConnectionResetError) as error:
            self._fail_pending(ForkServerLost(f"the fork server is gone: {error}"))
        return await started, exited

    async def _read_replies(self, process: asyncio.subprocess.Process) -> None:
        assert process.stdout is not None
        try:
            while line := await process.stdout.readline():
                reply = json.loads(line)
                if reply.get("ready"):
                    self._ready.set()
                    continue
                key = reply["attempt"]
                if "error" in reply:
                    self._resolve(self._started.pop(key, None), exception=OSError(reply["error"]))
                    self._exited.pop(key, None)
                elif "exit_code" in reply:
                    self._resolve(self._exited.pop(key, None), value=int(reply["exit_code"]))
                else:
                    self._resolve(self._started.pop(key, None), value=int(reply["pid"]))
        finally:
            code = await process.wait()
            self._ready.clear()
            if not self._closing:
                logger.warning("the local executor's fork server exited (%s); the next try restarts it", code)
            self._fail_pending(ForkServerLost(f"the fork server exited ({code})"))

    @staticmethod
    def _resolve(
        future: asyncio.Future[int] | None, *, value: int = 0, exception: BaseException | None = None
    ) -> None:
        if future is None or future.done():
            return
        if exception is not None:
            future.set_exception(exception)
        else:
            future.set_result(value)

    def _fail_pending(self, error: ForkServerLost) -> None:
        for futures in (self._started, self._exited):
            for future in futures.values():
                self._resolve(future, exception=error)
            futures.clear()

    async def close(self) -> None:
        """Stop the server (its stdin closes); the tries it started keep running."""
        process, self._process = self._process, None
        self._closing = True
        if process is None:
            return
        if process.stdin is not None:
            process.stdin.close()
        try:
            await asyncio.wait_for(process.wait(), timeout=5)
        except TimeoutError:
            process.kill()
            await process.wait()
        if self._reader is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
