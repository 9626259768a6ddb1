"""A deferrable operator that waits longer than it is allowed to: shows deferral timeouts.

`DeferWithTimeout(wait="1h", timeout="2s")` defers to a `TimeDeltaTrigger(wait)` with
`defer(timeout=...)`; the triggerer would fire after `wait`, but the scheduler fails the task
instance when `timeout` passes first (Airflow: "Trigger/execution timeout").
"""

from __future__ import annotations

from typing import Any

from zonda.context import Context
from zonda.operators.base import BaseOperator
from zonda.sensors.base import to_timedelta
from zonda.triggers import TimeDeltaTrigger


class DeferWithTimeout(BaseOperator):
    def __init__(self, *, wait: Any, timeout: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.wait = to_timedelta(wait, name="wait")
        self.timeout = to_timedelta(timeout, name="timeout")

    def execute(self, context: Context) -> None:
        self.defer(trigger=TimeDeltaTrigger(self.wait), method_name="execute_complete", timeout=self.timeout)

    def execute_complete(self, context: Context, event: Any = None) -> str:
        return "the trigger fired first"
