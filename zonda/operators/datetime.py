"""Airflow's `BranchDateTimeOperator`: follow one of two branches by whether now is inside a window."""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from typing import Any

import pendulum

from zonda.context import Context, logical_date_or_run_after
from zonda.exceptions import AirflowException
from zonda.operators.branch import BaseBranchOperator
from zonda.sensors import base as sensor_clock

_Bound = datetime.datetime | datetime.time | None


class BranchDateTimeOperator(BaseBranchOperator):
    """`follow_task_ids_if_true` when now (or the logical date) is within [target_lower, target_upper].

    Times (`datetime.time`) are taken on the day compared; an upper time before the lower one is on the
    next day. Naive targets are in the DAG's timezone, as Airflow's `coerce_datetime`.

    :param use_task_logical_date: compare the run's logical date instead of the clock.
    :param use_task_execution_date: Airflow's deprecated name of `use_task_logical_date`.
    """

    def __init__(
        self,
        *,
        follow_task_ids_if_true: str | Iterable[str],
        follow_task_ids_if_false: str | Iterable[str],
        target_lower: datetime.datetime | datetime.time | str | None,
        target_upper: datetime.datetime | datetime.time | str | None,
        use_task_logical_date: bool = False,
        use_task_execution_date: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if target_lower is None and target_upper is None:
            raise AirflowException(
                "Both target_upper and target_lower are None. At least one "
                "must be defined to be compared to the current datetime"
            )
        self.target_lower = _moment(target_lower)
        self.target_upper = _moment(target_upper)
        self.follow_task_ids_if_true = follow_task_ids_if_true
        self.follow_task_ids_if_false = follow_task_ids_if_false
        self.use_task_logical_date = use_task_logical_date or use_task_execution_date

    def choose_branch(self, context: Context) -> str | Iterable[str]:
        if self.use_task_logical_date:
            now = pendulum.instance(logical_date_or_run_after(context))
        else:
            now = pendulum.instance(sensor_clock.utcnow())
        timezone = self.dag.timezone if self.dag else pendulum.UTC
        lower, upper = target_times_as_dates(now, self.target_lower, self.target_upper)
        if upper is not None and _coerce(upper, timezone) < now:
            return self.follow_task_ids_if_false
        if lower is not None and _coerce(lower, timezone) > now:
            return self.follow_task_ids_if_false
        return self.follow_task_ids_if_true


def _moment(
    value: datetime.datetime | datetime.time | str | None,
) -> datetime.datetime | datetime.time | None:
    """A bound as the manifest carries it (ISO text: `15:00:00` is a time, a date-time a datetime)."""
    if not isinstance(value, str):
        return value
    if "T" in value or "-" in value:
        return datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    return datetime.time.fromisoformat(value)


def _coerce(moment: datetime.datetime, timezone: datetime.tzinfo) -> datetime.datetime:
    if moment.tzinfo is None:
        return pendulum.instance(moment, tz=timezone)
    return moment


def target_times_as_dates(
    base_date: datetime.datetime,
    lower: datetime.datetime | datetime.time | None,
    upper: datetime.datetime | datetime.time | None,
) -> tuple[datetime.datetime | None, datetime.datetime | None]:
    """The window's bounds as datetimes on `base_date`'s day (Airflow's function of that name)."""
    if isinstance(lower, datetime.datetime) and isinstance(upper, datetime.datetime):
        return lower, upper
    low = datetime.datetime.combine(base_date, lower) if isinstance(lower, datetime.time) else lower
    high = datetime.datetime.combine(base_date, upper) if isinstance(upper, datetime.time) else upper
    if low is None or high is None:
        return low, high
    if high < low:
        high += datetime.timedelta(days=1)
    return low, high
