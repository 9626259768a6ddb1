"""One rule for a test whose external tool (Graphviz's `dot`, helm, Chromium) is missing.

Under CI (`CI=true`, as `.ci/run` sets it) the test FAILS, naming the tool and how to install it:
CI must never pass by running nothing. Anywhere else it skips with the same reason, so a laptop
without Graphviz still runs the rest of the suite.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import NoReturn

import pytest

from tests.paths import REPO_ROOT


def under_ci() -> bool:
    """True when the suite runs in CI (`CI=true`, as `.ci/run` and most CI systems set it)."""
    return os.environ.get("CI", "").lower() not in ("", "0", "false", "no")


def tool_missing(reason: str) -> NoReturn:
    """Fails the test under CI, skips it elsewhere; `reason` says what is missing and how to get it."""
    if under_ci():
        pytest.fail(f"{reason} (CI must not skip this test)", pytrace=False)
    pytest.skip(reason)


def require_executable(name: str, install: str) -> str:
    """The path of `name` on PATH, or `tool_missing` with `install` (how to get it)."""
    found = shutil.which(name)
    if found is None:
        tool_missing(f"{name} is not installed: {install}")
    return found


def require_file(path: Path, install: str) -> Path:
    """`path` if it is a file, or `tool_missing` with `install`."""
    if not path.is_file():
        tool_missing(f"{path} is missing: {install}")
    return path


def run_python(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`python ARGS` in a fresh interpreter at the repository's root, its output captured as text; a
    non-zero exit raises (what a test that checks a fresh process's imports or collection needs)."""
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env=env,
        check=True,
        timeout=120,
    )
