"""The unit tier never loads the cluster tier: its fixtures (tests/conftest.py's `cluster` and
`namespace`) import `tests.cluster` and `controller.devtools.devcluster` only when a test asks for them.

Checked two ways: what Python imports when pytest loads the unit tier's conftests (`-X importtime`, in
a fresh interpreter, so nothing this session already imported hides it), and every unit test file's
own imports. The devtools code under test (`zonda up`'s helpers, `free_port`) may import devcluster:
those are unit tests of it, and they are the only unit files that may.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

from tests.paths import REPO_ROOT
from tests.tools import run_python

UNIT = REPO_ROOT / "tests" / "unit"
CLUSTER_ONLY = ("tests.cluster", "tests.ui", "controller.devtools.devcluster")


def imported_by(code: str) -> set[str]:
    """The modules a fresh interpreter imports running `code` (from `python -X importtime`)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]))
    result = run_python(["-X", "importtime", "-c", code], env)
    return {
        line.rsplit("|", 1)[1].strip()
        for line in result.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }


def cluster_only(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == c or m.startswith(c + ".") for c in CLUSTER_ONLY))


def test_loading_the_unit_tiers_conftests_imports_nothing_of_the_cluster_tier() -> None:
    loaded = imported_by("import tests.conftest, tests.unit.conftest")
    assert "controller.kube.fake" in loaded, "positive control: the unit conftest's own imports are seen"
    assert cluster_only(loaded) == []
    # and asking for the fixture's code is what loads it (the check can see a violation)
    assert "controller.devtools.devcluster" in imported_by("import controller.devtools.devcluster")


def imports_of(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_no_unit_test_file_imports_the_cluster_tier() -> None:
    files = sorted(UNIT.rglob("*.py"))
    assert len(files) > 100, "positive control: the unit tier's files are found"
    offenders = {
        str(path.relative_to(REPO_ROOT)): found
        for path in files
        if (found := [m for m in cluster_only(imports_of(path)) if not m.startswith("controller.devtools")])
    }
    assert offenders == {}


def test_only_the_devtools_tests_import_devcluster() -> None:
    """`zonda up`'s helpers import devcluster, so their unit tests do; no other unit file may."""
    devtools_users = {
        str(path.relative_to(REPO_ROOT))
        for path in sorted(UNIT.rglob("*.py"))
        if {"controller.devtools.devcluster", "controller.devtools.up", "controller.devtools.up_leftovers"}
        & imports_of(path)
    }
    assert devtools_users == {
        "tests/unit/controller/devtools/test_free_port.py",
        "tests/unit/controller/devtools/test_realnode.py",
        "tests/unit/controller/cli/test_cli_runs_and_logs.py",
    }
