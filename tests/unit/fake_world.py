"""The controller's reconcilers against the in-memory API: what is real and what is fake.

Real: the reconcilers, the run index, the status writer, the work of one pass. Fake: the Kubernetes
API (`controller.kube.fake.FakeKube`, which `tests/cluster` checks against a real apiserver) and the
executor (`FakeExecutor`: records launches, reports what a test tells it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from zonda.passes.decisions import AttemptPhase, ObservedAttempt
from zonda.resources.dagrun_models import DagRunStatus, dagrun_labels
from zonda.resources.invocations import TaskInvocation, TaskOutcome, TaskResult
from zonda.resources.run_types import RunType
from zonda.specs.dags import ResolvedTask

NS = "ns"


@dataclass
class FakeExecutor:
    """Launches are recorded; what `observe` reports is set by the test."""

    name: str = "fake"
    launched: list[str] = field(default_factory=list)
    killed: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    attempts: dict[str, ObservedAttempt] = field(default_factory=dict)

    async def observe(self, run: Mapping[str, Any]) -> dict[str, ObservedAttempt]:
        return dict(self.attempts)

    async def launch(
        self, run: Mapping[str, Any], *, task: ResolvedTask, invocation: TaskInvocation, attempt_name: str
    ) -> None:
        self.launched.append(attempt_name)
        self.attempts[attempt_name] = ObservedAttempt(
            task_id=task.task_id,
            try_number=invocation.try_number,
            name=attempt_name,
            phase=AttemptPhase.PENDING,
        )

    async def kill(self, run: Mapping[str, Any], attempt_name: str, *, uid: str | None = None) -> None:
        self.killed.append(attempt_name)

    async def delete_finished(
        self, run: Mapping[str, Any], attempt_name: str, *, uid: str | None = None
    ) -> bool:
        self.deleted.append(attempt_name)
        return self.attempts.pop(attempt_name, None) is not None

    async def release_recorded(
        self, run: Mapping[str, Any], observed: Mapping[str, ObservedAttempt], written: DagRunStatus
    ) -> int:
        return 0

    def finish(self, attempt_name: str, *, ok: bool = True) -> None:
        attempt = self.attempts[attempt_name]
        self.attempts[attempt_name] = ObservedAttempt(
            task_id=attempt.task_id,
            try_number=attempt.try_number,
            name=attempt_name,
            phase=AttemptPhase.SUCCEEDED if ok else AttemptPhase.FAILED,
            result=TaskResult(outcome=TaskOutcome.SUCCESS) if ok else None,
            exit_code=0 if ok else 1,
        )


def dag_body(name: str, **spec: Any) -> dict[str, Any]:
    tasks = [
        {"id": "extract", "operator": "BashOperator", "args": {"bash_command": "true"}},
        {
            "id": "load",
            "operator": "BashOperator",
            "args": {"bash_command": "true"},
            "dependsOn": ["extract"],
        },
    ]
    return {
        "apiVersion": "zonda.dev/v1alpha1",
        "kind": "DAG",
        "metadata": {"name": name},
        "spec": {"tasks": tasks} | spec,
    }


def run_body(name: str, dag: str, *, labelled: bool = True) -> dict[str, Any]:
    """A manual DagRun as `zonda trigger` creates it (or, not `labelled`, as one made by hand)."""
    return {
        "apiVersion": "zonda.dev/v1alpha1",
        "kind": "DagRun",
        "metadata": {"name": name, "labels": dagrun_labels(dag, RunType.MANUAL) if labelled else {}},
        "spec": {"dagName": dag, "runType": "manual", "logicalDate": "2026-01-01T00:00:00+00:00"},
    }


async def settle() -> None:
    """Let the background Event posts finish: every other task of the loop, to its end.

    Not a fixed number of loop steps: a pass's posts first wait for the previous pass's, so how many
    steps they take depends on how many passes are still posting."""
    others = asyncio.all_tasks() - {asyncio.current_task()}
    if others:
        _, pending = await asyncio.wait(others, timeout=30)
        assert not pending, f"background tasks still running: {pending}"
