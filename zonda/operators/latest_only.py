"""Airflow's `LatestOnlyOperator`: skips what follows unless the run is the latest scheduled one."""

from __future__ import annotations

from typing import NoReturn

from zonda.context import Context
from zonda.exceptions import AirflowException
from zonda.operators.base import BaseOperator


class LatestOnlyOperator(BaseOperator):
    """Decided by the scheduler, which knows the DAG's latest interval, without running any code.

    As in Airflow, a manual run or the run of the latest interval follows its downstream tasks, any
    other run skips them. The class exists so that DAGs naming it validate and imports resolve.
    """

    def execute(self, context: Context) -> NoReturn:
        raise AirflowException(
            "LatestOnlyOperator is decided by the scheduler and never runs in the task runner"
        )
