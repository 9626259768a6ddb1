"""Triggers that wait on other DagRuns (Airflow's `airflow.triggers.external_task`).

- `DagStateTrigger`: a deferrable `TriggerDagRunOperator` waiting for the run it created to reach one
  of `states`. It reads that one run by name, so `ObjectConditionTrigger` (one value of one field)
  would do but for the list of states; the event carries the state the run reached.
- `WorkflowTrigger`: a deferrable `ExternalTaskSensor`. The external run is found by logical date,
  not by name, so it lists the namespace's DagRuns and applies the sensor's own verdict
  (`zonda.schedules.dag_dependencies.external_verdict`) until it is no longer "waiting".

Both poll through the triggerer's API connection (`KubeTrigger`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from datetime import datetime
from typing import Any

from controller.kube import DAGRUNS, KubeError
from controller.providers.kubernetes.triggers import KubeTrigger
from zonda.resources.wire import parse_time
from zonda.schedules.dag_dependencies import ExternalRun, ExternalWait, Verdict, external_verdict
from zonda.triggers import TriggerEvent


class DagStateTrigger(KubeTrigger):
    """Fire once DagRun `run_name` is in one of `states`; the event is ``{"run_name", "state"}``."""

    def __init__(
        self, namespace: str, dag_name: str, run_name: str, states: Sequence[str], poll_interval: float = 5.0
    ) -> None:
        super().__init__()
        self.namespace = namespace
        self.dag_name = dag_name
        self.run_name = run_name
        self.states = list(states)
        self.poll_interval = float(poll_interval)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            "controller.providers.kubernetes.dagrun_triggers.DagStateTrigger",
            {
                "namespace": self.namespace,
                "dag_name": self.dag_name,
                "run_name": self.run_name,
                "states": self.states,
                "poll_interval": self.poll_interval,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        kube = await self.kube()
        while True:
            try:
                body = await kube.get_custom(DAGRUNS, self.namespace, self.run_name)
            except KubeError as error:
                if not self.transient(error, f"DagRun {self.run_name}"):
                    raise
                body = None
            state = ((body or {}).get("status") or {}).get("state")
            if state in self.states:
                yield TriggerEvent({"dag_name": self.dag_name, "run_name": self.run_name, "state": state})
                return
            await asyncio.sleep(self.poll_interval)


class WorkflowTrigger(KubeTrigger):
    """Fire once the external task instances (or run) are in an allowed, skipped or failed state.

    The event is ``{"status": "success" | "skipped" | "failed", "message": ...}``, as Airflow's.
    """

    def __init__(
        self,
        namespace: str,
        external_dag_name: str,
        logical_dates: Sequence[datetime | str],
        external_task_ids: Sequence[str] | None = None,
        external_task_group_id: str | None = None,
        allowed_states: Sequence[str] = ("success",),
        skipped_states: Sequence[str] = (),
        failed_states: Sequence[str] = (),
        poll_interval: float = 5.0,
    ) -> None:
        super().__init__()
        self.namespace = namespace
        self.wait = ExternalWait(
            dag_name=external_dag_name,
            logical_dates=tuple(d for d in (parse_time(d) for d in logical_dates) if d is not None),
            task_ids=tuple(external_task_ids) if external_task_ids else None,
            task_group_id=external_task_group_id,
            allowed_states=tuple(allowed_states),
            skipped_states=tuple(skipped_states),
            failed_states=tuple(failed_states),
        )
        self.poll_interval = float(poll_interval)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        wait = self.wait
        return (
            "controller.providers.kubernetes.dagrun_triggers.WorkflowTrigger",
            {
                "namespace": self.namespace,
                "external_dag_name": wait.dag_name,
                "logical_dates": [d.isoformat() for d in wait.logical_dates],
                "external_task_ids": list(wait.task_ids) if wait.task_ids else None,
                "external_task_group_id": wait.task_group_id,
                "allowed_states": list(wait.allowed_states),
                "skipped_states": list(wait.skipped_states),
                "failed_states": list(wait.failed_states),
                "poll_interval": self.poll_interval,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        kube = await self.kube()
        while True:
            try:
                bodies = await kube.list_custom(DAGRUNS, self.namespace)
            except KubeError as error:
                if not self.transient(error, f"the DagRuns of {self.wait.dag_name}"):
                    raise
                bodies = []
            verdict, message = external_verdict(self.wait, [ExternalRun.from_body(b) for b in bodies])
            if verdict is not Verdict.WAITING:
                yield TriggerEvent({"status": verdict.value, "message": message})
                return
            self.log.info("%s", message)
            await asyncio.sleep(self.poll_interval)
