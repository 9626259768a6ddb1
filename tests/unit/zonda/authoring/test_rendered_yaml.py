"""`zonda dags render` writes a multi-line string (a template file, a bash script, `doc_md`) as a literal
block (`|`), line by line, so a GitOps diff shows the lines that changed; the YAML loads back equal."""

from __future__ import annotations

import textwrap
from pathlib import Path

import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.paths import REPO_ROOT
from zonda.authoring import manifests, rendering

DAG_FILE = textwrap.dedent(
    """
    import pendulum
    from airflow.providers.standard.operators.bash import BashOperator
    from airflow.sdk import DAG

    with DAG("scripted", start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), schedule=None,
             doc_md="# Scripted\\n\\nRuns a script.\\n"):
        BashOperator(task_id="script", bash_command="set -e\\necho one\\necho two\\n")
    """
)


def test_a_multi_line_script_and_doc_are_literal_blocks(tmp_path: Path) -> None:
    (tmp_path / "scripted.py").write_text(DAG_FILE)
    rendered = rendering.render_paths([tmp_path], airflow_compat=True).manifests
    text = manifests.dump_yaml(rendered)
    assert "bash_command: |\n        set -e\n        echo one\n        echo two\n" in text, text
    assert "docMd: |\n    # Scripted\n\n    Runs a script.\n" in text, text
    assert "\\n" not in text  # no escaped line breaks left
    assert list(yaml.safe_load_all(text)) == rendered


def test_the_examples_render_to_yaml_that_loads_back_equal() -> None:
    rendered = rendering.render_paths([REPO_ROOT / "examples" / "dags"]).manifests
    assert list(yaml.safe_load_all(manifests.dump_yaml(rendered))) == rendered


@settings(max_examples=300, deadline=None)
# a key with a NEL and a line break: once written as a block, it read back with "\n" where PyYAML's
# quoting gave " " (found by a random search in a landing; CI's search is derandomized)
@example({"n#\x85F\n": "x"})
@given(
    st.dictionaries(st.text(max_size=8), st.text(max_size=40) | st.lists(st.text(max_size=20), max_size=3))
)
def test_any_text_loads_back_as_before(values: dict[str, object]) -> None:
    """Trailing spaces, tabs, leading blanks, CRs, no final newline: a block where it holds the text
    exactly, else PyYAML's quoted form; the same value as PyYAML's `safe_dump` gave (which loses a
    lone NEL, U+0085, either way)."""
    manifest = {"spec": values}
    before = yaml.safe_dump(manifest, sort_keys=True, default_flow_style=False, allow_unicode=True, width=100)
    assert list(yaml.safe_load_all(manifests.dump_yaml([manifest]))) == [yaml.safe_load(before)]
