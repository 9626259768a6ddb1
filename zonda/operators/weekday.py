"""Airflow's `BranchDayOfWeekOperator`: follow one of two branches by the day of the week."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pendulum

from zonda.context import Context, logical_date_or_run_after
from zonda.operators.branch import BaseBranchOperator
from zonda.sensors import base as sensor_clock
from zonda.utils.weekday import WeekDay


class BranchDayOfWeekOperator(BaseBranchOperator):
    """`follow_task_ids_if_true` when today (or the run's logical date) is one of `week_day`.

    :param week_day: a full day name, a `WeekDay`, or a set of either.
    :param use_task_logical_date: compare the run's logical date instead of the clock (in the DAG's
        timezone, as Airflow).
    :param use_task_execution_day: Airflow's deprecated name of `use_task_logical_date`.
    """

    def __init__(
        self,
        *,
        follow_task_ids_if_true: str | Iterable[str],
        follow_task_ids_if_false: str | Iterable[str],
        week_day: str | Iterable[str] | WeekDay | Iterable[WeekDay] | int | Iterable[int],
        use_task_logical_date: bool = False,
        use_task_execution_day: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.follow_task_ids_if_true = follow_task_ids_if_true
        self.follow_task_ids_if_false = follow_task_ids_if_false
        self.week_day = week_day
        self.use_task_logical_date = use_task_logical_date or use_task_execution_day
        self._week_day_num = WeekDay.validate_week_day(week_day)

    def choose_branch(self, context: Context) -> str | Iterable[str]:
        if self.use_task_logical_date:
            now = logical_date_or_run_after(context)
        else:
            timezone = self.dag.timezone if self.dag else pendulum.UTC
            now = sensor_clock.utcnow().astimezone(timezone)
        if now.isoweekday() in self._week_day_num:
            return self.follow_task_ids_if_true
        return self.follow_task_ids_if_false
