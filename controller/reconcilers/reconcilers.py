"""Reconcilers: gather from the API, call the pure core, act once. No scheduling logic lives here.

- `DagReconciler` (dags.py): `zonda.schedules.dag_plans.plan_dag` decides which runs are due and the DAG's
status.
- `RunReconciler` (runs.py): `zonda.passes.plans.start_run`, then `zonda.passes.compose.compose_pass`.
- `BackfillReconciler` (backfills.py): `zonda.schedules.backfills.plan_backfill` decides which backfill runs
to create.
- `PoolReconciler` (pools.py): a Pool's status; pools.py also holds the admission critical section.
- `AssetReconciler` (assets.py): an Asset's status and its bounded event history.
- `Reconcilers` below is what the kopf process holds: all of them, sharing one status writer and run
index, each behind the one get-or-gone head (`controller.reconcilers.protocol`).

Each pass reads the clock once and passes `now` to the core. Invariant: the controller writes only
`status` (and creates/deletes its own children).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from controller.executors.base import Executor
from controller.kube import KubeApi
from controller.reconcilers.assets import AssetReconciler
from controller.reconcilers.backfills import BackfillReconciler
from controller.reconcilers.common import StatusWriter, utcnow
from controller.reconcilers.dags import DagReconciler
from controller.reconcilers.index import RunIndex
from controller.reconcilers.pools import PoolReconciler
from controller.reconcilers.protocol import AsReconciler, KeyReconciler
from controller.reconcilers.runs import RunReconciler
from zonda.passes.limits import DEFAULT_LIMITS, PassLimits
from zonda.resources import conditions
from zonda.resources.models import Condition
from zonda.resources.states import FINISHED_RUN_STATES

__all__ = ["FINISHED_RUN_STATES", "Reconcilers"]


class Reconcilers:
    """The reconcilers of one controller process, by work-queue kind."""

    def __init__(
        self,
        kube: KubeApi,
        executor: Executor,
        *,
        trigger_shards: int = 16,
        limits: PassLimits = DEFAULT_LIMITS,
        on_run_state_change: Callable[[str, str, str, str | None], None] | None = None,
        enqueue: Callable[[str, str, str], None] | None = None,
    ) -> None:
        self.kube = kube
        self.writer = StatusWriter(kube)
        self.index = RunIndex()
        self.dags = DagReconciler(kube, self.writer)
        self.backfills = BackfillReconciler(kube, self.writer)
        self.runs = RunReconciler(
            kube,
            executor,
            self.writer,
            self.index,
            trigger_shards=trigger_shards,
            limits=limits,
            on_run_state_change=on_run_state_change,
            enqueue=enqueue,
        )
        self.pools = PoolReconciler(kube, self.writer, self.runs.admission)
        self.assets = AssetReconciler(kube, self.writer, trigger_shards=trigger_shards)

        #: What the work queue's kinds are reconciled by: one get-or-gone head for the four object
        #: reconcilers (`controller.reconcilers.protocol.AsReconciler`); assets are keyed by URI.
        self.by_kind: dict[str, KeyReconciler] = {
            "dag": AsReconciler(kube, self.dags),
            "run": AsReconciler(kube, self.runs),
            "backfill": AsReconciler(kube, self.backfills),
            "pool": AsReconciler(kube, self.pools),
            "asset": self.assets.reconcile,
        }

    async def reconcile(self, kind: str, namespace: str, name: str) -> datetime | None:
        """One pass of the object a work-queue key names; when to look again (None: on a change)."""
        return await self.by_kind[kind](namespace, name)

    def is_own_write(self, plural: str, namespace: str, name: str, resource_version: str | None) -> bool:
        return self.writer.is_own_write(plural, namespace, name, resource_version)

    async def report_failing(
        self, plural: str, namespace: str, name: str, failures: int, error: BaseException
    ) -> None:
        """A reconcile keeps failing: say so on the object (condition `Reconciled=False`, one Event)."""
        message = (
            f"{failures} reconciles in a row failed, retrying with backoff: {type(error).__name__}: {error}"
        )
        await self._set_reconciled(plural, namespace, name, ok=False, message=message)

    async def report_recovered(self, plural: str, namespace: str, name: str) -> None:
        await self._set_reconciled(plural, namespace, name, ok=True, message="")

    async def _set_reconciled(
        self, plural: str, namespace: str, name: str, *, ok: bool, message: str
    ) -> None:
        obj = await self.kube.get_custom(plural, namespace, name)
        if obj is None:
            return
        status = dict(obj.get("status") or {})
        old = [Condition.model_validate(c) for c in status.get("conditions") or []]
        reason = "Reconciled" if ok else "ReconcileFailing"
        new = conditions.set_condition(
            old, type="Reconciled", status=ok, reason=reason, message=message, now=utcnow()
        )
        if not conditions.condition_changed(old, new, "Reconciled"):
            return
        if ok and not any(c.type == "Reconciled" for c in old):
            return  # never reported failing: nothing to take back
        status["conditions"] = [c.to_wire() for c in new]
        await self.writer.write_status(plural, obj, obj.get("status") or {}, status)
        await self.kube.emit_event(
            obj, reason=reason, message=message or "reconciles succeed again", warning=not ok
        )
