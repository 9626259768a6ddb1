"""The image's entrypoints, tested where Docker is missing: build the wheel, install it into a fresh
virtualenv, and run `zonda` subcommands from outside the repository (so nothing is imported from the
source tree). The Dockerfile installs exactly this wheel; `hadolint` lints the Dockerfile in CI.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(root / "dist"),
            str(REPO),
        ],
        check=True,
    )
    wheel = next((root / "dist").glob("zonda-*.whl"))
    # The dependencies come from this environment (no network); zonda itself only from the wheel.
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(root / "venv")], check=True)
    subprocess.run(
        [str(root / "venv" / "bin" / "pip"), "install", "-q", "--no-deps", "--force-reinstall", str(wheel)],
        check=True,
    )
    yield root / "venv"


def run(venv: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    return subprocess.run(
        [str(venv / "bin" / args[0]), *args[1:]],
        capture_output=True,
        text=True,
        cwd=venv,
        env={**clean, **(env or {})},
        timeout=60,
    )


def test_the_installed_package_is_the_wheel_not_the_source_tree(venv: Path) -> None:
    result = run(venv, "python", "-c", "import zonda, controller; print(zonda.__file__, controller.__file__)")
    assert result.returncode == 0, result.stderr
    assert str(REPO) not in result.stdout and str(venv) in result.stdout, result.stdout


@pytest.mark.parametrize(
    "command", ["controller", "triggerer", "run-task", "trigger", "clear", "mark", "logs", "up"]
)
def test_every_entrypoint_subcommand_starts(venv: Path, command: str) -> None:
    result = run(venv, "zonda", command, "--help")
    assert result.returncode == 0, result.stderr
    assert "Usage:" in result.stdout


def test_the_kubectl_plugin_name_is_installed(venv: Path) -> None:
    result = run(venv, "kubectl-zonda", "--help")
    assert result.returncode == 0 and "controller" in result.stdout


def test_the_wheel_runs_a_task_as_a_task_pod_would(venv: Path, tmp_path: Path) -> None:
    invocation = {
        "dagName": "d",
        "runName": "d-manual-1",
        "runType": "manual",
        "taskId": "t",
        "tryNumber": 1,
        "operator": "BashOperator",
        "args": {"bash_command": "echo {{ ds }}"},
        "logicalDate": "2026-01-02T00:00:00+00:00",
        "dataIntervalStart": "2026-01-02T00:00:00+00:00",
        "dataIntervalEnd": "2026-01-02T00:00:00+00:00",
    }
    result_path = tmp_path / "termination-log"
    result = run(
        venv,
        "zonda",
        "run-task",
        env={"ZONDA_TASK_INVOCATION": json.dumps(invocation), "ZONDA_RESULT_PATH": str(result_path)},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    reported = json.loads(result_path.read_text())
    # The runner's own clock readings (sub-second, for the task instance's times) vary; the rest is exact.
    started, ended = reported.pop("startedAt"), reported.pop("endedAt")
    assert started <= ended
    assert reported == {"outcome": "success", "xcom": "2026-01-02"}
