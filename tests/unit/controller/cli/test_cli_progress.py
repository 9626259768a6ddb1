"""How far a run is, as `zonda trigger --wait` shows it (pure), and the bar as it prints off a terminal."""

from __future__ import annotations

from typing import Any

import pytest

from controller.cli.follow import run_progress
from controller.cli.progress import Step, progress_bar


def run(state: str | None, tis: dict[str, str] | None, tasks: int | None) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if state is not None:
        status["state"] = state
    if tis is not None:
        status["taskInstances"] = {task: {"state": s} for task, s in tis.items()}
    if tasks is not None:
        status["dagSpec"] = {"tasks": [{"id": f"t{i}"} for i in range(tasks)]}
    return {"status": status}


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        pytest.param(run(None, None, None), Step(0, None, "r: queued, 0 running", False),
                     id="a run the controller has not started has no total yet"),
        pytest.param(run("running", {"a": "success", "b": "running"}, 3),
                     Step(1, 3, "r: running, 1 running", False),
                     id="tasks with no task instance yet count in the total"),
        pytest.param(run("failed", {"a": "failed", "b": "upstream_failed", "c": "skipped"}, 3),
                     Step(3, 3, "r: failed, 0 running", True),
                     id="every finished state counts as done, and a failed run is the end"),
        pytest.param(run("running", {"a": "up_for_retry", "b": "deferred"}, 2),
                     Step(0, 2, "r: running, 0 running", False),
                     id="a task waiting to retry or deferred is not finished"),
    ],
)  # fmt: skip
def test_run_progress_counts_finished_task_instances(body: dict[str, Any], expected: Step) -> None:
    assert run_progress("r", body) == expected


def test_off_a_terminal_the_bar_prints_its_last_state_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    with progress_bar() as progress:
        bar = progress.add_task("applying DAGs", total=3)
        for _ in range(3):
            progress.advance(bar)
    captured = capsys.readouterr()
    assert captured.out == "" and "applying DAGs" in captured.err and "3/3" in captured.err
