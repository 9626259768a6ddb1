"""Benchmark: what the task runner costs per try, as a pod runs it and under the local executor.

    python bench/bench_runner.py [--tries 20] [--fanout 50] [--parallelism 8] [--modes pod,local]

A try of a `true` task (`BashOperator(bash_command="true")`, timed by a subclass that notes when
`execute()` begins and ends) is run as below, and for each the bench prints p50/p90/max of:

- start -> execute(): from the moment the process is asked for (spawn, or `LocalExecutor.launch`)
  to the operator's `execute()` being entered: interpreter start, imports, parsing, templating;
- execute() end -> result: from `execute()` returning to the result being reported (the result file
  written, and for the local executor the exit recorded and the controller notified);
- the whole try (wall) and, where the OS can attribute it, its CPU time.

Modes: `pod` runs `python -m controller.runner` the way a task pod's container does (a fresh
interpreter per try; CPU from the reaped child's rusage); `local` drives `LocalExecutor` (its fork
server started first, as the controller starts it) one try at a time, then launches `--fanout` tries
at once and reports the makespan and the CPU per try of everything involved.

Measured on the 2-core shared machine (load 11-16, before = 90e6f4f, after = this change, run
alternately): a local try 1.97-2.91 s -> 0.19-0.23 s wall, 520-573 -> 51-59 ms CPU; a 50-try fan-out
29.7-32.6 s -> 4.0-4.5 s; at load ~3 a local try is 24 ms and the fan-out 1.4 s. A pod's try 438-504
-> 360-390 ms CPU (pydantic and Zonda's models are most of what is left).

Pod mode compiles the repository's bytecode first, as pip does when the image installs the wheel
(the development machine sets PYTHONDONTWRITEBYTECODE, which made every measured try compile Zonda
from source). Then, with the runner's protocol in msgspec and lazy imports (main = b41d162 against
this change, run alternately, load 10-13): a pod's try 302-315 -> 162-179 ms CPU, start -> execute()
964-1253 -> 782-860 ms wall; at load 9, 144 ms CPU of which 50 ms is the interpreter alone (this
machine's site-packages add an editable-install finder and a certifi hook an image does not have).

It prints numbers and the machine's load; it asserts nothing (performance is measured here, not in tests).
"""

from __future__ import annotations

import argparse
import asyncio
import compileall
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from controller.executors.local import LocalExecutor  # noqa: E402
from zonda.resources.invocations import INVOCATION_ENV, RESULT_PATH_ENV, TaskInvocation  # noqa: E402
from zonda.resources.run_types import RunType  # noqa: E402
from zonda.specs.dags import ResolvedTask  # noqa: E402

MARKS_ENV = "BENCH_RUNNER_MARKS"
OPERATOR = "bench_runner_operators.TimedBashOperator"
#: A user's operator module, as a DAG's image would hold it: notes the execute() window in a file.
OPERATOR_MODULE = f'''
import os, time
from zonda.operators.bash import BashOperator

class TimedBashOperator(BashOperator):
    def execute(self, context):
        begun = time.time()
        value = super().execute(context)
        with open(os.environ["{MARKS_ENV}"], "a") as marks:
            marks.write(f"{{self.task_id}} {{begun}} {{time.time()}}\\n")
        return value
'''


def invocation(task_id: str) -> TaskInvocation:
    moment = datetime(2026, 1, 1, tzinfo=UTC)
    return TaskInvocation(
        dag_name="bench",
        run_name="bench-run",
        run_type=RunType.MANUAL,
        task_id=task_id,
        try_number=1,
        operator=OPERATOR,
        args={"bash_command": "true"},
        logical_date=moment,
        data_interval_start=moment,
        data_interval_end=moment,
    )


def read_marks(path: Path) -> dict[str, tuple[float, float]]:
    marks = {}
    for line in path.read_text().splitlines():
        task_id, begun, ended = line.split()
        marks[task_id] = (float(begun), float(ended))
    return marks


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def summary(label: str, values_s: list[float]) -> str:
    ms = sorted(v * 1000 for v in values_s)
    p90 = ms[min(len(ms) - 1, round(0.9 * (len(ms) - 1)))]
    return f"  {label:28s} p50 {statistics.median(ms):7.1f} ms   p90 {p90:7.1f} ms   max {ms[-1]:7.1f} ms"


def compile_bytecode() -> None:
    """Write the repository's .pyc files, as pip does when the image installs the wheel.

    Without them (`PYTHONDONTWRITEBYTECODE`, as on the development machine) every try would compile
    Zonda from source, which a pod never does.
    """
    for package in ("zonda", "controller"):
        compileall.compile_dir(REPO / package, quiet=1)


def bench_pod(work: Path, tries: int, env: dict[str, str]) -> None:
    """`python -m controller.runner` per try, as a task pod's container runs it."""
    to_execute, to_result, to_exit, walls, cpus = [], [], [], [], []
    marks_path = work / "pod-marks"
    for number in range(tries):
        task_id = f"pod-{number}"
        result_path = work / f"{task_id}.result"
        try_env = {
            **env,
            INVOCATION_ENV: invocation(task_id).encode().decode(),
            RESULT_PATH_ENV: str(result_path),
            MARKS_ENV: str(marks_path),
        }
        cpu_before = children_cpu()
        spawned = time.time()
        subprocess.run(
            [sys.executable, "-m", "controller.runner"], env=try_env, stdout=subprocess.DEVNULL, check=True
        )
        exited = time.time()
        cpus.append(children_cpu() - cpu_before)
        begun, ended = read_marks(marks_path)[task_id]
        to_execute.append(begun - spawned)
        to_result.append(result_path.stat().st_mtime - ended)
        to_exit.append(exited - ended)
        walls.append(exited - spawned)
    bare = []
    for _ in range(tries):
        cpu_before = children_cpu()
        subprocess.run([sys.executable, "-c", "pass"], env=env, check=True)
        bare.append(children_cpu() - cpu_before)
    print(f"pod mode (python -m controller.runner, a fresh interpreter per try), {tries} tries:")
    print(summary("start -> execute()", to_execute))
    print(summary("execute() end -> result file", to_result))
    print(summary("execute() end -> exit", to_exit))
    print(summary("whole try (wall)", walls))
    print(summary("whole try (CPU, user+sys)", cpus))
    print(summary("of it the interpreter alone", bare) + "  (python -c pass, site included)")


class Notified:
    """The executor's `on_exit` callback: when each run was last notified."""

    def __init__(self) -> None:
        self.event = asyncio.Event()

    def __call__(self, namespace: str, run: str) -> None:
        self.event.set()


async def launch(executor: LocalExecutor, run: dict[str, Any], task_id: str) -> None:
    task = ResolvedTask(
        task_id=task_id,
        operator=OPERATOR,
        args={"bash_command": "true"},
        upstream=frozenset(),
        downstream=frozenset(),
    )
    await executor.launch(run, task=task, invocation=invocation(task_id), attempt_name=task_id)


async def wait_finished(
    executor: LocalExecutor, run: dict[str, Any], names: set[str], notified: Notified
) -> None:
    while True:
        observed = await executor.observe(run)
        if all(name in observed and observed[name].exit_code is not None for name in names):
            return
        notified.event.clear()
        await asyncio.wait_for(notified.event.wait(), timeout=60)


async def bench_local(work: Path, tries: int, fanout: int, parallelism: int) -> None:
    notified = Notified()
    executor = LocalExecutor(work / "state", parallelism=parallelism, on_exit=notified)
    run = {"metadata": {"namespace": "bench", "name": "bench-run", "uid": str(uuid.uuid4())}}
    marks_path = Path(os.environ[MARKS_ENV])
    try:
        await executor.start()  # the fork server starts with the controller, not with a try
        to_execute, to_result, walls = [], [], []
        for number in range(tries):
            task_id = f"local-{number}"
            launched = time.time()
            await launch(executor, run, task_id)
            await wait_finished(executor, run, {task_id}, notified)
            finished = time.time()
            begun, ended = read_marks(marks_path)[task_id]
            to_execute.append(begun - launched)
            to_result.append(finished - ended)
            walls.append(finished - launched)
        print(f"local executor, one try at a time, {tries} tries:")
        print(summary("launch -> execute()", to_execute))
        print(summary("execute() end -> exit noted", to_result))
        print(summary("whole try (wall)", walls))

        names = {f"fan-{number}" for number in range(fanout)}
        started = time.time()
        for name in sorted(names):
            await launch(executor, run, name)
        await wait_finished(executor, run, names, notified)
        makespan = time.time() - started
        print(f"local executor, fan-out of {fanout} tries at once (parallelism {parallelism}):")
        print(f"  makespan {makespan * 1000:.0f} ms, {makespan / fanout * 1000:.1f} ms per try")
    finally:
        await executor.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tries", type=int, default=20)
    parser.add_argument("--fanout", type=int, default=50)
    parser.add_argument("--parallelism", type=int, default=8)
    parser.add_argument("--modes", default="pod,local", help="comma-separated: pod, local")
    options = parser.parse_args()
    modes = set(options.modes.split(","))
    print(f"machine: {os.cpu_count()} CPUs, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory(prefix="bench-runner-") as directory:
        work = Path(directory)
        (work / "bench_runner_operators.py").write_text(OPERATOR_MODULE)
        python_path = os.pathsep.join(filter(None, [str(work), str(REPO), os.environ.get("PYTHONPATH")]))
        os.environ["PYTHONPATH"] = python_path
        env = {k: v for k, v in os.environ.items() if not k.startswith("ZONDA_")}
        if "pod" in modes:
            compile_bytecode()
            bench_pod(work, options.tries, env)
        if "local" in modes:
            os.environ[MARKS_ENV] = str(work / "local-marks")
            cpu_before = children_cpu() + time.process_time()
            asyncio.run(bench_local(work, options.tries, options.fanout, options.parallelism))
            cpu = children_cpu() + time.process_time() - cpu_before
            total = options.tries + options.fanout
            print(f"  CPU of the bench, the executor and every try: {cpu * 1000 / total:.1f} ms per try")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
