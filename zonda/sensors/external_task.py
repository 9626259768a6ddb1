"""Airflow's `ExternalTaskMarker`: where clearing this task also clears a task of another DAG.

It does nothing when it runs (the scheduler marks it successful without a Pod, as an EmptyOperator);
its arguments matter when a user clears it: `zonda clear` (and the UI) follow it into the run of
`external_dag_id` at `execution_date` and clear `external_task_id` and its downstream there, then
any markers among those, up to `recursion_depth` hops (`zonda.actions.across_dags.plan_clear_across_dags`).

`ExternalTaskSensor` itself reads the API, so it lives in Zonda's Kubernetes provider
(`from airflow.sensors.external_task import ExternalTaskSensor` maps onto it).
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import Any

from zonda.operators.empty import EmptyOperator
from zonda.schedules.dag_dependencies import DEFAULT_EXECUTION_DATE, DEFAULT_RECURSION_DEPTH


class ExternalTaskMarker(EmptyOperator):
    """Clearing this task clears `external_task_id` of `external_dag_id` at `execution_date` too.

    :param external_dag_id: the DAG whose task is cleared (its dag_id, or the DAG resource's name).
    :param external_task_id: the task cleared there, with its downstream tasks.
    :param execution_date: the logical date of that DAG's run; a template, the run's own by default.
    :param recursion_depth: how many markers a clear may follow from here (the first marker's
        value limits the whole chain, as in Airflow); at least 1.
    """

    template_fields: Sequence[str] = ("external_dag_id", "external_task_id", "execution_date")

    def __init__(
        self,
        *,
        external_dag_id: str,
        external_task_id: str,
        execution_date: str | datetime.datetime | None = DEFAULT_EXECUTION_DATE,
        recursion_depth: int = DEFAULT_RECURSION_DEPTH,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.external_dag_id = external_dag_id
        self.external_task_id = external_task_id
        if isinstance(execution_date, datetime.datetime):
            self.execution_date: str = execution_date.isoformat()
        elif isinstance(execution_date, str):
            self.execution_date = execution_date
        else:
            raise TypeError(
                f"Expected str or datetime.datetime type for execution_date. Got {type(execution_date)}"
            )
        if recursion_depth <= 0:
            raise ValueError("recursion_depth should be a positive integer")
        self.recursion_depth = recursion_depth
