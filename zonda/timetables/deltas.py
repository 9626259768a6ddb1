"""Airflow's JSON encoding of ``timedelta`` and ``relativedelta`` schedule arguments."""

from __future__ import annotations

import datetime as dt
from typing import Any, TypeAlias

from dateutil.relativedelta import relativedelta, weekday

__all__ = ["Delta", "decode_delta", "encode_delta", "is_positive"]

Delta: TypeAlias = dt.timedelta | relativedelta

# relativedelta has no sign of its own; a fixed, ordinary reference instant gives it one without
# reading the clock (Airflow's ``validate`` asks ``datetime.now()`` instead).
_REFERENCE = dt.datetime(2001, 1, 15, tzinfo=dt.UTC)


def encode_delta(delta: Delta) -> float | dict[str, Any]:
    """Seconds for a ``timedelta``; the non-zero public fields for a ``relativedelta`` (as Airflow)."""
    if isinstance(delta, dt.timedelta):
        return float(delta.total_seconds())
    encoded = {k: v for k, v in vars(delta).items() if not k.startswith("_") and v}
    if delta.weekday is not None:
        encoded["weekday"] = [delta.weekday.weekday] + ([delta.weekday.n] if delta.weekday.n else [])
    return encoded


def decode_delta(value: float | dict[str, Any]) -> Delta:
    if isinstance(value, dict):
        fields = dict(value)
        if "weekday" in fields:
            fields["weekday"] = weekday(*fields["weekday"])
        decoded: Delta = relativedelta(**fields)
        return decoded
    return dt.timedelta(seconds=value)


def is_positive(delta: Delta) -> bool:
    return bool(_REFERENCE + delta > _REFERENCE)
