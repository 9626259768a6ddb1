"""Every DagRun Zonda creates carries its DAG's label, which `include_prior_dates` selects runs by."""

from __future__ import annotations

from datetime import UTC, datetime

from zonda.resources.dagrun_models import dag_label_problem, dagrun_labels, manual_dagrun
from zonda.resources.run_types import RunType


def test_a_manual_run_is_labelled_with_its_dag_and_run_type() -> None:
    body = manual_dagrun("etl-manual-1", "ns", "etl", datetime(2026, 1, 1, tzinfo=UTC), {})
    assert body["metadata"]["labels"] == {"zonda.dev/dag": "etl", "zonda.dev/run-type": "manual"}
    assert dag_label_problem(body["metadata"], "etl") is None


def test_a_long_dag_name_is_cut_to_a_label_value_and_still_matches() -> None:
    name = "d" * 100
    labels = dagrun_labels(name, RunType.SCHEDULED)
    assert labels["zonda.dev/dag"] == "d" * 63
    assert dag_label_problem({"labels": labels}, name) is None


def test_a_run_without_the_label_or_with_another_dags_is_a_problem_named_with_the_label() -> None:
    problem = dag_label_problem({}, "etl")
    assert problem is not None and "zonda.dev/dag=etl" in problem
    assert dag_label_problem({"labels": {"zonda.dev/dag": "other"}}, "etl") is not None
