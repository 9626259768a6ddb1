"""A local try's process claims its attempt before it runs anything: at most one process a try.

The local executor records a try's pid in `<attempt>/pid`. Written by the controller once the
process had started, a controller killed in between left a running try with no pid, and the next
controller started it again: one try, two processes (`tests/cluster/test_faults_local.py`). So the
try's own process writes it, first thing, as a claim: a hard link of a complete file to `pid`, which
fails if the name exists (atomic, and a reader never sees it half written). A process that finds the
try claimed runs nothing and exits `CLAIM_LOST`; the executor that started it then watches the
claimant as a try it adopted. The forked runner claims in the fork server's child
(`controller.runner.forkserver`), any other command through `CLAIM_SCRIPT` (`sh`, then `exec`).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

PID_FILE = "pid"
#: The exit code of a process that found its try claimed by another (EX_TEMPFAIL) and ran nothing.
CLAIM_LOST = 75
EXIT_STATUS_FILE = "exit_status"
_CLAIM = (
    'echo $$ > "$0/pid.$$" && ln "$0/pid.$$" "$0/pid" 2>/dev/null; claimed=$?; rm -f "$0/pid.$$"; '
    f'[ "$claimed" = 0 ] || exit {CLAIM_LOST}; '
)
#: `sh -c CLAIM_SCRIPT <attempt dir> <command...>`: claim as `claim` does, then exec the command (the
#: task runner: its result file says how the try ended, whoever watches it).
CLAIM_SCRIPT = _CLAIM + 'exec "$@"'
#: The same for a command that writes no result (a container task's): the shell stays its parent and
#: records its exit status in the attempt, where a controller that adopted the try (not the
#: command's parent, so deaf to its exit code) reads it (`recorded_exit`).
RECORDING_CLAIM_SCRIPT = (
    _CLAIM + f'"$@"; code=$?; echo $code > "$0/{EXIT_STATUS_FILE}.$$" && '
    f'mv "$0/{EXIT_STATUS_FILE}.$$" "$0/{EXIT_STATUS_FILE}"; exit $code'
)


def claim(attempt: Path, pid: int) -> bool:
    """Record `pid` as the try's one process, unless a process is recorded already."""
    staged = attempt / f"{PID_FILE}.{pid}"
    staged.write_text(str(pid))
    try:
        os.link(staged, attempt / PID_FILE)
    except FileExistsError:
        return False
    finally:
        with contextlib.suppress(FileNotFoundError):
            staged.unlink()
    return True


def claimant(attempt: Path) -> int | None:
    """The pid of the process that claimed the try; None while none has."""
    try:
        return int((attempt / PID_FILE).read_text())
    except FileNotFoundError:
        return None


def recorded_exit(attempt: Path) -> int | None:
    """The exit status `RECORDING_CLAIM_SCRIPT` recorded for the try's command; None if none was."""
    try:
        return int((attempt / EXIT_STATUS_FILE).read_text())
    except (FileNotFoundError, ValueError):
        return None
