"""The runner leaves without the interpreter's teardown, but still as a normal exit would matter.

Real: `python -m controller.runner` as a task pod runs it, and a try forked by the local executor's
fork server (both end through `controller.runner.process.leave`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

from tests.paths import REPO_ROOT
from zonda.resources.invocations import TaskInvocation
from zonda.resources.run_types import RunType

REPO = REPO_ROOT

HELPERS = """
import atexit, os, threading, time

def leave_work_behind():
    out = os.environ["EXIT_TEST_DIR"]
    atexit.register(lambda: open(os.path.join(out, "atexit"), "w").write("ran"))
    def late():
        time.sleep(0.3)
        open(os.path.join(out, "thread"), "w").write("finished")
    threading.Thread(target=late).start()
    print("returning while a thread still works")
    return "done"
"""


def test_atexit_handlers_and_non_daemon_threads_finish_before_the_exit(tmp_path: Path) -> None:
    (tmp_path / "exit_helpers.py").write_text(HELPERS)
    moment = datetime(2026, 1, 1, tzinfo=UTC)
    invocation = TaskInvocation(
        dag_name="dag",
        run_name="run",
        run_type=RunType.MANUAL,
        task_id="t",
        try_number=1,
        operator="PythonOperator",
        args={"python_callable": "exit_helpers:leave_work_behind"},
        logical_date=moment,
        data_interval_start=moment,
        data_interval_end=moment,
    )
    env = {key: value for key, value in os.environ.items() if not key.startswith("ZONDA_")}
    env.update(
        PYTHONPATH=os.pathsep.join([str(tmp_path), str(REPO)]),
        ZONDA_TASK_INVOCATION=invocation.encode().decode(),
        ZONDA_RESULT_PATH=str(tmp_path / "result.json"),
        EXIT_TEST_DIR=str(tmp_path),
    )
    ran = subprocess.run(
        [sys.executable, "-m", "controller.runner"], env=env, capture_output=True, text=True, timeout=120
    )
    assert ran.returncode == 0, ran.stderr
    assert "returning while a thread still works" in ran.stdout, "stdout was flushed"
    assert json.loads((tmp_path / "result.json").read_text())["xcom"] == "done"
    assert (tmp_path / "thread").read_text() == "finished", "the task's thread was waited for"
    assert (tmp_path / "atexit").read_text() == "ran", "atexit handlers ran"
