"""The local executor (Airflow's LocalExecutor): tries as local processes, at most `parallelism` at once.

Used where no kubelet exists (the README's main job) and by tests that need task code to really run.
Operator tries are forked from a pre-imported runner (`controller.runner.forkserver`), as Airflow's
LocalExecutor forks, so a try does not pay for an interpreter and its imports (until the server is
ready, at start, a try runs in a fresh interpreter, as quick then); container tasks run their command
as a subprocess. Either way a try is its own session (killed as a group), with its own
environment, working directory and log file.

Its state lives in files (`<state-dir>/<run uid>/<attempt>/`: attempt.json, invocation.json, log, pid,
started_at, finished_at, exit_code, result.json), so a restarted controller adopts tries still running
(by pid) and reads the results of those that finished. `pid` is written by the try's own process, its
claim on the try before it runs anything (`controller.processes.try_claims`): a controller killed
right after starting a process leaves that claim, never a try the next one would start again.
`environment.json` (mode 0600) holds the variables and connections the task names, as the kubelet
would give its pod (`environment_for`).
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
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from controller.executors import pods
from controller.executors.local_forkserver import RUNNER_MODULE, ForkServer, ForkServerLost
from controller.processes import try_claims
from controller.processes.faults import fault_point
from zonda.passes.decisions import AttemptPhase, ObservedAttempt
from zonda.resources import wire
from zonda.resources.dagrun_models import DagRunStatus
from zonda.resources.invocations import (
    INVOCATION_ENV,
    MAX_ENV_STRING,
    RESULT_PATH_ENV,
    TaskInvocation,
    TaskOutcome,
)
from zonda.specs import operator_registry
from zonda.specs.dags import ResolvedTask

logger = logging.getLogger(__name__)

#: How often a try that is not our child (adopted after a restart) is checked for exit.
ADOPTED_POLL_SECONDS = 0.5

ENVIRONMENT_FILE = "environment.json"

#: (namespace, task) -> the variables and connections a try of the task gets in its environment.
EnvironmentFor = Callable[[str, ResolvedTask], Awaitable[Mapping[str, str]]]


def _write_private(path: Path, text: str) -> None:
    """Write a file only its owner can read (it may hold secret values)."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as file:
        file.write(text)


class LocalExecutor:
    """Runs tries as local processes, at most `parallelism` at once; state in files, adoptable."""

    name = "local"

    def __init__(
        self,
        state_dir: Path,
        *,
        parallelism: int = 8,
        on_exit: Callable[[str, str], None] | None = None,
        environment_for: EnvironmentFor | None = None,
    ) -> None:
        self.state_dir = state_dir
        self.environment_for = environment_for  # variables and connections, as the kubelet gives a pod
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.parallelism = parallelism
        self.on_exit = on_exit  # (namespace, run name) -> None: wake the run's reconciler
        self._slots = asyncio.Semaphore(parallelism)
        self._tasks: dict[Path, asyncio.Task[None]] = {}
        #: attempt -> the process this controller started for it, until it ends (it may not have
        #: claimed the try yet, so `pid` may not name it)
        self._spawned: dict[Path, int] = {}
        self._fork_server = ForkServer(self._environment())
        self._warming: asyncio.Task[None] | None = None

    @staticmethod
    def _environment() -> dict[str, str]:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.getcwd(), env.get("PYTHONPATH")]))
        return env

    async def start(self) -> None:
        """Start the fork server and wait for it to be ready (`adopt` starts it without waiting)."""
        await self._fork_server.wait_ready()

    def _warm_up(self) -> None:
        """Start the fork server in the background if it is not running."""
        if self._warming is None or self._warming.done():
            self._warming = asyncio.create_task(self._fork_server.ensure_started(), name="forkserver-start")

    def _attempt_dir(self, run_uid: str, attempt_name: str) -> Path:
        return self.state_dir / run_uid / attempt_name

    async def launch(
        self, run: Mapping[str, Any], *, task: ResolvedTask, invocation: TaskInvocation, attempt_name: str
    ) -> str | None:
        meta = run["metadata"]
        attempt = self._attempt_dir(meta["uid"], attempt_name)
        if (attempt / "invocation.json").exists():
            return None  # launched before (idempotent)
        attempt.mkdir(parents=True, exist_ok=True)
        command = self._command(task)
        record = {
            "namespace": meta["namespace"],
            "run": meta["name"],
            "task_id": invocation.task_id,
            "map_index": invocation.map_index,
            "try_number": invocation.try_number,
            "command": command,
        }
        (attempt / "attempt.json").write_text(json.dumps(record))
        if self.environment_for is not None:  # before invocation.json: adopt() starts what has one
            extra = await self.environment_for(meta["namespace"], task)
            _write_private(attempt / ENVIRONMENT_FILE, json.dumps(extra))
        (attempt / "invocation.json").write_bytes(invocation.encode())
        self._start(attempt)
        return None

    @staticmethod
    def _command(task: ResolvedTask) -> list[str]:
        if not pods.is_container_task(task):
            return [sys.executable, "-m", RUNNER_MODULE]
        container = dict(task.container)
        command = [*container.get("command", []), *container.get("args", [])]
        if not command and task.operator in operator_registry.CONTAINER_OPERATORS:
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
                env = self._environment()
                env[INVOCATION_ENV] = (attempt / "invocation.json").read_text()
                env[RESULT_PATH_ENV] = str(attempt / "result.json")
                if (attempt / ENVIRONMENT_FILE).exists():
                    env.update(json.loads((attempt / ENVIRONMENT_FILE).read_text()))
                with (attempt / "log").open("ab") as log:
                    log.write(
                        f"[zonda] {datetime.now(UTC).isoformat()} running: "
                        f"{shlex.join(record['command'])}\n".encode()
                    )
                if record["command"][-2:] == ["-m", RUNNER_MODULE] and self._fork_server.ready:
                    code = await self._run_forked(attempt, record, env)
                else:  # a container task's command, or a runner try while the fork server warms up
                    self._warm_up()
                    code = await self._run_subprocess(attempt, record, env)
                (attempt / "finished_at").write_text(datetime.now(UTC).isoformat())
                (attempt / "exit_code").write_text(str(code))
        finally:
            self._tasks.pop(attempt, None)
            self._notify(record)

    async def _run_forked(self, attempt: Path, record: Mapping[str, Any], env: Mapping[str, str]) -> int:
        try:
            pid, exited = await self._fork_server.spawn(
                attempt, env=env, cwd=os.getcwd(), log=attempt / "log"
            )
        except (ForkServerLost, OSError) as error:
            logger.warning("cannot fork %s (%s): starting a fresh interpreter", attempt, error)
            return await self._run_subprocess(attempt, record, env)
        self._started(attempt, record, pid)
        try:
            code = await exited
        except ForkServerLost:
            return await self._wait_not_our_child(attempt, try_claims.claimant(attempt) or pid)
        return await self._unless_claimed_before(attempt, pid, code)

    async def _run_subprocess(self, attempt: Path, record: Mapping[str, Any], env: Mapping[str, str]) -> int:
        """Exec the try's command. A forked runner takes the invocation in its environment; an exec'd
        one past `MAX_ENV_STRING` reads its file instead (no exec takes so long an environment string)."""
        command, env = list(record["command"]), dict(env)
        runner = command[-2:] == ["-m", RUNNER_MODULE]
        if runner and len(env.get(INVOCATION_ENV, "").encode()) >= MAX_ENV_STRING:
            del env[INVOCATION_ENV]
            command += ["--invocation-file", str(attempt / "invocation.json")]
        with (attempt / "log").open("ab") as log:
            process = await asyncio.create_subprocess_exec(
                "sh",
                "-c",  # the process claims the try, then runs the command (`try_claims`)
                try_claims.CLAIM_SCRIPT if runner else try_claims.RECORDING_CLAIM_SCRIPT,
                str(attempt),
                *command,
                stdout=log,
                stderr=asyncio.subprocess.STDOUT,
                stdin=asyncio.subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )
            self._started(attempt, record, process.pid)
            return await self._unless_claimed_before(attempt, process.pid, await process.wait())

    def _started(self, attempt: Path, record: Mapping[str, Any], pid: int) -> None:
        """The process runs: it records its pid itself (`try_claims`), the first thing it does."""
        fault_point("local-try-spawned")  # the process runs; this controller has recorded nothing of it
        self._spawned[attempt] = pid
        if not (attempt / "started_at").exists():
            (attempt / "started_at").write_text(datetime.now(UTC).isoformat())
        self._notify(record)

    async def _unless_claimed_before(self, attempt: Path, pid: int, code: int) -> int:
        """The exit code of the try: this process's, unless it found the try claimed by a process an
        earlier controller started (killed before it recorded anything) and ran nothing; then that
        process's, watched as an adopted try's."""
        self._spawned.pop(attempt, None)
        claimant = try_claims.claimant(attempt)
        if code != try_claims.CLAIM_LOST or claimant in (None, pid):
            return code
        logger.info("%s: already run by process %s, started before a restart: adopting it", attempt, claimant)
        return await self._wait_not_our_child(attempt, claimant)

    def _notify(self, record: Mapping[str, Any]) -> None:
        if self.on_exit is not None:
            self.on_exit(record["namespace"], record["run"])

    def adopt(self) -> None:
        """At (re)start: warm the fork server, start tries accepted but never started, watch running ones."""
        self._warm_up()
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
        try:
            code = await self._wait_not_our_child(attempt, int((attempt / "pid").read_text()))
            (attempt / "finished_at").write_text(datetime.now(UTC).isoformat())
            (attempt / "exit_code").write_text(str(code))
        finally:
            self._tasks.pop(attempt, None)
            self._notify(record)

    @staticmethod
    async def _wait_not_our_child(attempt: Path, pid: int) -> int:
        """Poll until `pid` exits; its exit code is lost to us, so say what its result says (the
        runner's), or the exit status its claiming shell recorded (a command without a result)."""
        while _alive(pid):  # noqa: ASYNC110 - not our child: nothing to await but polling
            await asyncio.sleep(ADOPTED_POLL_SECONDS)
        result_text = (attempt / "result.json").read_text() if (attempt / "result.json").exists() else None
        result, _ = pods.parse_result(result_text)
        if result is None and (recorded := try_claims.recorded_exit(attempt)) is not None:
            return recorded
        failed = result is None or result.outcome in (TaskOutcome.FAILED, TaskOutcome.FAILED_NO_RETRY)
        return 1 if failed else 0

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
            finished = _read_time(attempt / "finished_at")
            if result is not None:
                started, finished = result.attempt_times(started, finished)
            return ObservedAttempt(
                task_id=task_id,
                try_number=try_number,
                name=attempt.name,
                phase=AttemptPhase.SUCCEEDED if code == 0 else AttemptPhase.FAILED,
                result=result,
                exit_code=code,
                message=problem or (None if code == 0 else f"process exited {code}"),
                started_at=started,
                finished_at=finished,
            )
        phase, message = self._unfinished(attempt)
        return ObservedAttempt(
            task_id=task_id,
            try_number=try_number,
            name=attempt.name,
            phase=phase,
            message=message,
            started_at=started if phase in (AttemptPhase.RUNNING, AttemptPhase.FAILED) else None,
        )

    def _unfinished(self, attempt: Path) -> tuple[AttemptPhase, str | None]:
        """The phase of a try with no exit code yet, and why where that needs saying."""
        if attempt in self._spawned:  # our process runs, whether or not it has recorded its claim yet
            return AttemptPhase.RUNNING, None
        if (claimant := try_claims.claimant(attempt)) is not None:
            if attempt in self._tasks or _alive(claimant):
                return AttemptPhase.RUNNING, None
            return AttemptPhase.FAILED, "the task process vanished (controller restarted while it ran?)"
        if attempt in self._tasks:
            return AttemptPhase.PENDING, "waiting for a local executor slot"
        return AttemptPhase.MISSING, "accepted but never started"

    async def kill(self, run: Mapping[str, Any], attempt_name: str, *, uid: str | None = None) -> None:
        attempt = self._attempt_dir(run["metadata"]["uid"], attempt_name)
        task = self._tasks.get(attempt)
        pid = try_claims.claimant(attempt) or self._spawned.get(attempt)
        if pid is not None:
            try:
                os.killpg(pid, signal.SIGTERM)
            except ProcessLookupError:  # a forked try between fork and setsid: no group yet
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGTERM)
            except PermissionError:
                pass
        elif task is not None:
            task.cancel()

    async def delete_finished(
        self, run: Mapping[str, Any], attempt_name: str, *, uid: str | None = None
    ) -> bool:
        """Keeps the try's files: its log is a small file, the only one `zonda logs` can read, and a
        finished process holds nothing else (Airflow's `delete_worker_pods` is for pods)."""
        return False

    async def release_recorded(
        self, run: Mapping[str, Any], observed: Mapping[str, ObservedAttempt], written: DagRunStatus
    ) -> int:
        """Holds nothing: a local try's process is its own (nothing deletes it under the controller)."""
        return 0

    async def close(self) -> None:
        for task in list(self._tasks.values()):
            task.cancel()
        await self._fork_server.close()


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
    return wire.parse_time(path.read_text()) if path.exists() else None
