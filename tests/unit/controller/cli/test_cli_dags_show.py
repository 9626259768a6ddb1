"""`zonda dags show`: the DOT the UI lays out, from a manifest or a Python DAG file, as dot/svg/png.

Real: the click command, zonda's DAG rendering, Graphviz's `dot` (without it the svg/png test skips
locally and fails under CI: `tests.tools`; hack/install-browser.sh installs it).
"""

from __future__ import annotations

from pathlib import Path

import yaml
from click.testing import CliRunner

from controller.cli.main import main
from tests.paths import REPO_ROOT
from tests.tools import require_executable

EXAMPLES = REPO_ROOT / "examples" / "dags"
GRAPHVIZ_INSTALL = "run hack/install-browser.sh (apt-get install graphviz)"


def show(*args: str) -> bytes:
    result = CliRunner().invoke(main, ["dags", "show", *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout_bytes


def test_a_manifest_and_its_python_dag_file_draw_the_same_graph() -> None:
    from_yaml = show(str(EXAMPLES / "example_branch_labels.yaml")).decode()
    assert from_yaml == show(str(EXAMPLES / "example_branch_labels.py")).decode()
    assert '"check_integrity" -> "describe_integrity" [label="Errors found"];' in from_yaml


def test_a_file_with_several_dags_asks_which(tmp_path: Path) -> None:
    documents = [
        yaml.safe_load((EXAMPLES / f"{name}.yaml").read_text())
        for name in ("example_bash", "example_default_args")
    ]
    both = tmp_path / "both.yaml"
    both.write_text(yaml.safe_dump_all(documents))
    result = CliRunner().invoke(main, ["dags", "show", str(both)])
    assert result.exit_code != 0 and "name one as" in result.output and "example-bash" in result.output
    assert b'digraph "example-default-args"' in show(f"{both}:example-default-args")


def test_svg_and_png_come_from_graphviz(tmp_path: Path) -> None:
    require_executable("dot", GRAPHVIZ_INSTALL)
    svg = show(str(EXAMPLES / "example_bash.yaml"), "--format", "svg")
    assert b"<svg" in svg and b"node-extract" in svg.replace(b"&#45;", b"-")
    out = tmp_path / "dag.png"
    show(str(EXAMPLES / "example_bash.yaml"), "--format", "png", "-o", str(out))
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
