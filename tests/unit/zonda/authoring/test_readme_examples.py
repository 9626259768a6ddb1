"""The README's YAML blocks are the example files `make up` applies, line for line, and valid DAGs.

The cluster tier applies the same blocks to a real apiserver (tests/cluster/test_first_hour.py).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from tests.paths import REPO_ROOT
from zonda.resources.models import DagSpec

REPO = REPO_ROOT
EXAMPLES = REPO / "examples" / "dags"


def readme_yaml_blocks(text: str) -> list[str]:
    return re.findall(r"^```yaml\n(.*?)^```", text, flags=re.S | re.M)


def without_leading_comments(text: str) -> str:
    lines = text.splitlines()
    while lines and lines[0].startswith("#"):
        lines.pop(0)
    return "\n".join(lines) + "\n"


def example_named(name: str) -> Path:
    matches = [
        p
        for p in EXAMPLES.glob("*.yaml")
        if (yaml.safe_load(p.read_text()) or {}).get("metadata", {}).get("name") == name
    ]
    assert len(matches) == 1, f"no single examples/dags file defines DAG {name!r}: {matches}"
    return matches[0]


def test_every_readme_dag_is_an_example_file_line_for_line() -> None:
    blocks = readme_yaml_blocks((REPO / "README.md").read_text())
    dags: list[dict[str, Any]] = [yaml.safe_load(b) for b in blocks]
    assert [d["kind"] for d in dags].count("DAG") >= 1, "the README shows a DAG"
    for block, dag in zip(blocks, dags, strict=True):
        if dag["kind"] != "DAG":
            continue
        path = example_named(dag["metadata"]["name"])
        assert block == without_leading_comments(path.read_text()), f"README block differs from {path}"
        DagSpec.model_validate(dag["spec"])


def test_the_main_job_has_a_scheduled_example_without_catchup() -> None:
    """`zonda up` shows scheduling: a DAG due every minute that does not backfill since startDate."""
    from controller.cli.main import up

    defaults = next(p.default for p in up.params if p.name == "examples")
    specs = [yaml.safe_load((EXAMPLES / f"{name}.yaml").read_text())["spec"] for name in defaults]
    scheduled = [s for s in specs if s.get("schedule")]
    assert scheduled == [s for s in specs if s.get("schedule") == "* * * * *" and s.get("catchup") is False]
    assert scheduled and any(not s.get("schedule") for s in specs), "scheduled and manual runs side by side"
