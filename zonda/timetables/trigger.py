"""*Triggered* runs: a run starts at each firing of a cron (or every `delta`), not one period later."""

from __future__ import annotations

import datetime as dt
from typing import Any

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
from zonda.timetables.cron import CronMixin, TimezoneLike, encode_timezone, parse_timezone
from zonda.timetables.deltas import Delta, decode_delta, encode_delta, is_positive

__all__ = ["CronTriggerTimetable", "DeltaTriggerTimetable"]


class CronTriggerTimetable(CronMixin, Timetable):
    """Runs at each firing of ``cron``; the data interval is the ``interval`` just before it (default empty).

    Unlike ``CronDataIntervalTimetable``, the cron expression says *when to run*, not what data a run covers.
    With catchup off, the most recent firing that has already passed is still run (Airflow 2.x behaviour).
    Firing instants follow the daylight-saving semantics of :mod:`zonda.timetables.cron`.
    """

    def __init__(
        self,
        cron: str,
        *,
        timezone: TimezoneLike,
        interval: Delta = dt.timedelta(),
        ambiguous_time: str = "later",
    ) -> None:
        super().__init__(cron, timezone, ambiguous_time=ambiguous_time)
        if isinstance(interval, dt.timedelta) and interval < dt.timedelta(0):
            raise AirflowTimetableInvalid(f"interval must not be negative, not {interval!r}")
        self._interval = interval

    @classmethod
    def deserialize(cls, data: dict[str, Any]) -> Timetable:
        return cls(
            data["expression"],
            timezone=parse_timezone(data["timezone"]),
            interval=decode_delta(data.get("interval", 0.0)),
            ambiguous_time=data.get("ambiguous_time", "later"),
        )

    def serialize(self) -> dict[str, Any]:
        return {
            "expression": self._expression,
            "timezone": encode_timezone(self._timezone),
            "interval": encode_delta(self._interval),
            **self._serialized_ambiguous_time(),
        }

    def __eq__(self, other: Any) -> bool:
        if not isinstance(other, CronTriggerTimetable):
            return NotImplemented
        return bool(super().__eq__(other) and self._interval == other._interval)

    def infer_manual_data_interval(self, *, run_after: DateTime) -> DataInterval:
        return DataInterval(coerce_utc(run_after - self._interval), coerce_utc(run_after))

    def next_dagrun_info(
        self,
        *,
        last_automated_data_interval: DataInterval | None,
        restriction: TimeRestriction,
    ) -> DagRunInfo | None:
        if restriction.catchup:
            if last_automated_data_interval is not None:
                next_start_time = self._get_next(last_automated_data_interval.end)
            elif restriction.earliest is None:
                return None  # Don't know where to catch up from, give up.
            else:
                next_start_time = self._align_to_next(restriction.earliest)
        else:
            start_time_candidates = [self._align_to_prev(utcnow())]
            if last_automated_data_interval is not None:
                start_time_candidates.append(self._get_next(last_automated_data_interval.end))
            if restriction.earliest is not None:
                start_time_candidates.append(self._align_to_next(restriction.earliest))
            next_start_time = max(start_time_candidates)
        if restriction.latest is not None and restriction.latest < next_start_time:
            return None
        return DagRunInfo.interval(coerce_utc(next_start_time - self._interval), next_start_time)


class DeltaTriggerTimetable(Timetable):
    """Airflow 3's `DeltaTriggerTimetable`: a run every ``delta``, each at the start of its period; the
    data interval is the ``interval`` just before it (default empty), independent of ``delta``.

    With catchup and no run yet nor start date, the first run is now (Airflow's `_calc_first_run`).
    A ``timedelta`` is elapsed time in UTC, as `DeltaDataIntervalTimetable`'s.
    """

    def __init__(self, delta: Delta, *, interval: Delta = dt.timedelta()) -> None:
        self._delta = delta
        self._interval = interval
        self.validate()

    @classmethod
    def deserialize(cls, data: dict[str, Any]) -> Timetable:
        return cls(decode_delta(data["delta"]), interval=decode_delta(data.get("interval", 0.0)))

    def serialize(self) -> dict[str, Any]:
        return {"delta": encode_delta(self._delta), "interval": encode_delta(self._interval)}

    def __eq__(self, other: Any) -> bool:
        if not isinstance(other, DeltaTriggerTimetable):
            return NotImplemented
        return bool(self._delta == other._delta and self._interval == other._interval)

    def __hash__(self) -> int:
        return hash(self._delta)

    @property
    def summary(self) -> str:
        return str(self._delta)

    def validate(self) -> None:
        """Refuse a non-positive delta (the same run forever) and a negative interval."""
        if not is_positive(self._delta):
            raise AirflowTimetableInvalid(f"schedule interval must be positive, not {self._delta!r}")
        if isinstance(self._interval, dt.timedelta) and self._interval < dt.timedelta(0):
            raise AirflowTimetableInvalid(f"interval must not be negative, not {self._interval!r}")

    def infer_manual_data_interval(self, *, run_after: DateTime) -> DataInterval:
        return DataInterval(coerce_utc(run_after - self._interval), coerce_utc(run_after))

    def next_dagrun_info(
        self,
        *,
        last_automated_data_interval: DataInterval | None,
        restriction: TimeRestriction,
    ) -> DagRunInfo | None:
        if restriction.catchup:
            if last_automated_data_interval is not None:
                next_start_time = coerce_utc(last_automated_data_interval.end + self._delta)
            elif restriction.earliest is None:
                next_start_time = coerce_utc(utcnow())
            else:
                next_start_time = coerce_utc(restriction.earliest)
        else:
            start_time_candidates = [coerce_utc(utcnow())]
            if last_automated_data_interval is not None:
                start_time_candidates.append(coerce_utc(last_automated_data_interval.end + self._delta))
            elif restriction.earliest is None:
                start_time_candidates.append(coerce_utc(utcnow()))
            if restriction.earliest is not None:
                start_time_candidates.append(coerce_utc(restriction.earliest))
            next_start_time = max(start_time_candidates)
        if restriction.latest is not None and restriction.latest < next_start_time:
            return None
        return DagRunInfo.interval(coerce_utc(next_start_time - self._interval), next_start_time)
