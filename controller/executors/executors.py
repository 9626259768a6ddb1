"""Executors run task-instance tries and report what became of them, as `ObservedAttempt`s.

- `KubernetesExecutor` (default): one Pod per try, named deterministically, owned by the DagRun.
- `LocalExecutor` (Airflow's LocalExecutor): the same runner as a subprocess of the controller,
  with a parallelism cap; used where no kubelet exists (the README's main job) and by tests that need
  task code to really run. Its state lives in files (`<state-dir>/<run uid>/<attempt>/`), so a
  restarted controller adopts tries still running and reads the results of those that finished.

Both speak the same protocol (`zonda.invocations`), so states and results are identical.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shlex
import signal
import sys
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from controller.executors import pods
from controller.kube import AlreadyExists, Kube
from zonda.dags import ResolvedTask
from zonda.decisions import AttemptPhase, ObservedAttempt
from zonda.invocations import INVOCATION_ENV, RESULT_PATH_ENV, TaskInvocation

logger = logging.getLogger(__name__)

LABEL_DAGRUN_UID = "zonda.dev/dagrun-uid"


class Executor(Protocol):
    name: str

    async def observe(self, run: Mapping[str, Any]) -> dict[str, ObservedAttempt]:
        """Every attempt of this run the executor knows of, by attempt name."""

    async def launch(
        self, run: Mapping[str, Any], *, task: ResolvedTask, invocation: TaskInvocation, attempt_name: str
    ) -> None:
        """Start one try; starting one that exists already is a no-op (idempotent)."""

    async def kill(self, run: Mapping[str, Any], attempt_name: str) -> None: ...


class KubernetesExecutor:
    name = "kubernetes"

    def __init__(self, kube: Kube, defaults: pods.PodDefaults) -> None:
        self.kube = kube
        self.defaults = defaults

    async def observe(self, run: Mapping[str, Any]) -> dict[str, ObservedAttempt]:
        meta = run["metadata"]
        found = await self.kube.list_pods(meta["namespace"], f"{LABEL_DAGRUN_UID}={meta['uid']}")
        attempts = {}
        for pod in found:
            pod_meta = pod["metadata"]
            task_id = pod_meta.get("annotations", {}).get(pods.ANNOTATION_TASK_ID, "")
            try_number = int(pod_meta.get("labels", {}).get(pods.LABEL_TRY, "0"))
            attempts[pod_meta["name"]] = pods.observe_pod(pod, task_id=task_id, try_number=try_number)
        return attempts

    async def launch(
        self, run: Mapping[str, Any], *, task: ResolvedTask, invocation: TaskInvocation, attempt_name: str
    ) -> None:
        meta = run["metadata"]
        manifest = pods.build_task_pod(
            invocation=invocation,
            task=task,
            namespace=meta["namespace"],
            name=attempt_name,
            owner=run,
            defaults=self.defaults,
        )
        manifest["metadata"]["labels"][LABEL_DAGRUN_UID] = meta["uid"]
        with contextlib.suppress(AlreadyExists):
            await self.kube.create_pod(meta["namespace"], manifest)

    async def kill(self, run: Mapping[str, Any], attempt_name: str) -> None:
        await self.kube.delete_pod(run["metadata"]["namespace"], attempt_name, grace_period_seconds=5)


class LocalExecutor:
    """Runs tries as local processes (`python -m controller.runner`), at most `parallelism` at once."""

    name = "local"

    def __init__(
        self, state_dir: Path, *, parallelism: int = 8, on_exit: Callable[[str, str], None] | None = None
    ) -> None:
        self.state_dir = state_dir
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.parallelism = parallelism
        self.on_exit = on_exit  # (namespace, run name) -> None: wake the run's reconciler
        self._slots = asyncio.Semaphore(parallelism)
        self._tasks: dict[Path, asyncio.Task[None]] = {}

    def _attempt_dir(self, run_uid: str, attempt_name: str) -> Path:
        return self.state_dir / run_uid / attempt_name

    async def launch(
        self, run: Mapping[str, Any], *, task: ResolvedTask, invocation: TaskInvocation, attempt_name: str
    ) -> None:
        meta = run["metadata"]
        attempt = self._attempt_dir(meta["uid"], attempt_name)
        if (attempt / "invocation.json").exists():
            return  # launched before (idempotent)
        attempt.mkdir(parents=True, exist_ok=True)
        command = self._command(task)
        record = {
            "namespace": meta["namespace"],
            "run": meta["name"],
            "task_id": invocation.task_id,
            "try_number": invocation.try_number,
            "command": command,
        }
        (attempt / "attempt.json").write_text(json.dumps(record))
        (attempt / "invocation.json").write_text(invocation.model_dump_json(by_alias=True))
        self._start(attempt)

    @staticmethod
    def _command(task: ResolvedTask) -> list[str]:
        if not pods.is_container_task(task):
            return [sys.executable, "-m", "controller.runner"]
        container = dict(task.container)
        command = [*container.get("command", []), *container.get("args", [])]
        if not command and task.operator in pods.CONTAINER_OPERATORS:
            command = [*task.args.get("cmds", []), *task.args.get("arguments", [])]
        if not command:
            return [
                "sh",
                "-c",
                "echo 'the local executor runs a container task by its command; "
                "this task has none (image only)' >&2; exit 1",
            ]
        return [str(part) for part in command]

    def _start(self, attempt: Path) -> None:
        if attempt not in self._tasks:
            self._tasks[attempt] = asyncio.create_task(self._run(attempt), name=f"local-{attempt.name}")

    async def _run(self, attempt: Path) -> None:
        record = json.loads((attempt / "attempt.json").read_text())
        try:
            async with self._slots:
                env = dict(os.environ)
                env[INVOCATION_ENV] = (attempt / "invocation.json").read_text()
                env[RESULT_PATH_ENV] = str(attempt / "result.json")
                env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.getcwd(), env.get("PYTHONPATH")]))
                with (attempt / "log").open("ab") as log:
                    log.write(
                        f"[zonda] {datetime.now(UTC).isoformat()} running: "
                        f"{shlex.join(record['command'])}\n".encode()
                    )
                    log.flush()
                    process = await asyncio.create_subprocess_exec(
                        *record["command"],
                        stdout=log,
                        stderr=asyncio.subprocess.STDOUT,
                        stdin=asyncio.subprocess.DEVNULL,
                        env=env,
                        start_new_session=True,
                    )
                    (attempt / "pid").write_text(str(process.pid))
                    (attempt / "started_at").write_text(datetime.now(UTC).isoformat())
                    self._notify(record)
                    code = await process.wait()
                (attempt / "finished_at").write_text(datetime.now(UTC).isoformat())
                (attempt / "exit_code").write_text(str(code))
        finally:
            self._tasks.pop(attempt, None)
            self._notify(record)

    def _notify(self, record: Mapping[str, Any]) -> None:
        if self.on_exit is not None:
            self.on_exit(record["namespace"], record["run"])

    def adopt(self) -> None:
        """After a restart: start tries accepted but never started, and watch those still running."""
        for invocation in self.state_dir.glob("*/*/invocation.json"):
            attempt = invocation.parent
            if (attempt / "exit_code").exists() or attempt in self._tasks:
                continue
            if not (attempt / "pid").exists():
                self._start(attempt)
            else:
                self._tasks[attempt] = asyncio.create_task(self._watch_adopted(attempt))

    async def _watch_adopted(self, attempt: Path) -> None:
        """A try started by a previous controller: not our child, so poll until it exits."""
        record = json.loads((attempt / "attempt.json").read_text())
        pid = int((attempt / "pid").read_text())
        try:
            while _alive(pid):  # noqa: ASYNC110 - not our child: nothing to await but polling
                await asyncio.sleep(0.5)
            result_text = (
                (attempt / "result.json").read_text() if (attempt / "result.json").exists() else None
            )
            result, _ = pods.parse_result(result_text)
            failed = result is None or result.outcome.value in ("failed", "failed_no_retry")
            (attempt / "finished_at").write_text(datetime.now(UTC).isoformat())
            (attempt / "exit_code").write_text("1" if failed else "0")
        finally:
            self._tasks.pop(attempt, None)
            self._notify(record)

    async def observe(self, run: Mapping[str, Any]) -> dict[str, ObservedAttempt]:
        run_dir = self.state_dir / run["metadata"]["uid"]
        attempts: dict[str, ObservedAttempt] = {}
        if not run_dir.exists():
            return attempts
        for attempt in run_dir.iterdir():
            if (attempt / "attempt.json").exists():
                attempts[attempt.name] = self._observe(attempt)
        return attempts

    def _observe(self, attempt: Path) -> ObservedAttempt:
        record = json.loads((attempt / "attempt.json").read_text())
        task_id, try_number = record["task_id"], record["try_number"]
        started = _read_time(attempt / "started_at")
        if (attempt / "exit_code").exists():
            code = int((attempt / "exit_code").read_text())
            result_text = (
                (attempt / "result.json").read_text() if (attempt / "result.json").exists() else None
            )
            result, problem = pods.parse_result(result_text)
            return ObservedAttempt(
                task_id=task_id,
                try_number=try_number,
                name=attempt.name,
                phase=AttemptPhase.SUCCEEDED if code == 0 else AttemptPhase.FAILED,
                result=result,
                exit_code=code,
                message=problem or (None if code == 0 else f"process exited {code}"),
                started_at=started,
                finished_at=_read_time(attempt / "finished_at"),
            )
        if (attempt / "pid").exists():
            pid = int((attempt / "pid").read_text())
            if attempt in self._tasks or _alive(pid):
                return ObservedAttempt(
                    task_id=task_id,
                    try_number=try_number,
                    name=attempt.name,
                    phase=AttemptPhase.RUNNING,
                    started_at=started,
                )
            return ObservedAttempt(
                task_id=task_id,
                try_number=try_number,
                name=attempt.name,
                phase=AttemptPhase.FAILED,
                started_at=started,
                message="the task process vanished (controller restarted while it ran?)",
            )
        if attempt in self._tasks:
            return ObservedAttempt(
                task_id=task_id,
                try_number=try_number,
                name=attempt.name,
                phase=AttemptPhase.PENDING,
                message="waiting for a local executor slot",
            )
        return ObservedAttempt(
            task_id=task_id,
            try_number=try_number,
            name=attempt.name,
            phase=AttemptPhase.MISSING,
            message="accepted but never started",
        )

    async def kill(self, run: Mapping[str, Any], attempt_name: str) -> None:
        attempt = self._attempt_dir(run["metadata"]["uid"], attempt_name)
        task = self._tasks.get(attempt)
        if (attempt / "pid").exists():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(int((attempt / "pid").read_text()), signal.SIGTERM)
        elif task is not None:
            task.cancel()

    async def close(self) -> None:
        for task in list(self._tasks.values()):
            task.cancel()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child of ours is not alive: reap it if it is ours.
    with contextlib.suppress(ChildProcessError):
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            return False
    return True


def _read_time(path: Path) -> datetime | None:
    if not path.exists():
        return None
    return datetime.fromisoformat(path.read_text().strip())
