"""Airflow's time sensors: wait for a time of day, a moment, or a delay after the data interval.

`TimeSensor(deferrable=True)`, `TimeDeltaSensor(deferrable=True)`, `WaitSensor(deferrable=True)` (the standard
provider's, Airflow 3)
and the `*Async` variants (Airflow 2's names) defer to a `DateTimeTrigger` instead of poking: the try
ends, the triggerer waits, and a new try resumes in `execute_complete`, which succeeds at once.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import Any

import pendulum

from zonda.context import Context
from zonda.exceptions import AirflowSkipException
from zonda.sensors import base as sensor_base
from zonda.sensors.base import BaseSensorOperator, to_timedelta, utcnow
from zonda.triggers import DateTimeTrigger


def _time_of_day(value: datetime.time | str) -> datetime.time:
    if isinstance(value, datetime.time):
        return value
    if isinstance(value, str):
        return datetime.time.fromisoformat(value)
    raise TypeError(
        f"target_time must be a time of day such as '10:30', not {value!r} "
        "(quote it in YAML: an unquoted 10:30 is read as the number 630)"
    )


def _parse_moment(value: str) -> datetime.datetime:
    """Airflow's `timezone.parse`: an ISO 8601 moment, UTC when the text gives no offset."""
    moment = pendulum.parse(value, tz=pendulum.UTC)
    if not isinstance(moment, datetime.datetime):
        raise ValueError(f"target_time {value!r} is not a date and time")
    return moment


class TimeSensor(BaseSensorOperator):
    """Wait until the time of day `target_time`, in the DAG's timezone (unless it has an offset).

    :param target_time: a `datetime.time` or text such as "10:30" or "10:30:00".
    :param deferrable: defer until today's `target_time` instead of poking (as the standard provider's
        `TimeSensor`, the deferral has no timeout of its own).
    """

    def __init__(self, *, target_time: datetime.time | str, deferrable: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.target_time = _time_of_day(target_time)
        self.deferrable = deferrable

    def execute(self, context: Context) -> Any:
        if not self.deferrable:
            return super().execute(context)
        zone = self.target_time.tzinfo or (self.dag.timezone if self.dag else pendulum.UTC)
        today = utcnow().astimezone(zone).date()
        target = datetime.datetime.combine(today, self.target_time.replace(tzinfo=None), tzinfo=zone)
        try:
            trigger = DateTimeTrigger(moment=target.astimezone(datetime.UTC))
        except Exception as error:
            if self.soft_fail:
                raise AirflowSkipException("Skipping due to soft_fail is set to True.") from error
            raise
        self.defer(trigger=trigger, method_name="execute_complete")

    def execute_complete(self, context: Context, event: Any = None) -> None:
        """The trigger fired: the time has come."""
        return None

    def poke(self, context: Context) -> bool:
        self.log.info("Checking if the time (%s) has come", self.target_time)
        zone = self.target_time.tzinfo or (self.dag.timezone if self.dag else pendulum.UTC)
        return utcnow().astimezone(zone).time() > self.target_time.replace(tzinfo=None)


class TimeSensorAsync(TimeSensor):
    """`TimeSensor` that defers until today's `target_time` instead of poking."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.pop("deferrable", None)
        super().__init__(deferrable=True, **kwargs)


class DateTimeSensor(BaseSensorOperator):
    """Wait until the moment `target_time`, which suits backfills better than `TimeSensor`.

    :param target_time: a datetime or ISO 8601 text, UTC when it gives no offset. (templated)
    """

    template_fields: Sequence[str] = ("target_time",)

    def __init__(self, *, target_time: str | datetime.datetime, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        # A template field holds text, so that it can be rendered.
        if isinstance(target_time, datetime.datetime):
            self.target_time = target_time.isoformat()
        elif isinstance(target_time, str):
            self.target_time = target_time
        else:
            raise TypeError(
                f"Expected str or datetime.datetime type for target_time. Got {type(target_time)}"
            )

    def poke(self, context: Context) -> bool:
        self.log.info("Checking if the time (%s) has come", self.target_time)
        return utcnow() > _parse_moment(self.target_time)


class DateTimeSensorAsync(DateTimeSensor):
    """`DateTimeSensor` that defers until `target_time` instead of poking."""

    def execute(self, context: Context) -> None:
        trigger = DateTimeTrigger(moment=_parse_moment(self.target_time))
        self.defer(trigger=trigger, method_name="execute_complete")

    def execute_complete(self, context: Context, event: Any = None) -> None:
        """The trigger fired: the moment has come."""
        return None


class TimeDeltaSensor(BaseSensorOperator):
    """Wait until `delta` after the run's data interval ends (a run without one: after its `run_after`,
    as Airflow 3).

    :param delta: a timedelta, seconds, or a duration such as "30m".
    :param deferrable: defer until then instead of poking, with the sensor's `timeout` as the
        deferral's (the standard provider's `TimeDeltaSensor`); succeeds at once if the moment is past.
    """

    def __init__(
        self, *, delta: datetime.timedelta | float | str, deferrable: bool = False, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.delta = to_timedelta(delta, name="delta")
        self.deferrable = deferrable

    def _target(self, context: Context) -> datetime.datetime:
        base = context.get("data_interval_end") or context["dag_run"].run_after
        target: datetime.datetime = base + self.delta
        return target

    def poke(self, context: Context) -> bool:
        target = self._target(context)
        self.log.info("Checking if the time (%s) has come", target)
        return utcnow() > target

    def execute(self, context: Context) -> Any:
        if not self.deferrable:
            return super().execute(context)
        target = self._target(context)
        if utcnow() > target:
            return True
        self.defer(
            trigger=DateTimeTrigger(moment=target),
            method_name="execute_complete",
            timeout=datetime.timedelta(seconds=self.timeout),
        )

    def execute_complete(self, context: Context, event: Any = None) -> None:
        """The trigger fired: the delay is over."""
        return None


class TimeDeltaSensorAsync(TimeDeltaSensor):
    """`TimeDeltaSensor` that defers instead of poking; succeeds at once if the moment is past."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.pop("deferrable", None)
        super().__init__(deferrable=True, **kwargs)


class WaitSensor(BaseSensorOperator):
    """The standard provider's `WaitSensor`: wait `time_to_wait` from the start of the task (not from the
    data interval, as `TimeDeltaSensor`), by sleeping in the try, or deferred to a `DateTimeTrigger`.

    :param time_to_wait: a timedelta (a duration such as "30s" in a manifest), or a number of minutes
        (templated: a rendered "5" is five minutes, as Airflow's `int(value)`).
    :param deferrable: wait in the triggerer instead of the try's process.
    """

    template_fields: Sequence[str] = ("time_to_wait",)

    def __init__(
        self, time_to_wait: datetime.timedelta | int | str, deferrable: bool = False, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.time_to_wait = time_to_wait
        self.deferrable = deferrable

    def _wait(self) -> datetime.timedelta:
        value = self.time_to_wait
        if isinstance(value, int) or (isinstance(value, str) and value.strip().isdigit()):
            return datetime.timedelta(minutes=int(value))
        return to_timedelta(value, name="time_to_wait")

    def execute(self, context: Context) -> None:
        wait = self._wait()
        if self.deferrable:
            self.defer(trigger=DateTimeTrigger(moment=utcnow() + wait), method_name="execute_complete")
        sensor_base.sleep(int(wait.total_seconds()))

    def execute_complete(self, context: Context, event: Any = None) -> None:
        """The trigger fired: the wait is over."""
        return None
