"""`zonda dags render` as a command: output to a folder or stdout, the exit status, the report.

Real: the click command, DAG files in a temporary folder. No cluster (render needs none).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import yaml
from click.testing import CliRunner

from controller.cli.main import main

GOOD = """
    from zonda import DAG
    from zonda.operators.empty import EmptyOperator
    with DAG("good_dag", schedule=None, orientation="TB") as dag:
        EmptyOperator(task_id="t")
"""


def folder_with(folder: Path, **files: str) -> Path:
    for name, text in files.items():
        (folder / name).write_text(textwrap.dedent(text))
    return folder


def test_render_writes_one_file_per_dag_and_exits_1_on_a_broken_file(tmp_path: Path) -> None:
    dags = tmp_path / "dags"
    dags.mkdir()
    folder_with(dags, **{"good.py": GOOD})
    (dags / "broken.py").write_text("from zonda import DAG\nraise ImportError('no such helper')\n")
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["dags", "render", str(dags), "-o", str(out), "--report"])
    assert result.exit_code == 1
    assert sorted(p.name for p in out.iterdir()) == ["good-dag.yaml"]
    manifest = yaml.safe_load((out / "good-dag.yaml").read_text())
    assert manifest["metadata"]["annotations"]["zonda.dev/dag-id"] == "good_dag"
    assert "broken.py:2: ImportError: no such helper" in result.stderr
    assert "rendered, with warnings" in result.stderr and "orientation" in result.stderr


def test_render_to_stdout_exits_0_when_every_file_renders(tmp_path: Path) -> None:
    (tmp_path / "good.py").write_text(textwrap.dedent(GOOD))
    result = CliRunner().invoke(main, ["dags", "render", str(tmp_path)])
    assert result.exit_code == 0, result.stderr
    assert [d["metadata"]["name"] for d in yaml.safe_load_all(result.stdout)] == ["good-dag"]


def test_render_warns_of_a_template_file_not_found_and_still_renders(tmp_path: Path) -> None:
    """As Airflow's parse logs a template file it cannot read and goes on (the task fails on it)."""
    (tmp_path / "scripted.py").write_text(
        textwrap.dedent("""
            from zonda import DAG
            from zonda.operators.bash import BashOperator
            with DAG("scripted", schedule=None) as dag:
                BashOperator(task_id="run", bash_command="nowhere.sh")
        """)
    )
    result = CliRunner().invoke(main, ["dags", "render", str(tmp_path)])
    assert result.exit_code == 0, result.stderr
    assert "warning: scripted.py: DAG 'scripted': template file 'nowhere.sh' (named by task 'run' field " in (
        result.stderr
    )
    assert "TemplateNotFound" in result.stderr
    (tmp_path / "nowhere.sh").write_text("echo found\n")
    result = CliRunner().invoke(main, ["dags", "render", str(tmp_path)])
    assert "warning" not in result.stderr
    (manifest,) = yaml.safe_load_all(result.stdout)
    assert manifest["spec"]["templateFiles"] == {"nowhere.sh": "echo found\n"}
