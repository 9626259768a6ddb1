"""`serializer="dill"` tasks run: dill is the `zonda[dill]` extra, which the zonda image installs.

Airflow: dill is a dependency of apache-airflow 2.10.5 and apache-airflow-core 3.3.2 (`Requires-Dist:
dill>=0.2.2` in their METADATA; cloudpickle is an extra), so the worker running the task has it, and
PythonVirtualenvOperator adds "dill" to the virtualenv's requirements (`_requirements_list`). Zonda does
the second already; the try's own process (which pickles the arguments) needs dill too.
"""

from __future__ import annotations

import re
import sys
import textwrap
import tomllib
from pathlib import Path

from controller.devtools import dag_runs

ROOT = Path(__file__).resolve().parents[4]

DAG_FILE = textwrap.dedent(
    """
    import pendulum
    from airflow.sdk import dag, task


    @dag(schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC"))
    def dilled():
        @task.external_python(python={python!r}, serializer="dill")
        def crossed(values):
            import sys

            return {{"dill": "dill" in sys.modules, "total": sum(values)}}

        crossed([1, 2, 3])


    dilled()
    """
)


def test_a_dill_serialized_task_crosses_its_arguments_and_result_with_dill(tmp_path: Path) -> None:
    path = tmp_path / "dilled.py"
    path.write_text(DAG_FILE.format(python=sys.executable))
    outcome = dag_runs.test_file(path, airflow_compat=True)
    assert outcome.task_states == {"crossed": "success"}
    assert outcome.xcoms["crossed"] == {"dill": True, "total": 6}  # the script read its input with dill


def test_the_image_installs_the_dill_extra() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert [re.split(r"[<>=]", r)[0] for r in extras["dill"]] == ["dill"]
    final = (ROOT / "Dockerfile").read_text().rsplit("\nFROM ", 1)[1]  # the final stage
    assert re.search(r"pip install --no-index --find-links=/wheels \"zonda\[dill\]\"", final), final
