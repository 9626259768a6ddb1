"""History limits: which finished runs a DAG deletes (pure)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from zonda.passes.history import runs_beyond_history_limits
from zonda.resources.models import DagRunState, DagSpec
from zonda.resources.run_types import RunType
from zonda.schedules.dag_plans import RunRef

T0 = datetime(2024, 1, 1, tzinfo=UTC)


def dag(**limits: Any) -> DagSpec:
    return DagSpec.model_validate({"tasks": [{"id": "t", "operator": "EmptyOperator"}], **limits})


def run(index: int, state: DagRunState | None) -> RunRef:
    return RunRef(f"r{index}", T0 + timedelta(minutes=index), RunType.MANUAL, state, None)


RUNS = [
    run(0, DagRunState.SUCCESS), run(1, DagRunState.FAILED), run(2, DagRunState.SUCCESS),
    run(3, DagRunState.SUCCESS), run(4, DagRunState.FAILED), run(5, None), run(6, DagRunState.RUNNING),
]  # fmt: skip


def test_unset_limits_keep_everything() -> None:
    assert runs_beyond_history_limits(dag(), RUNS) == []


def test_the_newest_runs_of_each_finished_state_are_kept_and_unfinished_runs_always() -> None:
    limited = dag(successfulRunsHistoryLimit=1, failedRunsHistoryLimit=1)
    assert runs_beyond_history_limits(limited, RUNS) == ["r0", "r1", "r2"]


def test_a_zero_limit_keeps_no_finished_run_of_that_state() -> None:
    assert runs_beyond_history_limits(dag(failedRunsHistoryLimit=0), RUNS) == ["r1", "r4"]
