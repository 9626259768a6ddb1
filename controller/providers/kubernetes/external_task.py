"""Airflow's `ExternalTaskSensor` on the Kubernetes API: wait for another DAG's run or task instances.

The sensor lists DagRuns from the task's own try (the task pod's ServiceAccount, or the local
executor's kubeconfig; see the chart's `taskPods.rbac.dagDependencies`) and asks the pure
`zonda.schedules.dag_dependencies.external_verdict`. With ``deferrable=True`` the wait moves to the triggerer
(`dagrun_triggers.WorkflowTrigger`) and the try's Pod is freed. `ExternalTaskMarker` needs no API (it
matters only when cleared) and lives in `zonda.sensors.external_task`; it is re-exported here because
Airflow's `airflow.sensors.external_task`, which maps to this module, holds both.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from controller.kube import DAGRUNS, DAGS, Kube
from controller.providers.kubernetes.dagrun_triggers import WorkflowTrigger
from controller.providers.kubernetes.sensors import run_namespace
from zonda.context import Context, logical_date_or_run_after
from zonda.exceptions import AirflowException, AirflowSkipException
from zonda.operators.python import resolve_python_callable
from zonda.resources.wire import parse_time
from zonda.schedules import dag_dependencies
from zonda.schedules.dag_dependencies import ExternalRun, ExternalWait, Verdict
from zonda.sensors.base import BaseSensorOperator, to_timedelta
from zonda.sensors.external_task import ExternalTaskMarker


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
        logical_date: datetime = logical_date_or_run_after(context, "ExternalTaskSensor")
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
        self._check_existence(run_namespace(context), wait.dag_name)
        self.defer(
            trigger=WorkflowTrigger(
                namespace=run_namespace(context),
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
        namespace = run_namespace(context)
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


__all__ = ["ExternalTaskMarker", "ExternalTaskSensor"]
