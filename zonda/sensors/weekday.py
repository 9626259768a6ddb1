"""Airflow's `DayOfWeekSensor`: waits until the day of the week is one of those given."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from zonda.context import Context, logical_date_or_run_after
from zonda.sensors.base import BaseSensorOperator, utcnow
from zonda.utils.weekday import WeekDay


class DayOfWeekSensor(BaseSensorOperator):
    """Done when today (UTC), or the run's logical date with `use_task_logical_date`, is in `week_day`.

    :param week_day: a full day name, a `WeekDay`, or a set of either.
    :param use_task_execution_day: Airflow's deprecated name of `use_task_logical_date`.
    """

    def __init__(
        self,
        *,
        week_day: str | Iterable[str] | WeekDay | Iterable[WeekDay] | int | Iterable[int],
        use_task_logical_date: bool = False,
        use_task_execution_day: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.week_day = week_day
        self.use_task_logical_date = use_task_logical_date or use_task_execution_day
        self._week_day_num = WeekDay.validate_week_day(week_day)

    def poke(self, context: Context) -> bool:
        today = utcnow()
        self.log.info(
            "Poking until weekday is in %s, Today is %s", self.week_day, WeekDay(today.isoweekday()).name
        )
        if self.use_task_logical_date:
            return logical_date_or_run_after(context).isoweekday() in self._week_day_num
        return today.isoweekday() in self._week_day_num
