"""What a `zonda up` leaves running, found and stopped: the local executor's task process groups
(and everything below them), and whatever a previous up killed before it could stop left behind.

Apart from `up.py` (the steps of bringing the main job up) because this reads /proc to decide which
processes are ours, a question of its own that the unit tests and the first-hour test ask directly.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import time
from pathlib import Path

from controller.devtools import node_cleanup, realnode
from controller.devtools.devcluster import log


def _started_at(pid: int) -> float:
    """When process `pid` started, in seconds since the epoch (from /proc: boot time + start ticks)."""
    ticks = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    boot = next(
        int(line.split()[1])
        for line in Path("/proc/stat").read_text().splitlines()
        if line.startswith("btime")
    )
    return boot + ticks / os.sysconf("SC_CLK_TCK")


def task_process_groups(state_dir: Path) -> list[int]:
    """The local executor's task process groups still alive under `state_dir`.

    A pid file alone could name a recycled pid: a process counts only if it started before its pid
    file was written (the executor writes it once the try runs). Its environment cannot tell: a try
    forked from the executor's fork server shows the server's.
    """
    groups = []
    for pid_file in state_dir.glob("*/*/pid"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            pid = int(pid_file.read_text())
            if _alive(pid) and _started_at(pid) <= pid_file.stat().st_mtime + 1:
                groups.append(pid)
    return groups


def _descendants(pid: int) -> set[int]:
    """Every process below `pid` (an operator may start its command in a session of its own)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def stop_task_processes(state_dir: Path, grace: float = 5) -> list[int]:
    """Stop every live task process group under `state_dir` and everything below it: SIGTERM (the
    runner stops its operator), then SIGKILL for whatever outlives `grace`. Returns the groups."""
    groups = task_process_groups(state_dir)
    targets = set(groups).union(*(_descendants(pgid) for pgid in groups))
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(_alive(pid) for pid in targets):
        time.sleep(0.1)
    for pid in targets:
        if _alive(pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
    return groups


def processes_mentioning(text: str) -> list[int]:
    """Processes whose command line or environment contains `text` (a work directory's path)."""
    needle, found = text.encode(), []
    for proc in Path("/proc").glob("[0-9]*"):
        if int(proc.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if needle in (proc / "cmdline").read_bytes() or needle in (proc / "environ").read_bytes():
                found.append(int(proc.name))
    return found


def last_up_record() -> Path:
    """Where a running `zonda up` notes its pid and work directory, for the next one to check."""
    default = Path(os.environ.get("ZONDA_CACHE_DIR", Path.home() / ".cache" / "zonda")) / "up.json"
    return Path(os.environ.get("ZONDA_UP_RECORD", default))


def clean_after_previous_up(record: Path) -> list[int]:
    """A previous `zonda up` killed before it could stop (SIGKILL, a crash) left its control plane,
    controller and task processes running: stop them and remove its work directory. An up that is
    still alive is left alone. Returns the pids stopped."""
    try:
        previous = json.loads(record.read_text())
        pid, workdir = int(previous["pid"]), Path(previous["workdir"])
    except (OSError, ValueError, KeyError, TypeError):
        return []
    if _alive(pid) or not workdir.is_absolute():
        return []
    # Its real node first (containers, mounts, network): removing the work dir under live mounts
    # would reach into them.
    node_cleanup.clean_after_killed_node(log, lock=realnode.LOCK_FILE)
    node_cleanup.unmount_under(workdir)
    stale = processes_mentioning(str(workdir))
    for leftover in stale:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(leftover, signal.SIGKILL)
    shutil.rmtree(workdir, ignore_errors=True)
    record.unlink(missing_ok=True)
    return stale
