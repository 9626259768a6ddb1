"""Run a bench in a network namespace of its own whose only interface is loopback.

The side-by-side benches start other projects' servers (Argo's workflow-controller binds :6060 on every
interface, hard-coded; Airflow's log server binds 0.0.0.0:8793): in a namespace of their own, with
the local control plane, Postgres and the bench beside them, nothing outside this process tree can
reach them, and they can reach nothing but each other. Needs root (`unshare --net`) and `ip`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

MARK = "ZONDA_BENCH_NETNS"


def inside() -> bool:
    return os.environ.get(MARK) == "1"


def rerun_inside() -> int:
    """Run this script again, with the same arguments, in a new network namespace; its exit code."""
    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("ip"):
        raise SystemExit("this bench runs in a network namespace of its own: it needs root, unshare and ip")
    command = ["unshare", "--net", "--", "sh", "-c", 'ip link set lo up && exec "$@"', "sh"]
    command += [sys.executable, *sys.argv]
    return subprocess.run(command, env={**os.environ, MARK: "1"}).returncode
