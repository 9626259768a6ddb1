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

__all__ = [
    "CronPartitionTimetable",
    "CronTriggerTimetable",
    "DeltaTriggerTimetable",
    "MultipleCronTriggerTimetable",
]


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


class CronPartitionTimetable(CronTriggerTimetable):
    """Airflow 3.2+'s `CronPartitionTimetable(cron, *, timezone, run_offset=None, run_immediately=False,
    key_format="%Y-%m-%dT%H:%M:%S")`: runs as `CronTriggerTimetable` (no data interval), and each run is
    for a partition: its key is the run's firing (moved `run_offset` firings later, or earlier when
    negative) in the timetable's timezone, formatted with `key_format` (Airflow's `_format_key`).
    """

    #: The runs it makes carry a partition key (Airflow's `Timetable.partitioned`).
    partitioned = True

    def __init__(
        self,
        cron: str,
        *,
        timezone: TimezoneLike,
        run_offset: int | None = None,
        run_immediately: bool | dt.timedelta = False,
        key_format: str = r"%Y-%m-%dT%H:%M:%S",
    ) -> None:
        super().__init__(cron, timezone=timezone)
        if not isinstance(run_offset, int | None) or isinstance(run_offset, bool):
            raise AirflowTimetableInvalid("Run offset other than integer not supported yet.")
        if run_immediately is not False:
            raise AirflowTimetableInvalid(
                "run_immediately is not supported by Zonda: with catchup off the latest firing already "
                "passed is run, as CronTriggerTimetable's"
            )
        if not isinstance(key_format, str) or not key_format:
            raise AirflowTimetableInvalid(
                f"key_format must be a non-empty strftime format, not {key_format!r}"
            )
        self._run_offset = run_offset or 0
        self._key_format = key_format

    @classmethod
    def deserialize(cls, data: dict[str, Any]) -> Timetable:
        return cls(
            data["expression"],
            timezone=parse_timezone(data["timezone"]),
            run_offset=data.get("run_offset"),
            key_format=data.get("key_format", r"%Y-%m-%dT%H:%M:%S"),
        )

    def serialize(self) -> dict[str, Any]:
        return {
            "expression": self._expression,
            "timezone": encode_timezone(self._timezone),
            "run_offset": self._run_offset,
            "key_format": self._key_format,
        }

    def __eq__(self, other: Any) -> bool:
        if not isinstance(other, CronPartitionTimetable):
            return NotImplemented
        return bool(
            super().__eq__(other)
            and (self._run_offset, self._key_format) == (other._run_offset, other._key_format)
        )

    def partition_date(self, run_after: dt.datetime) -> DateTime:
        """The partition a run firing at `run_after` is for (Airflow's `_get_partition_date`)."""
        date = _pendulum(run_after)
        step = self._get_next if self._run_offset > 0 else self._get_prev
        for _ in range(abs(self._run_offset)):
            date = step(date)
        return date

    def partition_key(self, run_after: dt.datetime) -> str:
        """The run's partition key: its partition date in the timetable's timezone, as `key_format`."""
        return str(self.partition_date(run_after).in_timezone(self._timezone).strftime(self._key_format))


class MultipleCronTriggerTimetable(Timetable):
    """Airflow 2.11/3's `MultipleCronTriggerTimetable(*crons, timezone, interval=timedelta())`: a run at
    each firing of any of the crons (one run when several fire at once), each a `CronTriggerTimetable`.

    The next run is the earliest of theirs with catchup; without it, the latest of those already due
    (else the earliest to come), as Airflow's `_dagrun_info_sort_key_no_catchup`.
    """

    def __init__(
        self,
        *crons: str,
        timezone: TimezoneLike,
        interval: Delta = dt.timedelta(),
        run_immediately: bool | dt.timedelta = False,
    ) -> None:
        if not crons:
            raise AirflowTimetableInvalid("cron expression required")
        if run_immediately is not False:
            raise AirflowTimetableInvalid(
                "run_immediately is not supported by Zonda: with catchup off the latest firing already "
                "passed is run, as CronTriggerTimetable's"
            )
        self._timetables = [
            CronTriggerTimetable(cron, timezone=timezone, interval=interval) for cron in crons
        ]
        self.description = ", ".join(t.description for t in self._timetables)

    @classmethod
    def deserialize(cls, data: dict[str, Any]) -> Timetable:
        return cls(
            *data["expressions"],
            timezone=parse_timezone(data["timezone"]),
            interval=decode_delta(data.get("interval", 0.0)),
        )

    def serialize(self) -> dict[str, Any]:
        first = self._timetables[0]  # all share the timezone and interval
        return {
            "expressions": [t._expression for t in self._timetables],
            "timezone": encode_timezone(first._timezone),
            "interval": encode_delta(first._interval),
        }

    def __eq__(self, other: Any) -> bool:
        if not isinstance(other, MultipleCronTriggerTimetable):
            return NotImplemented
        return self._timetables == other._timetables

    def __hash__(self) -> int:
        return hash(tuple(t._expression for t in self._timetables))

    @property
    def summary(self) -> str:
        return ", ".join(t.summary for t in self._timetables)

    def validate(self) -> None:
        for timetable in self._timetables:
            timetable.validate()

    def infer_manual_data_interval(self, *, run_after: DateTime) -> DataInterval:
        intervals = [t.infer_manual_data_interval(run_after=run_after) for t in self._timetables]
        return min(intervals, key=lambda interval: interval.start)

    def next_dagrun_info(
        self,
        *,
        last_automated_data_interval: DataInterval | None,
        restriction: TimeRestriction,
    ) -> DagRunInfo | None:
        infos = [
            timetable.next_dagrun_info(
                last_automated_data_interval=last_automated_data_interval, restriction=restriction
            )
            for timetable in self._timetables
        ]
        found = [info for info in infos if info is not None]
        if not found:
            return None
        if restriction.catchup:
            return min(found, key=lambda info: info.logical_date)
        now = utcnow()
        due = [info for info in found if info.logical_date <= now]
        if due:
            return max(due, key=lambda info: info.logical_date)
        return min(found, key=lambda info: info.logical_date)


def _pendulum(value: dt.datetime) -> DateTime:
    import pendulum

    return pendulum.instance(coerce_utc(value))


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
