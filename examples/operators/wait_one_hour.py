"""The deferrable sensor of Airflow's "Deferrable Operators & Triggers" guide; only the imports differ.

Use it in a DAG as `operator: examples.operators.wait_one_hour.WaitOneHourSensor`.
"""

from datetime import timedelta
from typing import Any

from zonda.context import Context
from zonda.sensors.base import BaseSensorOperator
from zonda.triggers import TimeDeltaTrigger


class WaitOneHourSensor(BaseSensorOperator):
    def execute(self, context: Context) -> None:
        self.defer(trigger=TimeDeltaTrigger(timedelta(hours=1)), method_name="execute_complete")

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> None:
        # We have no more work to do here. Mark as complete.
        return
