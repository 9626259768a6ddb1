"""Every public name of Airflow 3's `airflow.sdk` and of the standard provider's modules is provided by
`--airflow-compat` or refused with its own reason, and docs/authoring.md names each refused one.

The names are Airflow's own (`tests/airflow_examples/af3/names.json`, written in Airflow's venv by
`hack/airflow_reference/af3_reference.py --names`), so a name Airflow adds shows up here as unlisted.
"""

from __future__ import annotations

import importlib
import json
import textwrap
from pathlib import Path

import pytest

from tests.airflow_examples import compare
from zonda.authoring import compat

DOCS = Path(__file__).resolve().parents[4] / "docs" / "authoring.md"
NAMES: dict[str, list[str]] = json.loads((compare.AF3 / "names.json").read_text())["names"]
#: What the generic refusal says: a name refused so has no reason of its own.
GENERIC = tuple(compat.ALTERNATIVES[key] for key in ("airflow", "airflow.sdk", "airflow.providers.standard"))


def _provided() -> tuple[set[str], dict[str, str]]:
    """(names Zonda provides, refused name -> the message its import gets)."""
    provided: set[str] = set()
    refused: dict[str, str] = {}
    with compat.airflow_imports(enabled=True):
        for module_name, names in NAMES.items():
            try:
                module = importlib.import_module(module_name)
            except ImportError as error:
                refused[module_name] = str(error)
                continue
            for name in names:
                if hasattr(module, name):
                    provided.add(f"{module_name}.{name}")
                else:
                    refused[f"{module_name}.{name}"] = compat.unsupported_message(module_name, name)
    return provided, refused


PROVIDED, REFUSED = _provided()


def test_airflow_names_come_from_airflow_3_3_2_and_most_are_provided() -> None:
    assert json.loads((compare.AF3 / "names.json").read_text())["airflow_version"] == "3.3.2"
    assert {"airflow.sdk.dag", "airflow.sdk.chain_linear", "airflow.sdk.MultipleCronTriggerTimetable"} <= (
        PROVIDED
    )
    assert "airflow.providers.standard.sensors.time_delta.WaitSensor" in PROVIDED
    assert "airflow.providers.standard.decorators.bash.bash_task" in PROVIDED
    print(f"\nprovided {len(PROVIDED)}, refused {len(REFUSED)}: {sorted(REFUSED)}")
    assert len(PROVIDED) > 4 * len(REFUSED)


@pytest.mark.parametrize("refused", sorted(REFUSED))
def test_a_refused_name_says_why_and_what_to_use_and_the_docs_name_it(refused: str) -> None:
    message = REFUSED[refused]
    assert message.startswith(f"{refused} is not supported by Zonda: ")
    assert not message.endswith(GENERIC), "give it a reason of its own in compat.ALTERNATIVES"
    assert refused.rsplit(".", 1)[-1] in DOCS.read_text(), "list it in docs/authoring.md's table"


def test_a_refused_import_names_its_line(tmp_path: Path) -> None:
    source = textwrap.dedent(
        """
        from airflow.sdk import DAG
        from airflow.sdk import DeadlineAlert
        from airflow.providers.standard.operators.smooth import SmoothOperator
        """
    )
    assert sorted(compat.unsupported_imports(source)) == [
        f"line 3: {compat.unsupported_message('airflow.sdk', 'DeadlineAlert')}",
        f"line 4: {compat.unsupported_message('airflow.providers.standard.operators.smooth')}",
    ]
