"""What every executor offers the reconcilers: start a try, observe every try of a run, kill one.

- `controller.executors.kubernetes.KubernetesExecutor` (default): one Pod per try.
- `controller.executors.local.LocalExecutor` (Airflow's LocalExecutor): tries as local processes.

Both speak the same protocol with the task runner (`zonda.resources.invocations`), so states and results are
identical whichever runs a try.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from zonda.passes.decisions import ObservedAttempt
from zonda.resources.dagrun_models import DagRunStatus
from zonda.resources.invocations import TaskInvocation
from zonda.specs.dags import ResolvedTask


class Executor(Protocol):
    name: str

    async def observe(self, run: Mapping[str, Any]) -> dict[str, ObservedAttempt]:
        """Every attempt of this run the executor knows of, by attempt name."""

    async def launch(
        self, run: Mapping[str, Any], *, task: ResolvedTask, invocation: TaskInvocation, attempt_name: str
    ) -> str | None:
        """Start one try; starting one that exists already is a no-op (idempotent). Returns None, or
        why the try can never start (its pod refused for good): `observe` then reports it failed."""

    async def kill(self, run: Mapping[str, Any], attempt_name: str, *, uid: str | None) -> None:
        """Stop a try; `uid` is the one its attempt was observed with (`ObservedAttempt.uid`): a pod is
        deleted only at that uid (None: not observed, nothing to delete)."""

    async def delete_finished(self, run: Mapping[str, Any], attempt_name: str, *, uid: str | None) -> bool:
        """Remove a finished try's traces (its pod, at `uid` as `kill`); True when one was deleted now."""

    async def release_recorded(
        self, run: Mapping[str, Any], observed: Mapping[str, ObservedAttempt], written: DagRunStatus
    ) -> int:
        """After a pass's status write, which accounts for the attempts it `observed`: let go of those
        held for it (a task pod deleted before a status recorded its try: `zonda.passes.try_tracking`);
        how many were let go (0 for an executor that holds nothing)."""
