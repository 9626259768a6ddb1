"""The local executor under faults: tries that really run, audited from records their own processes
leave, never from Zonda's counters or its state files.

A workload on the local executor (`--executor local`: every try a process of the controller's
host): a chain, a task that fails its first try by design and succeeds its second, a fan-out of
three, a task mapped over three commands and a join; `ZONDA_FAULT_MIXED_RUNS` (2) runs and half as
many more (at least one), scheduled by catchup over a window of the past, so the run ids are the
same in the reference run and in the faulted one. Each try's command first appends one line,
`pid run_id task map_index try`, to a records file the test owns (`>>`: O_APPEND, one write of less
than PIPE_BUF, so lines never interleave): the process's own word that it started, which Zonda
does not write.

A seeded schedule (`ZONDA_FAULT_SEED`, 22; `ZONDA_FAULT_INJECTIONS`, CI 6; 0.3-2 s apart, until
the workload has ended) strikes each of three types once in every three strikes, in a seeded order:
the controller SIGKILLed (its process group: the fork server goes with it; the tries, sessions
of their own, go on) and started again, at a moment a try process is alive (read from /proc); the
controller's clock stepped (`$ZONDA_CLOCK_OFFSET_FILE`); the fault proxy between the controller and
the apiserver hurting its next requests (dropped, reset, stalled, 429/500/504, a write's reply lost).

The audit (`local_audit`), against a fault-free reference run of the same workload in a namespace of
its own: each (run, task, map index, try) started by exactly one process (no fault here must make a
try run again: a killed controller's tries outlive it and are adopted); each task instance's tries
as the reference's (the retried task's two, every other one); every run and task instance ended in
the reference's state (from the apiserver); no try process left alive once the workload has ended
(/proc). Its positive controls first: the audit finds a duplicate planted in a copy of the records,
and a missing try; the reference shows the retried task's two tries and the three mapped instances;
a try process was seen alive in /proc during the schedule.

Real: the apiserver, etcd, the controller process, the local executor's fork server and task runner
processes, bash running each try's command.
"""

from __future__ import annotations

import contextlib
import os
import random
import statistics
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from controller.devtools.devcluster import ADMIN_TOKEN, Cluster
from controller.processes.clock import OFFSET_FILE_ENV
from tests.cluster.fault_audit import Window, all_progress, quietly
from tests.cluster.test_faults import Target, kill_controller, proxy_faults, proxy_for, set_clock
from tests.cluster.zonda_processes import apply, controller, fresh_namespace, get, wait_for, wait_run_finished
from tests.cluster.zonda_processes import trigger as zonda_trigger

SEED = int(os.environ.get("ZONDA_FAULT_SEED", "22"))
INJECTIONS = int(os.environ.get("ZONDA_FAULT_INJECTIONS") or 6)
INTERVAL = int(os.environ.get("ZONDA_FAULT_INTERVAL_MINUTES", "10"))
MIXED_RUNS = int(os.environ.get("ZONDA_FAULT_MIXED_RUNS", "2"))
WINDOW = Window.before(datetime.now(UTC), INTERVAL, MIXED_RUNS)

DAG = "localfaults"
RETRIED = "b"
FAN = ("fan0", "fan1", "fan2")
MAPPED, MAPPED_LENGTH = "each", 3
#: Each try's command runs this long after its record: long enough for a kill to find tries alive.
TRY_SECONDS = 1
#: The controller's clock steps (its offset from the real time). Only the controller's clock moves: a
#: try's process stamps its start and end with the real one, and a retry is due at that end plus its
#: delay by the controller's clock (Airflow's `next_retry_datetime` from the worker's `end_date`), so
#: a controller behind by N s holds a retry N s more. An hour behind held `b`'s retry past the
#: schedule's 180 s wait for progress, a minute behind made the test 60 s longer; on one host a real
#: step moves both clocks. The kwok suite's `clock-jump` steps up to an hour.
CLOCK_JUMPS = (-20.0, -5.0, 5.0, 20.0)


def record(records: Path, map_index: int = -1) -> str:
    """The shell that appends this try's start to `records`: pid, run id, task, map index, try."""
    return (
        f'echo "$$ $AIRFLOW_CTX_DAG_RUN_ID $AIRFLOW_CTX_TASK_ID {map_index} $AIRFLOW_CTX_TRY_NUMBER" '
        f">> {records}"
    )


#: In each try command's environment (and its children's, an exec'd `sleep` included): the records
#: file, by which /proc finds the try processes alive (the controller's own environment lacks it).
MARK = "ZONDA_AUDIT_RECORDS"


def marked(records: Path) -> dict[str, Any]:
    return {"env": {MARK: str(records)}, "append_env": True}


def workload(records: Path) -> dict[str, Any]:
    """The DAG: `a`; `b` (fails try 1 by design); a fan-out of three after `b`; `each`, mapped over
    three commands, after `a`; `join` after all. Every try records its start, then runs a while."""

    def bash(task_id: str, depends_on: list[str], then: str = "", **fields: Any) -> dict[str, Any]:
        command = f"{record(records)}; {then}sleep {TRY_SECONDS}"
        args = {"bash_command": command, **marked(records)}
        return {"id": task_id, "operator": "BashOperator", "args": args, "dependsOn": depends_on, **fields}

    mapped = [f"{record(records, index)}; sleep {TRY_SECONDS}" for index in range(MAPPED_LENGTH)]
    tasks = [
        bash("a", []),
        bash(RETRIED, ["a"], 'test "$AIRFLOW_CTX_TRY_NUMBER" -gt 1 || exit 1; ', retries=2, retryDelay="1s"),
        *(bash(name, [RETRIED]) for name in FAN),
        {"id": MAPPED, "operator": "BashOperator", "dependsOn": ["a"], "args": marked(records),
         "expand": {"kwargs": {"bash_command": mapped}}},
        bash("join", [*FAN, MAPPED]),
    ]  # fmt: skip
    return {
        "apiVersion": "zonda.dev/v1alpha1",
        "kind": "DAG",
        "metadata": {"name": DAG},
        "spec": {
            "schedule": f"{INTERVAL}m",
            "startDate": WINDOW.date(0),
            "endDate": WINDOW.date(WINDOW.runs - 1),
            "catchup": True,
            "maxActiveRuns": 3,
            "tasks": tasks,
        },
    }


# ------------------------------------------------------------------------------------ the audit

#: A try's identity: (run id, task, map index, try number).
TryKey = tuple[str, str, int, int]


@dataclass(frozen=True)
class Start:
    pid: int
    key: TryKey


def read_starts(records: Path) -> list[Start]:
    """The records file, one start a line (`pid run task map_index try`)."""
    starts = []
    for line in records.read_text().splitlines() if records.exists() else []:
        pid, run, task, map_index, try_number = line.split()
        starts.append(Start(int(pid), (run, task, int(map_index), int(try_number))))
    return starts


@dataclass
class Ended:
    """The workload's runs once all ended, from the apiserver: run name -> (state, {ti key: state})."""

    runs: dict[str, tuple[str, dict[str, str]]]


def ended(cluster: Cluster, namespace: str) -> Ended | None:
    def read() -> Ended | None:
        runs = [r for r in get(cluster, namespace, "dagruns")["items"] if r["spec"]["dagName"] == DAG]
        states = {r["metadata"]["name"]: (r.get("status") or {}).get("state") for r in runs}
        if len(runs) < WINDOW.runs or any(s not in ("success", "failed") for s in states.values()):
            return None
        return Ended({
            r["metadata"]["name"]: (r["status"]["state"],
                                    {k: ti["state"] for k, ti in r["status"]["taskInstances"].items()})
            for r in runs
        })  # fmt: skip

    found: Ended | None = quietly(read, None)
    return found


@dataclass
class Audit:
    duplicates: dict[TryKey, int] = field(default_factory=dict)
    differences: list[str] = field(default_factory=list)


def tries_of(starts: list[Start]) -> dict[tuple[str, str, int], list[int]]:
    """Each task instance (run, task, map index) -> the tries its processes started, in order."""
    found: dict[tuple[str, str, int], list[int]] = {}
    for start in starts:
        run, task, map_index, try_number = start.key
        found.setdefault((run, task, map_index), []).append(try_number)
    return {key: sorted(tries) for key, tries in found.items()}


def local_audit(starts: list[Start], reference: list[Start], outcome: Ended, expected: Ended) -> Audit:
    """Each try started by one process; each task instance's tries the reference's; every run and task
    instance ended as the reference's (no fault of this schedule must make a try run again)."""
    audit = Audit()
    counts = Counter(start.key for start in starts)
    audit.duplicates = {key: n for key, n in counts.items() if n > 1}
    for key, n in sorted(audit.duplicates.items()):
        pids = [start.pid for start in starts if start.key == key]
        audit.differences.append(f"try {key} started {n} times (pids {pids})")
    got, want = tries_of(starts), tries_of(reference)
    for ti in sorted(set(got) | set(want)):
        if sorted(set(got.get(ti, []))) != want.get(ti, []):
            audit.differences.append(
                f"task instance {ti}: tries {got.get(ti)} started, reference {want.get(ti)}"
            )
    for run in sorted(set(outcome.runs) | set(expected.runs)):
        if outcome.runs.get(run) != expected.runs.get(run):
            audit.differences.append(
                f"run {run}: {outcome.runs.get(run)}, reference {expected.runs.get(run)}"
            )
    return audit


def try_processes(records: Path) -> list[int]:
    """The pids of the processes alive now with `records` marked in their environment: each try's
    command and what it runs (bash execs its last command, so a command line would miss them)."""
    needle = f"{MARK}={records}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            environ = (entry / "environ").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[-1].split()[0]
            if needle in environ and state != "Z":
                found.append(int(entry.name))
    return found


def check_reference(reference: list[Start], expected: Ended) -> None:
    """The positive controls on the reference: the workload did what each part is there for."""
    tries = tries_of(reference)
    runs = {run for run, _, _ in tries}
    assert len(runs) == WINDOW.runs, f"the reference's records name {sorted(runs)}"
    assert all(tries[(run, RETRIED, -1)] == [1, 2] for run in runs), tries
    assert all(tries[(run, MAPPED, i)] == [1] for run in runs for i in range(MAPPED_LENGTH)), tries
    assert len(reference) == WINDOW.runs * (9 + 1), "9 task instances a run, one retried"
    assert all(state == "success" for state, _ in expected.runs.values()), expected.runs
    # the audit itself: a planted duplicate, a missing try and a changed state are found
    planted = local_audit([*reference, reference[0]], reference, expected, expected)
    assert list(planted.duplicates) == [reference[0].key], planted
    missing = local_audit(reference[1:], reference, expected, expected)
    assert missing.differences and not missing.duplicates, missing
    name, (state, tis) = next(iter(expected.runs.items()))
    changed = Ended({**expected.runs, name: (state, {**tis, "join": "failed"})})
    assert local_audit(reference, reference, changed, expected).differences
    assert not local_audit(reference, reference, expected, expected).differences


# ------------------------------------------------------------------------------------ the faults


def jump(target: Target) -> str:
    assert target.clock_file is not None
    offset = target.rng.choice([step for step in CLOCK_JUMPS if step != target.clock_offset])
    set_clock(target, offset)
    return f"clock {offset:+.0f} s"


def kill_while_a_try_runs(records: Path, seen: Counter[str]) -> Callable[[Target], str]:
    def inject(target: Target) -> str:
        deadline = time.monotonic() + 10
        while not (alive := try_processes(records)) and time.monotonic() < deadline:
            time.sleep(0.05)  # polling /proc for a try alive, not waiting for an effect
        seen["kills while a try ran" if alive else "kills between tries"] += 1
        seen["try processes alive at a kill"] += len(alive)
        kill_controller(target)
        return "controller SIGKILL"

    return inject


def hurt_requests(target: Target) -> str:
    proxy_faults(target)
    return "proxy"


@contextlib.contextmanager
def local_controller(
    cluster: Cluster, namespace: str, tmp_path: Path, *, proxied: bool
) -> Iterator[tuple[Any, Any, Path]]:
    with contextlib.ExitStack() as stack:
        proxy = stack.enter_context(proxy_for(cluster)) if proxied else None
        extra = ["--kubeconfig", str(proxy.kubeconfig(tmp_path / "proxied", ADMIN_TOKEN))] if proxy else []
        clock_file = tmp_path / "clock-offset"
        process = stack.enter_context(controller(cluster, namespace, tmp_path, executor="local", extra=extra,
                                                 env={OFFSET_FILE_ENV: str(clock_file)}))  # fmt: skip
        yield process, proxy, clock_file


def load() -> str:
    return " ".join(f"{value:.1f}" for value in os.getloadavg())


def test_the_local_executor_under_a_fault_schedule_starts_each_try_once_and_ends_as_without_faults(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    print(f"\nload average at the start: {load()}")
    started = time.monotonic()
    # the reference: the same workload, no faults, in a namespace of its own
    reference_records = tmp_path / "reference" / "records"
    reference_records.parent.mkdir()
    with fresh_namespace(cluster, "ref") as ref_namespace:
        apply(cluster, ref_namespace, workload(reference_records))
        with local_controller(cluster, ref_namespace, tmp_path / "reference", proxied=False):
            expected = wait_for(lambda: ended(cluster, ref_namespace), "the reference run", 300)
    reference = read_starts(reference_records)
    print(f"reference (no faults): {len(expected.runs)} runs, {len(reference)} tries, "
          f"{time.monotonic() - started:.0f} s")  # fmt: skip
    check_reference(reference, expected)

    rng = random.Random(SEED)
    records = tmp_path / "faulted" / "records"
    records.parent.mkdir()
    seen: Counter[str] = Counter()
    struck: Counter[str] = Counter()
    recoveries: list[float] = []
    faults = [kill_while_a_try_runs(records, seen), jump, hurt_requests]
    faulted_started = time.monotonic()
    apply(cluster, namespace, workload(records))
    with local_controller(cluster, namespace, tmp_path / "faulted", proxied=True) as (process, proxy, clock):
        target = Target(cluster, namespace, process, rng, proxy=proxy, clock_file=clock)
        for strike in range(INJECTIONS):
            time.sleep(rng.uniform(0.3, 2.0))  # the fault schedule: when to strike, not a wait for an effect
            if ended(cluster, namespace):
                break  # nothing left to hurt
            if try_processes(records):
                seen["try processes seen alive"] += 1  # the /proc check's positive control
            before = all_progress(cluster, namespace)
            at = time.monotonic()
            if strike % len(faults) == 0:
                rng.shuffle(faults)  # each type once in every len(faults) strikes, in a seeded order
            struck[faults[strike % len(faults)](target)] += 1
            wait_for(
                lambda before=before: all_progress(cluster, namespace) > before or ended(cluster, namespace),
                "progress after the fault",
                timeout=180,
            )
            recoveries.append(time.monotonic() - at)
        if target.clock_offset:
            set_clock(target, 0.0)
        proxy.clear()
        outcome = wait_for(lambda: ended(cluster, namespace), "the workload to finish", timeout=300)
        # a try the controller lost track of would outlive the run that ended without it
        wait_for(lambda: not try_processes(records), "no try process alive once every run has ended", 30)
    seconds = time.monotonic() - faulted_started
    starts = read_starts(records)
    audit = local_audit(starts, reference, outcome, expected)
    tis = len({(run, task, index) for run, task, index, _ in (s.key for s in starts)})
    print(
        f"\nload average at the end: {load()}; requests the proxy hurt: {dict(proxy.injected)} of "
        f"{len(proxy.requests)}; {dict(seen)}"
        "\n| fault | injections | runs | task instances | tries started | duplicates | differences "
        "| recover p50 / max (s) | test (s) |"
        "\n|---|---|---|---|---|---|---|---|---|"
        f"\n| local executor: {', '.join(f'{k} {v}' for k, v in sorted(struck.items()))} (seed {SEED}) "
        f"| {sum(struck.values())} | {len(outcome.runs)} | {tis} | {len(starts)} | {len(audit.duplicates)} "
        f"| {len(audit.differences)} "
        f"| {statistics.median(recoveries):.1f} / {max(recoveries):.1f} | {seconds:.0f} |"
    )
    assert recoveries, "the schedule struck nothing: the audit would prove nothing"
    assert seen["try processes seen alive"], (
        "no try process was ever seen in /proc: the orphan check proves nothing"
    )
    assert not audit.differences, "\n".join(audit.differences)


def test_a_try_whose_process_started_just_before_a_kill_is_adopted_not_started_again(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    """The controller exits (as a SIGKILL would: `ZONDA_FAULT_EXIT_AT=local-try-spawned`) right after
    the local executor started a try's process, before anything recorded its pid; the try's process
    lives on (a session of its own). The restarted controller must adopt that try, not start it again:
    its process records its start once."""
    records = tmp_path / "records"
    command = f"{record(records)}; sleep 3"
    task = {"id": "only", "operator": "BashOperator", "args": {"bash_command": command, **marked(records)}}
    dag = {
        "apiVersion": "zonda.dev/v1alpha1",
        "kind": "DAG",
        "metadata": {"name": "spawned"},
        "spec": {"schedule": None, "tasks": [task]},
    }
    apply(cluster, namespace, dag)
    state = tmp_path / "state"
    with controller(cluster, namespace, tmp_path, executor="local",
                    env={"ZONDA_FAULT_EXIT_AT": "local-try-spawned"}) as first:  # fmt: skip
        run = zonda_trigger(cluster, namespace, "spawned")
        assert first.process is not None
        wait_for(lambda: first.process.poll() is not None, "the controller to exit after the spawn", 120)
        assert "exiting at local-try-spawned" in first.log()
    # the positive control: the try's process outlived the controller and recorded its start
    wait_for(lambda: len(read_starts(records)) == 1, "the first process's record", 60)
    assert list(state.glob("*/*/invocation.json")), "the executor had accepted the try"
    with controller(cluster, namespace, tmp_path, executor="local"):
        body = wait_run_finished(cluster, namespace, run, timeout=120)
        wait_for(lambda: not try_processes(records), "no try process alive", 30)
    starts = read_starts(records)
    assert [start.key[1:] for start in starts] == [("only", -1, 1)], f"the try started again: {starts}"
    assert body["status"]["state"] == "success", body["status"]
