"""Which finished task pods a run deletes (Airflow's delete_worker_pods and
delete_worker_pods_on_failure), and what `zonda logs` says of a deleted one (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from zonda.passes.decisions import AttemptPhase, ObservedAttempt
from zonda.passes.history import deleted_pod_note, worker_pods_to_delete
from zonda.resources.models import DagRunState, DagSpec


def dag(**options: Any) -> DagSpec:
    return DagSpec.model_validate({"tasks": [{"id": "t", "operator": "EmptyOperator"}], **options})


def attempt(name: str, phase: AttemptPhase) -> ObservedAttempt:
    return ObservedAttempt(task_id=name.split("-")[0], try_number=1, name=name, phase=phase)


PODS = {
    "a-1": attempt("a-1", AttemptPhase.SUCCEEDED),
    "b-1": attempt("b-1", AttemptPhase.FAILED),
    "b-2": attempt("b-2", AttemptPhase.SUCCEEDED),
    "c-1": attempt("c-1", AttemptPhase.RUNNING),  # a stray decide stops first
    "d-1": attempt("d-1", AttemptPhase.PENDING),
}


def test_pods_are_kept_unless_the_dag_asks() -> None:
    assert worker_pods_to_delete(dag(), DagRunState.SUCCESS, PODS) == []
    assert worker_pods_to_delete(dag(deleteWorkerPodsOnFailure=True), DagRunState.FAILED, PODS) == []


@pytest.mark.parametrize("state", [None, DagRunState.QUEUED, DagRunState.RUNNING])
def test_a_run_that_has_not_finished_keeps_every_pod(state: DagRunState | None) -> None:
    assert worker_pods_to_delete(dag(deleteWorkerPods=True), state, PODS) == []


def test_a_finished_run_deletes_its_succeeded_pods_and_keeps_failed_ones_for_debugging() -> None:
    assert worker_pods_to_delete(dag(deleteWorkerPods=True), DagRunState.FAILED, PODS) == ["a-1", "b-2"]


def test_on_failure_deletes_the_failed_pods_too_but_never_one_still_alive() -> None:
    spec = dag(deleteWorkerPods=True, deleteWorkerPodsOnFailure=True)
    assert worker_pods_to_delete(spec, DagRunState.SUCCESS, PODS) == ["a-1", "b-1", "b-2"]


def test_the_log_note_names_the_option_only_once_pods_can_be_gone() -> None:
    assert deleted_pod_note(dag(), DagRunState.SUCCESS) is None
    assert deleted_pod_note(dag(deleteWorkerPods=True), DagRunState.RUNNING) is None
    note = deleted_pod_note(dag(deleteWorkerPods=True), DagRunState.SUCCESS)
    assert note is not None and "failed ones are kept" in note and "deleteWorkerPods" in note
