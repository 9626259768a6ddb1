"""The local executor: tries forked from a pre-imported runner are still isolated, killable and adoptable.

Real: the fork server, the forked tries, Bash and Python task code, the state files. No Kubernetes is
involved (the executor only reads and writes its state directory), so these run in the unit tier.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import uuid
from collections.abc import AsyncIterator, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from controller.executors.local import LocalExecutor
from controller.processes import try_claims
from tests.paths import REPO_ROOT
from zonda.passes.decisions import AttemptPhase, ObservedAttempt
from zonda.resources.invocations import TaskInvocation, TaskOutcome, TaskResult
from zonda.resources.run_types import RunType
from zonda.specs.dags import ResolvedTask

REPO = REPO_ROOT

HELPERS = """
import os

IMPORTS = []  # module state: a fresh import per try leaves exactly one entry here
IMPORTS.append(os.getpid())


def describe_process():
    leaked = os.environ.get("ZONDA_TEST_LEAK")
    os.environ["ZONDA_TEST_LEAK"] = "set by an earlier try"
    print("hello from the task's own log")
    return {
        "pid": os.getpid(),
        "parent": os.getppid(),
        "pgid": os.getpgid(0),
        "sid": os.getsid(0),
        "cwd": os.getcwd(),
        "imports": len(IMPORTS),
        "leaked": leaked,
        "run_id_env": os.environ.get("ZONDA_TASK_INVOCATION", "")[:1],
    }
"""


@pytest.fixture
def helpers_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "helpers"
    directory.mkdir()
    (directory / "local_executor_helpers.py").write_text(HELPERS)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(directory), str(REPO)]))
    return directory


@pytest.fixture
async def executor(tmp_path: Path, helpers_path: Path) -> AsyncIterator[LocalExecutor]:
    local = LocalExecutor(tmp_path / "state", parallelism=4)
    await local.start()  # tries are forked once the server is ready; before, they start afresh
    yield local
    await local.close()


RUN = {"metadata": {"namespace": "default", "name": "run", "uid": str(uuid.uuid4())}}


def resolved(task_id: str, operator: str, args: dict[str, Any]) -> ResolvedTask:
    return ResolvedTask(
        task_id=task_id, operator=operator, args=args, upstream=frozenset(), downstream=frozenset()
    )


async def launch(
    executor: LocalExecutor,
    task_id: str,
    operator: str,
    args: dict[str, Any],
    conf: dict[str, Any] | None = None,
) -> None:
    moment = datetime(2026, 1, 1, tzinfo=UTC)
    invocation = TaskInvocation(
        conf=conf or {},
        dag_name="dag",
        run_name="run",
        run_type=RunType.MANUAL,
        task_id=task_id,
        try_number=1,
        operator=operator,
        args=args,
        logical_date=moment,
        data_interval_start=moment,
        data_interval_end=moment,
    )
    await executor.launch(
        RUN, task=resolved(task_id, operator, args), invocation=invocation, attempt_name=task_id
    )


async def finished(
    executor: LocalExecutor, names: Iterable[str], within: float = 60
) -> dict[str, ObservedAttempt]:
    async def poll() -> dict[str, ObservedAttempt]:
        while True:
            observed = await executor.observe(RUN)
            if all(n in observed and observed[n].exit_code is not None for n in names):
                return observed
            await asyncio.sleep(0.05)

    return await asyncio.wait_for(poll(), within)


async def running(executor: LocalExecutor, name: str) -> ObservedAttempt:
    async def poll() -> ObservedAttempt:
        # Polled: the state files are what a reconciler observes.
        while True:
            attempt = (await executor.observe(RUN)).get(name)
            if attempt is not None and attempt.phase == AttemptPhase.RUNNING:
                return attempt
            await asyncio.sleep(0.05)

    return await asyncio.wait_for(poll(), 30)


async def test_tries_succeed_and_fail_with_their_results(executor: LocalExecutor) -> None:
    await launch(executor, "ok", "BashOperator", {"bash_command": "echo done"})
    await launch(executor, "bad", "BashOperator", {"bash_command": "exit 3"})
    observed = await finished(executor, ["ok", "bad"])
    ok, bad = observed["ok"], observed["bad"]
    assert (ok.phase, ok.exit_code) == (AttemptPhase.SUCCEEDED, 0)
    assert ok.result is not None and ok.result.outcome == TaskOutcome.SUCCESS and ok.result.xcom == "done"
    assert (bad.phase, bad.exit_code) == (AttemptPhase.FAILED, 1)
    assert bad.result is not None and "exit code 3" in (bad.result.message or "")
    assert ok.started_at is not None and ok.finished_at is not None and ok.started_at <= ok.finished_at
    assert (ok.started_at, ok.finished_at) == (ok.result.started_at, ok.result.ended_at), "the runner's clock"


async def test_every_forked_try_is_its_own_process_session_and_import(
    executor: LocalExecutor, tmp_path: Path
) -> None:
    callable_args = {"python_callable": "local_executor_helpers:describe_process"}
    await launch(executor, "first", "PythonOperator", callable_args)
    await finished(executor, ["first"])
    await launch(executor, "second", "PythonOperator", callable_args)
    observed = await finished(executor, ["second"])
    first = (await executor.observe(RUN))["first"].result
    second = observed["second"].result
    assert first is not None and second is not None
    seen = [first.xcom, second.xcom]
    for process in seen:
        assert process["pid"] == process["pgid"] == process["sid"], "a try leads its own session"
        assert process["imports"] == 1, "the user's module is imported afresh by each try"
        assert process["leaked"] is None, "an earlier try's environment does not leak"
        assert process["cwd"] == os.getcwd()
        assert process["run_id_env"] == "", "the runner took its invocation out of the environment"
    assert seen[0]["pid"] != seen[1]["pid"]
    server = executor._fork_server._process
    assert server is not None and seen[0]["parent"] == seen[1]["parent"] == server.pid, "forked by the server"
    log = (tmp_path / "state" / RUN["metadata"]["uid"] / "first" / "log").read_text()
    assert "hello from the task's own log" in log
    assert "[zonda]" in log and "Task finished: success" in log


async def test_a_killed_try_stops_with_its_children(executor: LocalExecutor, tmp_path: Path) -> None:
    marker = tmp_path / "sleeper-pid"
    await launch(executor, "sleepy", "BashOperator", {"bash_command": f"sleep 60 & echo $! > {marker}; wait"})
    await running(executor, "sleepy")
    while not marker.exists() or not marker.read_text().strip():  # noqa: ASYNC110 - a file, no event
        await asyncio.sleep(0.05)
    await executor.kill(RUN, "sleepy")
    observed = await finished(executor, ["sleepy"], within=30)
    assert observed["sleepy"].phase == AttemptPhase.FAILED
    sleeper = int(marker.read_text())
    for _ in range(100):
        try:
            os.kill(sleeper, 0)
        except ProcessLookupError:
            break
        await asyncio.sleep(0.05)
    else:
        pytest.fail("the try's child process outlived the kill")


async def test_tries_outlive_a_lost_fork_server(executor: LocalExecutor) -> None:
    await launch(executor, "long", "BashOperator", {"bash_command": "sleep 1; echo survived"})
    await running(executor, "long")
    server = executor._fork_server._process
    assert server is not None
    server.send_signal(signal.SIGKILL)
    observed = await finished(executor, ["long"])
    assert observed["long"].phase == AttemptPhase.SUCCEEDED
    assert observed["long"].result is not None and observed["long"].result.xcom == "survived"
    await launch(executor, "after", "BashOperator", {"bash_command": "echo again"})
    assert (await finished(executor, ["after"]))["after"].phase == AttemptPhase.SUCCEEDED


async def test_a_restarted_controller_adopts_running_tries(tmp_path: Path, helpers_path: Path) -> None:
    before = LocalExecutor(tmp_path / "state")
    await before.start()
    await launch(before, "adopted", "BashOperator", {"bash_command": "sleep 1; echo adopted"})
    await running(before, "adopted")
    await before.close()  # the controller stops; the try runs on in its own session
    after = LocalExecutor(tmp_path / "state")
    try:
        after.adopt()
        observed = await finished(after, ["adopted"])
    finally:
        await after.close()
    assert observed["adopted"].phase == AttemptPhase.SUCCEEDED
    record = json.loads(
        (tmp_path / "state" / RUN["metadata"]["uid"] / "adopted" / "attempt.json").read_text()
    )
    assert record["task_id"] == "adopted"


@pytest.mark.parametrize("warm", [True, False], ids=["forked", "exec"])
async def test_a_try_claimed_by_an_earlier_process_runs_nothing_and_that_process_is_adopted(
    tmp_path: Path, helpers_path: Path, warm: bool
) -> None:
    """A controller killed right after it started a try's process left it running with its claim
    (`pid`, written by the process itself) and the try's files: a process started for the same try
    again (by the next controller, before it saw the claim) must run nothing and wait for the first."""
    marker = tmp_path / "ran-again"
    attempt = tmp_path / "state" / RUN["metadata"]["uid"] / "claimed"
    attempt.mkdir(parents=True)
    earlier = await asyncio.create_subprocess_exec("sleep", "1")  # the process that claimed the try
    (attempt / "pid").write_text(str(earlier.pid))
    (attempt / "result.json").write_bytes(TaskResult(outcome=TaskOutcome.SUCCESS, xcom="first").encode())
    executor = LocalExecutor(tmp_path / "state")
    try:
        if warm:
            await executor.start()
        await launch(executor, "claimed", "BashOperator", {"bash_command": f"touch {marker}"})
        observed = (await finished(executor, ["claimed"]))["claimed"]
    finally:
        await executor.close()
    assert earlier.returncode is not None, "the try ended only once the earlier process had"
    assert not marker.exists(), "the try's command ran a second time"
    assert (observed.phase, observed.result and observed.result.xcom) == (AttemptPhase.SUCCEEDED, "first")
    assert (attempt / "pid").read_text() == str(earlier.pid)


@pytest.mark.parametrize(("exit_code", "phase"), [(0, AttemptPhase.SUCCEEDED), (3, AttemptPhase.FAILED)])
async def test_an_adopted_container_tries_exit_code_is_its_commands(
    tmp_path: Path, exit_code: int, phase: AttemptPhase
) -> None:
    """A container task's command writes no result: once adopted by a restarted controller (not its
    parent, so deaf to its exit code) the try ends as the command did, from the exit status its
    claiming shell recorded (it was failed whatever the command did, and so retried)."""
    command = ["sh", "-c", f"sleep 1; exit {exit_code}"]
    task = ResolvedTask(task_id="shell", operator=None, args={}, upstream=frozenset(), downstream=frozenset(),
                        container={"image": "busybox", "command": command})  # fmt: skip
    moment = datetime(2026, 1, 1, tzinfo=UTC)
    invocation = TaskInvocation(
        conf={}, dag_name="dag", run_name="run", run_type=RunType.MANUAL, task_id="shell", try_number=1,
        operator=None, args={}, logical_date=moment, data_interval_start=moment, data_interval_end=moment,
    )  # fmt: skip
    before = LocalExecutor(tmp_path / "state")
    await before.start()  # a container task's command is exec'd whatever the fork server is doing; started,
    # it is not closed while it warms up (a cancelled `create_subprocess_exec` hangs the loop's close)
    await before.launch(RUN, task=task, invocation=invocation, attempt_name="shell")
    await running(before, "shell")
    await before.close()  # the controller stops; the command runs on in its own session
    after = LocalExecutor(tmp_path / "state")
    try:
        await after.start()
        after.adopt()
        observed = (await finished(after, ["shell"]))["shell"]
    finally:
        await after.close()
    assert (observed.phase, observed.exit_code) == (phase, exit_code)


async def test_tries_start_afresh_until_the_fork_server_is_ready(tmp_path: Path, helpers_path: Path) -> None:
    cold = LocalExecutor(tmp_path / "state")
    try:
        await launch(
            cold, "early", "PythonOperator", {"python_callable": "local_executor_helpers:describe_process"}
        )
        observed = await finished(cold, ["early"])
        early = observed["early"].result
        assert early is not None and early.xcom["parent"] == os.getpid(), "a subprocess of the executor"
        await cold.start()
        await launch(
            cold, "warm", "PythonOperator", {"python_callable": "local_executor_helpers:describe_process"}
        )
        warm = (await finished(cold, ["warm"]))["warm"].result
        server = cold._fork_server._process
        assert warm is not None and server is not None and warm.xcom["parent"] == server.pid
    finally:
        await cold.close()


@pytest.mark.parametrize("warm", [True, False], ids=["forked", "exec"])
async def test_a_one_megabyte_conf_reaches_the_try_and_its_bash_child(
    tmp_path: Path, helpers_path: Path, warm: bool
) -> None:
    """Linux refuses an exec whose one environment string passes 128 KiB (MAX_ARG_STRLEN): the
    invocation, which holds the conf, must reach neither an exec'd runner's nor bash's environment
    (found by tests/cluster/test_fuzz_runs.py: a 1 MB conf failed the BashOperator). The 10 KB conf is
    the positive control for the check on the environment's size."""
    local = LocalExecutor(tmp_path / "state")
    try:
        if warm:
            await local.start()
        command = "echo conf=$(printenv ZONDA_TASK_INVOCATION | wc -c) {{ dag_run.conf['blob'] | length }}"
        await launch(local, "big", "BashOperator", {"bash_command": command}, conf={"blob": "x" * 1_000_000})
        await launch(local, "small", "BashOperator", {"bash_command": command}, conf={"blob": "x" * 10_000})
        observed = await finished(local, ["big", "small"])
    finally:
        await local.close()
    for name, size in (("big", 1_000_000), ("small", 10_000)):
        result = observed[name].result
        assert result is not None and result.outcome == TaskOutcome.SUCCESS, (
            name,
            result.message if result else None,
        )
        assert result.xcom == f"conf=0 {size}", "the conf rendered; the invocation not inherited"


async def test_a_try_is_running_when_its_start_is_told_before_its_process_claims_it(
    tmp_path: Path, helpers_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The executor tells the run's reconciler of a try's start once the process exists (`on_exit`);
    the process records its claim (`pid`) itself a moment later. The pass that start wakes must see
    the try running: no later notice comes until the try ends (a CI run saw a local try shown
    queued for the whole 90 s it ran). Here the claim waits for a file, so it certainly comes after."""
    go = tmp_path / "claim-may-go"
    monkeypatch.setattr(
        try_claims, "CLAIM_SCRIPT", f"while [ ! -e {go} ]; do sleep 0.02; done; {try_claims.CLAIM_SCRIPT}"
    )
    attempt = tmp_path / "state" / RUN["metadata"]["uid"] / "slow"
    told: list[ObservedAttempt] = []  # what a pass would observe the moment the start is told

    def tell(namespace: str, run: str) -> None:
        told.append(cold._observe(attempt))

    cold = LocalExecutor(tmp_path / "state", on_exit=tell)  # not started: the try is exec'd, claim script
    try:
        await launch(cold, "slow", "BashOperator", {"bash_command": "echo ran"})
        while not told:  # noqa: ASYNC110 - the notice is a plain callback
            await asyncio.sleep(0.01)
        assert not (attempt / try_claims.PID_FILE).exists()
        assert told[0].phase == AttemptPhase.RUNNING and told[0].started_at is not None
        go.touch()
        assert (await finished(cold, ["slow"]))["slow"].phase == AttemptPhase.SUCCEEDED
    finally:
        go.touch()
        await cold.close()
