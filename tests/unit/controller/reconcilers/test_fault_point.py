"""`fault_point`: the cluster tests' "controller killed here" is a real SIGKILL of the process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from controller.processes.faults import FAULT_ENV

CODE = """
from controller.processes.faults import fault_point
fault_point("not-named")
print("passed not-named", flush=True)
fault_point("named")
print("after named", flush=True)
"""


def test_a_fault_point_sigkills_the_process_at_the_moment_named_and_only_there() -> None:
    done = subprocess.run(
        [sys.executable, "-c", CODE],
        env={**os.environ, FAULT_ENV: "other,named"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "passed not-named" in done.stdout, done.stderr  # the positive control: a moment not named passes
    assert done.returncode == -signal.SIGKILL, "killed by SIGKILL, not exited"
    assert "after named" not in done.stdout
    assert "exiting at named" in done.stderr
