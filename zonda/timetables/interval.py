"""Data-interval timetables: a run covers one period and is created when that period ends.

``schedule="0 0 * * *"`` creates, at midnight, the run whose data interval is the day that just ended; its
logical date is the *start* of that day. This is Airflow 2.x's default meaning of a cron or delta schedule.
"""

from __future__ import annotations

import calendar
import datetime as dt
from typing import Any

import pendulum
from dateutil.relativedelta import relativedelta
from pendulum import DateTime

from zonda.timetables.base import (
    AirflowTimetableInvalid,
    DagRunInfo,
    DataInterval,
    TimeRestriction,
    Timetable,
    coerce_utc,
    utcnow,
)
from zonda.timetables.cron import CronMixin, encode_timezone, parse_timezone
from zonda.timetables.deltas import Delta, decode_delta, encode_delta, is_positive

__all__ = ["CronDataIntervalTimetable", "DeltaDataIntervalTimetable"]


class _DataIntervalTimetable(Timetable):
    """Shared template: subclasses say how to step and align; this decides which interval comes next."""

    def _skip_to_latest(self, earliest: DateTime | None) -> DateTime:
        """The earliest start allowed when catchup is off: that of the latest *complete* interval."""
        raise NotImplementedError()

    def _align_to_next(self, current: DateTime) -> DateTime:
        raise NotImplementedError()

    def _align_to_prev(self, current: DateTime) -> DateTime:
        raise NotImplementedError()

    def _get_next(self, current: DateTime) -> DateTime:
        raise NotImplementedError()

    def _get_prev(self, current: DateTime) -> DateTime:
        raise NotImplementedError()

    def next_dagrun_info(
        self,
        *,
        last_automated_data_interval: DataInterval | None,
        restriction: TimeRestriction,
    ) -> DagRunInfo | None:
        earliest = restriction.earliest
        if not restriction.catchup:
            earliest = self._skip_to_latest(earliest)
        elif earliest is not None:
            earliest = self._align_to_next(earliest)
        if last_automated_data_interval is None:
            # First run: the first interval starting at or after the earliest allowed time.
            if earliest is None:
                return None
            start = earliest
        else:
            # Aligning matters when the schedule changed since the last run was created.
            aligned_last_end = self._align_to_prev(last_automated_data_interval.end)
            # Catchup off, or a start_date moved into the future: the later of the two wins.
            start = aligned_last_end if earliest is None else max(aligned_last_end, earliest)
        start = coerce_utc(start)
        if restriction.latest is not None and start > restriction.latest:
            return None
        end = self._get_next(start)
        return DagRunInfo.interval(start=start, end=end)


class CronDataIntervalTimetable(CronMixin, _DataIntervalTimetable):
    """Data intervals between consecutive firings of a cron expression, evaluated in ``timezone``.

    This corresponds to ``schedule=<cron>`` and the ``@hourly``-style presets. Daylight-saving semantics
    are those of :mod:`zonda.timetables.cron`. Don't pass ``@once``; use ``OnceTimetable``.
    """

    @classmethod
    def deserialize(cls, data: dict[str, Any]) -> Timetable:
        return cls(
            data["expression"],
            parse_timezone(data["timezone"]),
            ambiguous_time=data.get("ambiguous_time", "later"),
        )

    def serialize(self) -> dict[str, Any]:
        return {
            "expression": self._expression,
            "timezone": encode_timezone(self._timezone),
            **self._serialized_ambiguous_time(),
        }

    def _skip_to_latest(self, earliest: DateTime | None) -> DateTime:
        """Start of the latest interval that has completely passed at the (pinned) current time.

        When the current time is exactly a boundary, the interval ending right now counts as complete.
        Airflow asserts "next schedule shouldn't be earlier" here and crashed on DST days (#30088); with
        exact next/prev lookups that cannot happen, so there is nothing to assert.
        """
        current_time = utcnow()
        last_end = self._align_to_prev(current_time)
        new_start = self._get_prev(last_end)
        if earliest is None:
            return new_start
        return max(new_start, self._align_to_next(earliest))

    def infer_manual_data_interval(self, *, run_after: DateTime) -> DataInterval:
        """The last complete period before ``run_after`` (1am on the 25th -> 0am 24th to 0am 25th)."""
        end = self._align_to_prev(run_after)
        return DataInterval(start=self._get_prev(end), end=end)


class DeltaDataIntervalTimetable(_DataIntervalTimetable):
    """Back-to-back data intervals of a fixed length, e.g. ``schedule="30m"`` or ``timedelta(hours=6)``.

    A ``timedelta`` is elapsed time, computed in UTC, so ``1d`` is always 24 hours whatever the DAG's
    timezone does; use a cron expression for "every day at local midnight". A ``relativedelta`` is also
    accepted, as in Airflow, and is likewise applied in UTC.
    """

    def __init__(self, delta: Delta) -> None:
        if not isinstance(delta, dt.timedelta | relativedelta):
            raise AirflowTimetableInvalid(f"schedule interval must be a timedelta, not {delta!r}")
        self._delta = delta
        self.validate()

    @classmethod
    def deserialize(cls, data: dict[str, Any]) -> Timetable:
        return cls(decode_delta(data["delta"]))

    def __eq__(self, other: Any) -> bool:
        if not isinstance(other, DeltaDataIntervalTimetable):
            return NotImplemented
        return bool(self._delta == other._delta)

    @property
    def summary(self) -> str:
        return str(self._delta)

    def serialize(self) -> dict[str, Any]:
        return {"delta": encode_delta(self._delta)}

    def validate(self) -> None:
        """Refuse non-positive deltas: they would create the same interval forever."""
        if not is_positive(self._delta):
            raise AirflowTimetableInvalid(f"schedule interval must be positive, not {self._delta!r}")

    def _get_next(self, current: DateTime) -> DateTime:
        return coerce_utc(current + self._delta)

    def _get_prev(self, current: DateTime) -> DateTime:
        return coerce_utc(current - self._delta)

    def _align_to_next(self, current: DateTime) -> DateTime:
        return current

    def _align_to_prev(self, current: DateTime) -> DateTime:
        return current

    def _delta_microseconds(self) -> int:
        if isinstance(self._delta, dt.timedelta):
            return self._delta // dt.timedelta(microseconds=1)
        # Airflow's approximation for calendar deltas (a month is 30 days), used only to round "now".
        d = self._delta
        seconds = (
            d.years * 365 * 86400 + d.months * 30 * 86400 + d.days * 86400 + d.hours * 3600 + d.minutes * 60
        ) + d.seconds
        return int(seconds * 1_000_000 + d.microseconds)

    def _round(self, value: DateTime) -> DateTime:
        """Round down to a multiple of the delta since the Unix epoch (exact integer arithmetic)."""
        step = self._delta_microseconds()
        if step <= 0:
            return value
        since_epoch = calendar.timegm(value.utctimetuple()) * 1_000_000 + value.microsecond
        seconds, microseconds = divmod(since_epoch - since_epoch % step, 1_000_000)
        return pendulum.from_timestamp(seconds, tz=pendulum.UTC).replace(microsecond=microseconds)

    def _skip_to_latest(self, earliest: DateTime | None) -> DateTime:
        """Start of the latest complete epoch-aligned interval at the (pinned) current time."""
        new_start = self._get_prev(self._round(utcnow()))
        if earliest is None:
            return new_start
        return max(new_start, earliest)

    def infer_manual_data_interval(self, *, run_after: DateTime) -> DataInterval:
        return DataInterval(start=self._get_prev(run_after), end=coerce_utc(run_after))
