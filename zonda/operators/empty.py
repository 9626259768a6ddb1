"""Airflow's `EmptyOperator`: a task that does nothing, to group or join others."""

from __future__ import annotations

from zonda.context import Context
from zonda.operators.base import BaseOperator


class EmptyOperator(BaseOperator):
    """Does nothing. The scheduler usually marks it successful without running it, as Airflow does."""

    def execute(self, context: Context) -> None:
        pass


#: Airflow's pre-2.4 name (`airflow.operators.dummy.DummyOperator`).
DummyOperator = EmptyOperator
