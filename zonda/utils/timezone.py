"""Airflow's `timezone` helpers (`airflow.sdk.timezone`, `airflow.utils.timezone`): aware datetimes, UTC by
default, as pendulum DateTimes."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pendulum

utc = pendulum.UTC
#: Airflow 2's name of it.
TIMEZONE = utc

__all__ = ["coerce_datetime", "convert_to_utc", "datetime", "make_aware", "parse", "utc", "utcnow"]


def utcnow() -> pendulum.DateTime:
    """Now, from the tasks' pinnable clock (`zonda.sensors.base.utcnow`)."""
    from zonda.sensors.base import utcnow as task_clock

    return pendulum.instance(task_clock())


def datetime(*args: Any, **kwargs: Any) -> dt.datetime:
    """`datetime.datetime(...)`, in UTC unless `tzinfo` says otherwise (Airflow's `timezone.datetime`)."""
    kwargs.setdefault("tzinfo", utc)
    return dt.datetime(*args, **kwargs)


def parse(text: str, timezone: Any = None) -> Any:
    return pendulum.parse(text, tz=timezone or utc)


def make_aware(value: dt.datetime, timezone: Any = None) -> dt.datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=timezone or utc)


def convert_to_utc(value: dt.datetime) -> dt.datetime:
    return make_aware(value).astimezone(utc)


def coerce_datetime(value: dt.datetime | None, tz: Any = None) -> pendulum.DateTime | None:
    if value is None:
        return None
    return pendulum.instance(make_aware(value, tz))
