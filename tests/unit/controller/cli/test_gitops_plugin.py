"""The Argo CD plugin in docs/gitops/ runs `zonda dags render .` in the source directory, as Argo does.

Real: the plugin file, the CLI as a subprocess in a copy of a DAG repository. Only `zonda` is replaced
by `python -m controller.cli` (the same click group), so the test runs this tree's code.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from tests.paths import REPO_ROOT

REPO = REPO_ROOT
PLUGIN = REPO / "docs" / "gitops" / "argocd-cmp-plugin.yaml"


def test_the_plugins_generate_command_renders_the_dags(tmp_path: Path) -> None:
    plugin = yaml.safe_load(PLUGIN.read_text())
    assert plugin["kind"] == "ConfigManagementPlugin"
    command = plugin["spec"]["generate"]["command"]
    assert command == ["zonda", "dags", "render", "."]
    source = tmp_path / "dags"
    shutil.copytree(REPO / "examples" / "dags", source, ignore=shutil.ignore_patterns("*.yaml"))
    run = subprocess.run(
        [sys.executable, "-m", "controller.cli", *command[1:]],
        cwd=source,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "ARGOCD_APP_NAME": "dags"},
    )
    assert run.returncode == 0, run.stderr
    documents = list(yaml.safe_load_all(run.stdout))
    assert {d["kind"] for d in documents} == {"DAG"}
    names = sorted(d["metadata"]["name"] for d in documents)
    written = sorted(
        yaml.safe_load(p.read_text())["metadata"]["name"] for p in (REPO / "examples" / "dags").glob("*.yaml")
    )
    assert names == written
