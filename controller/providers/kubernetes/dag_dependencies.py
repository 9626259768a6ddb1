"""Airflow's cross-DAG operators on the Kubernetes API: `TriggerDagRunOperator`, `ExternalTaskSensor`.

Both act on DagRun resources from the task's own try (the task pod's ServiceAccount, or the local
executor's kubeconfig): the chart's `taskPods.rbac.dagDependencies` grants the task pods'
ServiceAccount exactly create/get/list/watch on dagruns, get on dags and update on dagruns/status
(`reset_dag_run` clears a run); see
docs/decisions.md for why the create happens here rather than in the controller. With
``deferrable=True`` the wait moves to the triggerer (`dagrun_triggers`) and the try's Pod is freed.

`ExternalTaskMarker` needs no API (it matters only when cleared) and lives in
`zonda.sensors.external_task`; it is re-exported here because Airflow's module holds both.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from controller import run_actions
from controller.kube import DAGRUNS, DAGS, AlreadyExists, Kube, KubeApi
from controller.providers.kubernetes.dagrun_triggers import DagStateTrigger, WorkflowTrigger
from controller.providers.kubernetes.sensors import default_namespace
from zonda import actions, dag_dependencies, names
from zonda.context import Context
from zonda.dag_dependencies import ExternalRun, ExternalWait, Parent, Verdict
from zonda.dagrun_models import DagRunStatus
from zonda.dags import ResolvedDag
from zonda.exceptions import AirflowException, AirflowSkipException
from zonda.operators.base import BaseOperator
from zonda.operators.python import resolve_python_callable
from zonda.sensors import base as sensor_base
from zonda.sensors.base import BaseSensorOperator, to_timedelta
from zonda.sensors.external_task import ExternalTaskMarker
from zonda.wire import parse_time

#: Airflow's XCom keys for the triggered run.
XCOM_RUN_ID = "trigger_run_id"
XCOM_LOGICAL_DATE_ISO = "trigger_logical_date_iso"


class DagRunAlreadyExists(AirflowException):
    """Airflow's error when the run to trigger exists already and was made by someone else."""


class DagNotFound(AirflowException):
    """The DAG to trigger or wait for has no DAG resource in the namespace."""


def _namespace(context: Context) -> str:
    return getattr(context.get("dag_run"), "namespace", None) or default_namespace()


class TriggerDagRunOperator(BaseOperator):
    """Trigger a DagRun of `trigger_dag_id` (Airflow's `TriggerDagRunOperator`).

    :param trigger_dag_id: the DAG to trigger (its dag_id, or the DAG resource's name). (templated)
    :param trigger_run_id: the new run's name; by default one derived from this run and task, so a
        retry finds the run an earlier try created. (templated)
    :param conf: the run's conf. (templated)
    :param logical_date: the run's logical date (datetime or ISO string); now by default. (templated)
    :param reset_dag_run: if the run exists, clear it so it runs again (Airflow's backfill-friendly
        option) instead of failing with `DagRunAlreadyExists`.
    :param wait_for_completion: wait until the run is in `allowed_states` or `failed_states`.
    :param poke_interval: seconds between checks while waiting.
    :param allowed_states: run states that end the wait successfully (default ``["success"]``).
    :param failed_states: run states that fail the task (default ``["failed"]``).
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
        logical_date: str | datetime | None = None,
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
        if logical_date is not None and execution_date is not None:
            raise ValueError("Pass `logical_date` or its deprecated name `execution_date`, not both")
        self.trigger_dag_id = trigger_dag_id
        self.trigger_run_id = trigger_run_id
        self.conf = conf or {}
        self.logical_date = logical_date if logical_date is not None else execution_date
        self.reset_dag_run = reset_dag_run
        self.wait_for_completion = wait_for_completion
        self.poke_interval = float(poke_interval)
        self.allowed_states = list(allowed_states or dag_dependencies.DEFAULT_ALLOWED_STATES)
        self.failed_states = list(failed_states or dag_dependencies.DEFAULT_FAILED_STATES)
        self.skip_when_already_exists = skip_when_already_exists
        self.deferrable = deferrable
        try:
            dag_dependencies.check_states(
                self.allowed_states, self.failed_states, valid=dag_dependencies.RUN_STATES
            )
        except dag_dependencies.DagDependencyError as exc:
            raise AirflowException(str(exc)) from None

    def execute(self, context: Context) -> Any:
        namespace = _namespace(context)
        dag_name = dag_dependencies.external_dag_name(str(self.trigger_dag_id))
        parent = Parent(dag_name=context["dag"].dag_id, run_name=context["run_id"], task_id=str(self.task_id))
        logical_date = self._logical_date()
        map_index = int(getattr(context["ti"], "map_index", -1))
        run = asyncio.run(self._trigger(namespace, dag_name, parent, logical_date, map_index))
        run_name = run["metadata"]["name"]
        logical = run["spec"].get("logicalDate") or logical_date.isoformat()
        context["ti"].xcom_push(key=XCOM_RUN_ID, value=run_name)
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

    def _logical_date(self) -> datetime:
        if isinstance(self.logical_date, datetime):
            moment = parse_time(self.logical_date)
        elif self.logical_date:
            try:
                moment = parse_time(str(self.logical_date))
            except ValueError as exc:
                raise AirflowException(f"logical_date: {exc}") from None
        else:
            moment = sensor_base.utcnow()  # Airflow's default: the time of triggering
        assert moment is not None
        return moment

    async def _trigger(
        self, namespace: str, dag_name: str, parent: Parent, logical_date: datetime, map_index: int
    ) -> dict[str, Any]:
        async with await Kube.connect(component="zonda-task") as kube:
            return await self.create_or_adopt(kube, namespace, dag_name, parent, logical_date, map_index)

    async def create_or_adopt(
        self,
        kube: KubeApi,
        namespace: str,
        dag_name: str,
        parent: Parent,
        logical_date: datetime,
        map_index: int = -1,
    ) -> dict[str, Any]:
        """Create the child run, or take the one an earlier try created (or reset, skip, refuse).

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
        )
        if await kube.get_custom(DAGS, namespace, dag_name) is None:
            raise DagNotFound(f"Dag id {self.trigger_dag_id} not found: no DAG {dag_name} in {namespace}")
        try:
            created = await kube.create_custom(DAGRUNS, namespace, body)
            self.log.info("Triggered DagRun %s of %s at %s", name, dag_name, logical_date.isoformat())
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

    def clear_all(dag: ResolvedDag, status: DagRunStatus) -> actions.ActionResult:
        return actions.clear(dag, status, now=sensor_base.utcnow(), who=who)

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


async def _external_runs(namespace: str) -> list[ExternalRun]:
    async with await Kube.connect(component="zonda-task") as kube:
        return [ExternalRun.from_body(b) for b in await kube.list_custom(DAGRUNS, namespace)]


async def _dag_exists(namespace: str, dag_name: str) -> bool:
    async with await Kube.connect(component="zonda-task") as kube:
        return await kube.get_custom(DAGS, namespace, dag_name) is not None


class ExternalTaskSensor(BaseSensorOperator):
    """Wait for task instances (or a whole run) of another DAG at a logical date (Airflow's sensor).

    :param external_dag_id: the DAG to wait on (its dag_id, or the DAG resource's name).
    :param external_task_id: one task; or `external_task_ids`; or `external_task_group_id`; or none
        of them to wait for the whole run's state.
    :param allowed_states: states that end the wait (default ``["success"]``).
    :param skipped_states: states that skip this sensor.
    :param failed_states: states that fail it.
    :param execution_delta: look at the run this much before this run's logical date; or
        `execution_date_fn(logical_date, context) -> datetime or list` (an import path from YAML).
    :param check_existence: fail at once if the external DAG does not exist.
    :param deferrable: wait in the triggerer (`WorkflowTrigger`), freeing the try's Pod.
    """

    template_fields: Sequence[str] = (
        "external_dag_id",
        "external_task_id",
        "external_task_ids",
        "external_task_group_id",
    )
    ui_color = "#19647e"

    def __init__(
        self,
        *,
        external_dag_id: str,
        external_task_id: str | None = None,
        external_task_ids: Sequence[str] | None = None,
        external_task_group_id: str | None = None,
        allowed_states: Sequence[str] | None = None,
        skipped_states: Sequence[str] | None = None,
        failed_states: Sequence[str] | None = None,
        execution_delta: timedelta | float | str | None = None,
        execution_date_fn: Callable[..., Any] | str | None = None,
        check_existence: bool = False,
        deferrable: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.allowed_states = list(allowed_states or dag_dependencies.DEFAULT_ALLOWED_STATES)
        self.skipped_states = list(skipped_states or [])
        self.failed_states = list(failed_states or [])
        if external_task_id is not None and external_task_ids is not None:
            raise ValueError(
                "Only one of `external_task_id` or `external_task_ids` may be provided to "
                "ExternalTaskSensor; please use `external_task_ids` or `external_task_id` but not both."
            )
        if external_task_id is not None:
            external_task_ids = [external_task_id]
        if external_task_group_id is not None and external_task_ids:
            raise ValueError(
                "Values for `external_task_group_id` and `external_task_id` or `external_task_ids` "
                "can't be set at the same time"
            )
        on_tasks = bool(external_task_ids) or external_task_group_id is not None
        valid = dag_dependencies.TASK_STATES if on_tasks else dag_dependencies.RUN_STATES
        try:
            dag_dependencies.check_states(
                self.allowed_states, self.failed_states, skipped=self.skipped_states, valid=valid
            )
        except dag_dependencies.DagDependencyError as exc:
            raise AirflowException(str(exc)) from None
        if external_task_ids and len(set(external_task_ids)) != len(external_task_ids):
            raise ValueError("Duplicate task_ids passed in external_task_ids parameter")
        if execution_delta is not None and execution_date_fn is not None:
            raise ValueError(
                "Only one of `execution_delta` or `execution_date_fn` may be provided to ExternalTaskSensor; "
                "not both."
            )
        self.external_dag_id = external_dag_id
        self.external_task_id = external_task_id
        self.external_task_ids = list(external_task_ids) if external_task_ids else None
        self.external_task_group_id = external_task_group_id
        self.execution_delta = (
            None if execution_delta is None else to_timedelta(execution_delta, name="execution_delta")
        )
        self.execution_date_fn = execution_date_fn
        self.check_existence = check_existence
        self.deferrable = deferrable
        self._checked_existence = False

    def _logical_dates(self, context: Context) -> list[datetime]:
        """Airflow's `_get_dttm_filter`: the external logical dates this try waits for."""
        logical_date: datetime = context["logical_date"]
        if self.execution_delta is not None:
            return [logical_date - self.execution_delta]
        if self.execution_date_fn is None:
            return [logical_date]
        function = resolve_python_callable(self.execution_date_fn)
        result = function(logical_date, **_accepted_kwargs(function, context))
        dates = result if isinstance(result, list | tuple) else [result]
        parsed = [parse_time(d) for d in dates]
        return [d for d in parsed if d is not None]

    def _wait(self, context: Context) -> ExternalWait:
        return ExternalWait(
            dag_name=dag_dependencies.external_dag_name(str(self.external_dag_id)),
            logical_dates=tuple(self._logical_dates(context)),
            task_ids=tuple(self.external_task_ids) if self.external_task_ids else None,
            task_group_id=self.external_task_group_id,
            allowed_states=tuple(self.allowed_states),
            skipped_states=tuple(self.skipped_states),
            failed_states=tuple(self.failed_states),
        )

    def execute(self, context: Context) -> Any:
        if not self.deferrable:
            return super().execute(context)
        wait = self._wait(context)
        self._check_existence(_namespace(context), wait.dag_name)
        self.defer(
            trigger=WorkflowTrigger(
                namespace=_namespace(context),
                external_dag_name=wait.dag_name,
                logical_dates=list(wait.logical_dates),
                external_task_ids=wait.task_ids,
                external_task_group_id=wait.task_group_id,
                allowed_states=wait.allowed_states,
                skipped_states=wait.skipped_states,
                failed_states=wait.failed_states,
                poll_interval=self.poke_interval,
            ),
            method_name="execute_complete",
            timeout=timedelta(seconds=self.timeout),
        )

    def _check_existence(self, namespace: str, dag_name: str) -> None:
        if self.check_existence and not self._checked_existence:
            if not asyncio.run(_dag_exists(namespace, dag_name)):
                raise AirflowException(f"The external DAG {self.external_dag_id} does not exist.")
            self._checked_existence = True

    def poke(self, context: Context) -> bool:
        wait = self._wait(context)
        namespace = _namespace(context)
        self._check_existence(namespace, wait.dag_name)
        self.log.info("Poking for %s ...", wait.describe())
        verdict, message = dag_dependencies.external_verdict(wait, asyncio.run(_external_runs(namespace)))
        return self._conclude(verdict, message)

    def _conclude(self, verdict: Verdict | str, message: str) -> bool:
        if verdict == Verdict.FAILED:
            if self.soft_fail:
                raise AirflowSkipException(message)
            raise AirflowException(message)
        if verdict == Verdict.SKIPPED:
            raise AirflowSkipException(message)
        self.log.info("%s", message)
        return verdict == Verdict.SUCCESS

    def execute_complete(self, context: Context, event: Any = None) -> None:
        """The `WorkflowTrigger` fired with Airflow's ``{"status": ...}`` event."""
        event = event or {}
        if not self._conclude(str(event.get("status")), str(event.get("message", ""))):
            raise AirflowException(f"Error occurred while trying to retrieve task status: {event}")


def _accepted_kwargs(function: Callable[..., Any], context: Context) -> dict[str, Any]:
    """The context entries `function` takes by name (all of them if it takes ``**kwargs``), as
    Airflow's `make_kwargs_callable`; its first parameter is the logical date, passed positionally."""
    parameters = list(inspect.signature(function).parameters.values())
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return {k: v for k, v in context.items() if k != "logical_date"}
    names = {p.name for p in parameters[1:]}
    return {k: v for k, v in context.items() if k in names}


__all__ = [
    "DagNotFound",
    "DagRunAlreadyExists",
    "ExternalTaskMarker",
    "ExternalTaskSensor",
    "TriggerDagRunOperator",
]
