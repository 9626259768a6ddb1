"""Airflow 2.10.5's own example DAGs, unchanged, render with the structure Airflow gave them.

The files are vendored in tests/airflow_examples/af2/dags (Apache-2.0, with Airflow's NOTICE) and the
expected structure and outcomes come from Airflow itself: `hack/airflow_reference/af2_examples.py`
ran each DAG's `dag.test()` under apache-airflow==2.10.5 into reference.json.
"""

from __future__ import annotations

import functools
from typing import Any

import pytest

from tests.airflow_examples import compare

#: Refused by design (issue 20 allows it), each with the message the render gives.
REFUSED = {
    "example_subdag_operator": "airflow.operators.subdag is not supported by Zonda",
    "example_subdag_operator.section-1": "a SubDAG: its parent's file is refused",
    "example_subdag_operator.section-2": "a SubDAG: its parent's file is refused",
}
#: `zonda dags test` outcomes checked here: quick and independent of the network and the clock.
OUTCOMES_CHECKED = [
    "example_skip_dag",
    "example_short_circuit_operator",
    "example_setup_teardown",
    "latest_only",
    "latest_only_with_trigger",
    # its template file sql/test.sql is not in Airflow 2.10.5's wheel: Airflow's task fails with
    # TemplateNotFound, and so does Zonda's try (the render reads template files: docs/authoring.md)
    "tutorial_taskflow_templates",
]

NON_DATASET = compare.non_dataset_dags()
DATASET = compare.dataset_dags()


@functools.cache
def rendered() -> dict[str, dict[str, Any]]:
    return compare.render_corpus()


def test_the_reference_is_airflow_2_10_5s_and_covers_every_file() -> None:
    reference = compare.reference()
    assert reference["airflow"] == "2.10.5"
    files = {entry["file"] for entry in reference["dags"].values()}
    assert "example_bash_operator.py" in files and len(NON_DATASET) >= 40


@pytest.mark.parametrize("dag_id", sorted(set(NON_DATASET) - set(REFUSED)))
def test_structure_is_airflows(dag_id: str) -> None:
    problems = compare.structure_differences(
        compare.airflow_structure(NON_DATASET[dag_id]), rendered().get(dag_id)
    )
    assert problems == []


def test_the_dataset_corpus_is_airflows_23_dags() -> None:
    assert len(DATASET) == 23
    files = {entry["file"] for entry in DATASET.values()}
    assert {"example_datasets.py", "example_dataset_alias.py", "example_inlet_event_extra.py"} <= files


@pytest.mark.parametrize("dag_id", sorted(DATASET))
def test_dataset_dags_structure_schedule_outlets_and_inlets_are_airflows(dag_id: str) -> None:
    """Airflow 2.10.5's dataset example DAGs: tasks as Airflow, and the schedule expression (as its
    `as_expression()`), how the DAG is scheduled (datasets, datasets or time, time, nothing), each
    task's outlets and inlets, as Airflow loaded them."""
    got = rendered().get(dag_id)
    assert compare.structure_differences(compare.airflow_structure(DATASET[dag_id]), got) == []
    assert compare.dataset_differences(compare.airflow_datasets(DATASET[dag_id]), got) == []


def test_what_zonda_refuses_it_names() -> None:
    errors = {entry.get("file"): entry["error"] for entry in rendered().values() if "error" in entry}
    assert REFUSED["example_subdag_operator"] in errors["example_subdag_operator.py"]


@pytest.mark.parametrize("dag_id", OUTCOMES_CHECKED)
def test_dags_test_outcome_is_airflows(dag_id: str) -> None:
    entry = NON_DATASET[dag_id]
    got = compare.run_one(compare.AF2 / "dags" / entry["file"], dag_id, compare.reference()["logical_date"])
    assert compare.outcome_differences(entry["test"], got) == []


def test_week_days_read_back_from_a_manifest() -> None:
    """A manifest carries `{WeekDay.SATURDAY, WeekDay.SUNDAY}` as [6, 7]: the runner reads them back."""
    from zonda.utils.weekday import WeekDay

    assert WeekDay.validate_week_day([6, 7]) == {WeekDay.SATURDAY, WeekDay.SUNDAY}
    assert WeekDay.validate_week_day("monday") == {WeekDay.MONDAY}
    with pytest.raises(AttributeError, match="Invalid Week Day"):
        WeekDay.validate_week_day("Funday")
