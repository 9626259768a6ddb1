"""Reconcilers: gather from the API, call the pure core, act once. No scheduling logic lives here.

- `DagReconciler` (dags.py): `zonda.plans.plan_dag` decides which runs are due and the DAG's status.
- `RunReconciler` (runs.py): `zonda.plans.start_run` / `observe`, then `zonda.decisions.decide`.
- `Reconcilers` below is what the kopf process holds: both, sharing one status writer and run index.

Each pass reads the clock once and passes `now` to the core. Invariant: the controller writes only
`status` (and creates/deletes its own children).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from controller.executors.base import Executor
from controller.kube import Kube
from controller.reconcilers.common import StatusWriter
from controller.reconcilers.dags import DagReconciler
from controller.reconcilers.index import RunIndex
from controller.reconcilers.runs import RunReconciler
from zonda.plans import FINISHED_RUN_STATES

__all__ = ["FINISHED_RUN_STATES", "Reconcilers"]


class Reconcilers:
    """The DAG and DagRun reconcilers of one controller process."""

    def __init__(
        self,
        kube: Kube,
        executor: Executor,
        *,
        trigger_shards: int = 16,
        on_run_state_change: Callable[[str, str, str, str | None], None] | None = None,
    ) -> None:
        self.writer = StatusWriter(kube)
        self.index = RunIndex()
        self.dags = DagReconciler(kube, self.writer)
        self.runs = RunReconciler(
            kube,
            executor,
            self.writer,
            self.index,
            trigger_shards=trigger_shards,
            on_run_state_change=on_run_state_change,
        )

    async def reconcile_dag(self, namespace: str, name: str) -> datetime | None:
        return await self.dags.reconcile(namespace, name)

    async def reconcile_run(self, namespace: str, name: str) -> datetime | None:
        return await self.runs.reconcile(namespace, name)

    def is_own_write(self, plural: str, namespace: str, name: str, resource_version: str | None) -> bool:
        return self.writer.is_own_write(plural, namespace, name, resource_version)
