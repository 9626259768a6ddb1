"""The example DAGs exist twice, as YAML and as Python DAG files, and the Python renders to the YAML.

Compared as parsed `DagSpec`s (field order and YAML spelling aside) plus the resource name; the
rendered manifest also carries labels and annotations the hand-written YAML does not need.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tests.paths import REPO_ROOT
from zonda.authoring import rendering
from zonda.specs.dags import parse_dag_spec

EXAMPLES = REPO_ROOT / "examples" / "dags"


def yaml_dags() -> dict[str, dict[str, Any]]:
    return {
        document["metadata"]["name"]: document
        for path in sorted(EXAMPLES.glob("*.yaml"))
        for document in yaml.safe_load_all(path.read_text())
        if document and document.get("kind") == "DAG"
    }


@pytest.fixture(scope="module")
def rendered() -> dict[str, dict[str, Any]]:
    report = rendering.render_paths([EXAMPLES])
    assert not report.failed, (report.file_errors, [d.errors for d in report.dags])
    return {manifest["metadata"]["name"]: manifest for manifest in report.manifests}


def test_every_yaml_example_has_a_python_twin(rendered: dict[str, dict[str, Any]]) -> None:
    assert sorted(rendered) == sorted(yaml_dags())


@pytest.mark.parametrize("name", sorted(yaml_dags()))
def test_the_python_twin_renders_to_the_yaml(name: str, rendered: dict[str, dict[str, Any]]) -> None:
    written = parse_dag_spec(yaml_dags()[name]["spec"])
    assert parse_dag_spec(rendered[name]["spec"]) == written


def test_the_readme_shows_the_python_twin_of_its_yaml() -> None:
    readme = (EXAMPLES.parents[1] / "README.md").read_text()
    block = readme.split("```python\n", 1)[1].split("```", 1)[0]
    source = (EXAMPLES / "example_scheduled.py").read_text()
    assert source.endswith(block) and source[: -len(block)].rstrip().endswith('"""')
