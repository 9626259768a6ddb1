"""Airflow's `TriggerDagRunOperator` on the Kubernetes API: create (or reset) a DagRun of another DAG.

The create happens from the task's own try (the task pod's ServiceAccount, or the local executor's
kubeconfig): the chart's `taskPods.rbac.dagDependencies` grants the task pods' ServiceAccount exactly
create/get/list/watch on dagruns, get on dags and update on dagruns/status (`reset_dag_run` clears a
run); see docs/decisions.md for why the create happens here rather than in the controller. With
``deferrable=True`` the wait for completion moves to the triggerer (`dagrun_triggers.DagStateTrigger`)
and the try's Pod is freed. The module Airflow's `airflow.operators.trigger_dagrun` maps to.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from controller.kube import DAGRUNS, DAGS, AlreadyExists, Kube, KubeApi
from controller.operations import run_actions
from controller.providers.kubernetes.dagrun_triggers import DagStateTrigger
from controller.providers.kubernetes.sensors import run_namespace
from zonda.actions import clear_and_mark
from zonda.context import Context
from zonda.exceptions import AirflowException, AirflowSkipException
from zonda.operators.base import BaseOperator
from zonda.resources import names
from zonda.resources.dagrun_models import DagRunStatus
from zonda.resources.wire import parse_time
from zonda.schedules import dag_dependencies
from zonda.schedules.dag_dependencies import Parent
from zonda.sensors import base as sensor_base
from zonda.specs.dags import ResolvedDag

#: Airflow's XCom keys for the triggered run.
XCOM_RUN_ID = "trigger_run_id"
XCOM_LOGICAL_DATE_ISO = "trigger_logical_date_iso"


class _NotSet:
    """An argument not passed (Airflow's `ArgNotSet`): Airflow 3's operator tells it from None. One
    instance, kept by copies and pickles (a rendered or mapped operator is a copy)."""

    def __repr__(self) -> str:
        return "NOTSET"

    def __copy__(self) -> _NotSet:
        return self

    def __deepcopy__(self, memo: object) -> _NotSet:
        return self

    def __reduce__(self) -> str:
        return "NOTSET"


NOTSET: Any = _NotSet()


def _moment(name: str, value: Any) -> datetime | None:
    """A datetime or ISO 8601 argument, None when not set or None."""
    if value is NOTSET or value is None:
        return None
    if isinstance(value, datetime):
        return parse_time(value)
    try:
        return parse_time(str(value))
    except ValueError as exc:
        raise AirflowException(f"{name}: {exc}") from None


class DagRunAlreadyExists(AirflowException):
    """Airflow's error when the run to trigger exists already and was made by someone else."""


class DagNotFound(AirflowException):
    """The DAG to trigger or wait for has no DAG resource in the namespace."""


class TriggerDagRunOperator(BaseOperator):
    """Trigger a DagRun of `trigger_dag_id` (Airflow's `TriggerDagRunOperator`).

    :param trigger_dag_id: the DAG to trigger (its dag_id, or the DAG resource's name). (templated)
    :param trigger_run_id: the new run's name; by default one derived from this run and task, so a
        retry finds the run an earlier try created. (templated)
    :param conf: the run's conf. (templated)
    :param logical_date: the run's logical date (datetime or ISO string); now by default. (templated)
        In an Airflow 3 DAG, ``logical_date=None`` (or `run_after` without `logical_date`) makes a run
        with no logical date, as the standard provider's operator does on Airflow 3.
    :param run_after: Airflow 3's: when the triggered run may start (now by default).
    :param reset_dag_run: if the run exists, clear it so it runs again (Airflow's backfill-friendly
        option) instead of failing with `DagRunAlreadyExists`.
    :param wait_for_completion: wait until the run is in `allowed_states` or `failed_states`.
    :param poke_interval: seconds between checks while waiting.
    :param allowed_states: run states that end the wait successfully (default ``["success"]``).
    :param failed_states: run states that fail the task (default ``["failed"]``; looked at before
        `allowed_states`, so a state in both fails it, as Airflow).
    :param skip_when_already_exists: skip the task if someone else's run of that name exists.
    :param deferrable: wait in the triggerer (`DagStateTrigger`), freeing the try's Pod.
    """

    template_fields: Sequence[str] = ("trigger_dag_id", "trigger_run_id", "logical_date", "conf")
    ui_color = "#ffefeb"

    def __init__(
        self,
        *,
        trigger_dag_id: str,
        trigger_run_id: str | None = None,
        conf: dict[str, Any] | None = None,
        logical_date: str | datetime | _NotSet | None = NOTSET,
        run_after: str | datetime | _NotSet | None = NOTSET,
        execution_date: str | datetime | None = None,
        reset_dag_run: bool = False,
        wait_for_completion: bool = False,
        poke_interval: float = 60,
        allowed_states: list[str] | None = None,
        failed_states: list[str] | None = None,
        skip_when_already_exists: bool = False,
        deferrable: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if logical_date not in (None, NOTSET) and execution_date is not None:
            raise ValueError("Pass `logical_date` or its deprecated name `execution_date`, not both")
        self.trigger_dag_id = trigger_dag_id
        self.trigger_run_id = trigger_run_id
        self.conf = conf or {}
        self.logical_date = logical_date if execution_date is None else execution_date
        self.run_after = run_after
        self.reset_dag_run = reset_dag_run
        self.wait_for_completion = wait_for_completion
        self.poke_interval = float(poke_interval)
        self.allowed_states = list(allowed_states or dag_dependencies.DEFAULT_ALLOWED_STATES)
        # Airflow keeps an empty list (no state fails the task), and lets a state be in both lists
        self.failed_states = list(
            dag_dependencies.DEFAULT_FAILED_STATES if failed_states is None else failed_states
        )
        self.skip_when_already_exists = skip_when_already_exists
        self.deferrable = deferrable
        try:
            dag_dependencies.check_states(
                self.allowed_states, self.failed_states, valid=dag_dependencies.RUN_STATES, exclusive=False
            )
        except dag_dependencies.DagDependencyError as exc:
            raise AirflowException(str(exc)) from None

    def execute(self, context: Context) -> Any:
        namespace = run_namespace(context)
        dag_name = dag_dependencies.external_dag_name(str(self.trigger_dag_id))
        # the DagRun object's name (labels, the child's name), not Airflow's run id
        run_name = getattr(context["dag_run"], "name", None) or context["run_id"]
        parent = Parent(dag_name=context["dag"].dag_id, run_name=run_name, task_id=str(self.task_id))
        now = sensor_base.utcnow()
        airflow3 = getattr(context["dag_run"], "airflow_version", None) == "3"
        logical_date = self._logical_date(now, airflow3=airflow3)
        run_after = _moment("run_after", self.run_after) if airflow3 else None
        map_index = int(getattr(context["ti"], "map_index", -1))
        run = asyncio.run(
            self._trigger(namespace, dag_name, parent, logical_date, map_index, run_after=run_after or now)
        )
        run_name = run["metadata"]["name"]
        logical = run["spec"].get("logicalDate") or (logical_date.isoformat() if logical_date else None)
        context["ti"].xcom_push(key=XCOM_RUN_ID, value=run_name)
        if logical is not None:  # a run without a logical date has none to push
            context["ti"].xcom_push(key=XCOM_LOGICAL_DATE_ISO, value=logical)
        if not self.wait_for_completion:
            return None
        if self.deferrable:
            self.defer(
                trigger=DagStateTrigger(
                    namespace=namespace,
                    dag_name=dag_name,
                    run_name=run_name,
                    states=[*self.allowed_states, *self.failed_states],
                    poll_interval=self.poke_interval,
                ),
                method_name="execute_complete",
            )
        while True:
            self.log.info(
                "Waiting for %s on %s to become allowed state %s ...", dag_name, run_name, self.allowed_states
            )
            sensor_base.sleep(self.poke_interval)
            state = asyncio.run(_run_state(namespace, run_name))
            if self._finished(dag_name, state):
                return None

    def execute_complete(self, context: Context, event: Any = None) -> None:
        """The `DagStateTrigger` fired: the run is in one of the awaited states. The XComs pushed before
        deferring (`trigger_run_id`, `trigger_logical_date_iso`) are kept, as in Airflow."""
        state = (event or {}).get("state")
        if not self._finished((event or {}).get("dag_name", self.trigger_dag_id), state):
            raise AirflowException(
                f"{self.trigger_dag_id} return {state} which is not in {self.allowed_states}"
            )

    def _finished(self, dag_name: str, state: str | None) -> bool:
        if state in self.failed_states:
            raise AirflowException(f"{dag_name} failed with failed states {state}")
        if state in self.allowed_states:
            self.log.info("%s finished with allowed state %s", dag_name, state)
            return True
        return False

    def _logical_date(self, now: datetime, *, airflow3: bool) -> datetime | None:
        """The triggered run's logical date. Airflow 2.10 (`TriggerDagRunOperator.execute`): the one
        given, else the time of triggering. The standard provider on Airflow 3 (1.21's `execute`): not
        given, the time of triggering unless `run_after` is; given as None, none."""
        if self.logical_date is NOTSET:
            return None if airflow3 and self.run_after is not NOTSET else now
        if self.logical_date is None:
            return None if airflow3 else now
        return _moment("logical_date", self.logical_date) or now

    async def _trigger(
        self,
        namespace: str,
        dag_name: str,
        parent: Parent,
        logical_date: datetime | None,
        map_index: int,
        *,
        run_after: datetime | None = None,
    ) -> dict[str, Any]:
        async with await Kube.connect(component="zonda-task") as kube:
            return await self.create_or_adopt(
                kube, namespace, dag_name, parent, logical_date, map_index, run_after=run_after
            )

    async def create_or_adopt(
        self,
        kube: KubeApi,
        namespace: str,
        dag_name: str,
        parent: Parent,
        logical_date: datetime | None,
        map_index: int = -1,
        *,
        run_after: datetime | None = None,
    ) -> dict[str, Any]:
        """Create the child run, or take the one an earlier try created (or reset, skip, refuse).

        Without `logical_date` the run has none if its DAG is an Airflow 3 one (`zonda.passes.plans.
        run_dates`); a retry of the try finds it by its name, which does not depend on the time.
        Returns the run's body as it was before any reset.
        """
        name = str(self.trigger_run_id or "") or names.triggered_run_name(
            dag_name, parent.run_name, parent.task_id, map_index
        )
        body = dag_dependencies.triggered_dagrun(
            name=name,
            namespace=namespace,
            dag_name=dag_name,
            logical_date=logical_date,
            conf=dict(self.conf),
            parent=parent,
            run_after=run_after,
        )
        if await kube.get_custom(DAGS, namespace, dag_name) is None:
            raise DagNotFound(f"Dag id {self.trigger_dag_id} not found: no DAG {dag_name} in {namespace}")
        try:
            created = await kube.create_custom(DAGRUNS, namespace, body)
            when = logical_date.isoformat() if logical_date else "no logical date"
            self.log.info("Triggered DagRun %s of %s at %s", name, dag_name, when)
            return created
        except AlreadyExists:
            existing = await kube.get_custom(DAGRUNS, namespace, name)
        if existing is None:  # deleted in between: nothing to adopt, let the retry create it
            raise AirflowException(f"DagRun {name} vanished while being triggered") from None
        if self.reset_dag_run:
            await _reset(kube, namespace, name, who=f"{parent.run_name}/{parent.task_id}")
            self.log.info("Cleared the existing DagRun %s (reset_dag_run)", name)
            return existing
        if dag_dependencies.parent_of(existing) == parent:
            self.log.info("DagRun %s was created by an earlier try of this task: waiting on it", name)
            return existing
        if self.skip_when_already_exists:
            raise AirflowSkipException(f"DagRun {name} already exists: skipping (skip_when_already_exists)")
        raise DagRunAlreadyExists(f"A DagRun named {name} exists already for DAG {dag_name}")


async def _reset(kube: KubeApi, namespace: str, run_name: str, *, who: str) -> None:
    """Airflow's `reset_dag_run`: clear every task instance of the existing run so it runs again."""

    def clear_all(dag: ResolvedDag, status: DagRunStatus) -> clear_and_mark.ActionResult:
        return clear_and_mark.clear(dag, status, now=sensor_base.utcnow(), who=who)

    try:
        await run_actions.act_on_run(kube, namespace, run_name, clear_all, component="zonda-task")
    except run_actions.RunActionError as exc:
        if "not started" not in exc.message:  # a run not started yet has nothing to reset
            raise AirflowException(f"Cannot reset DagRun {run_name}: {exc.message}") from None


async def _run_state(namespace: str, run_name: str) -> str | None:
    async with await Kube.connect(component="zonda-task") as kube:
        body = await kube.get_custom(DAGRUNS, namespace, run_name)
    state: str | None = ((body or {}).get("status") or {}).get("state")
    return state


__all__ = [
    "XCOM_LOGICAL_DATE_ISO",
    "XCOM_RUN_ID",
    "DagNotFound",
    "DagRunAlreadyExists",
    "TriggerDagRunOperator",
]
