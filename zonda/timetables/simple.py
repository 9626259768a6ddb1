"""Timetables without a period: ``None`` (never), ``@once`` and ``@continuous``."""

from __future__ import annotations

from typing import Any

from pendulum import DateTime

from zonda.timetables.base import DagRunInfo, DataInterval, TimeRestriction, Timetable, coerce_utc, utcnow

__all__ = ["ContinuousTimetable", "NullTimetable", "OnceTimetable"]


class _TrivialTimetable(Timetable):
    """Parameterless timetables: equal to any instance of the same class, serialized as ``{}``."""

    periodic = False
    run_ordering = ("execution_date",)

    @classmethod
    def deserialize(cls, data: dict[str, Any]) -> Timetable:
        return cls()

    def __eq__(self, other: Any) -> bool:
        if not isinstance(other, type(self)):
            return NotImplemented
        return True

    def serialize(self) -> dict[str, Any]:
        return {}

    def infer_manual_data_interval(self, *, run_after: DateTime) -> DataInterval:
        return DataInterval.exact(coerce_utc(run_after))


class NullTimetable(_TrivialTimetable):
    """Never schedules anything: runs are only triggered by hand. This is ``schedule=None``."""

    can_be_scheduled = False
    description: str = "Never, external triggers only"

    @property
    def summary(self) -> str:
        return "None"

    def next_dagrun_info(
        self,
        *,
        last_automated_data_interval: DataInterval | None,
        restriction: TimeRestriction,
    ) -> DagRunInfo | None:
        return None


class OnceTimetable(_TrivialTimetable):
    """One run, at the start date, whatever catchup says. This is ``schedule="@once"``.

    Without a start date it never runs (Airflow 2.x; Airflow 3 runs it immediately instead).
    """

    description: str = "Once, as soon as possible"

    @property
    def summary(self) -> str:
        return "@once"

    def next_dagrun_info(
        self,
        *,
        last_automated_data_interval: DataInterval | None,
        restriction: TimeRestriction,
    ) -> DagRunInfo | None:
        if last_automated_data_interval is not None:
            return None  # Already run, no more scheduling.
        if restriction.earliest is None:
            return None  # No start date, won't run.
        run_after = coerce_utc(restriction.earliest)
        if restriction.latest is not None and run_after > restriction.latest:
            return None
        return DagRunInfo.exact(run_after)


class ContinuousTimetable(_TrivialTimetable):
    """A new run as soon as the previous one is done, one at a time. This is ``schedule="@continuous"``.

    Each run's data interval spans from the end of the previous one to the (pinned) current time.
    """

    description: str = "As frequently as possible, but only one run at a time."

    active_runs_limit = 1  # Continuous DagRuns are constrained to one run at a time.

    @property
    def summary(self) -> str:
        return "@continuous"

    def next_dagrun_info(
        self,
        *,
        last_automated_data_interval: DataInterval | None,
        restriction: TimeRestriction,
    ) -> DagRunInfo | None:
        if restriction.earliest is None:  # No start date, won't run.
            return None

        current_time = utcnow()
        earliest = coerce_utc(restriction.earliest)

        if last_automated_data_interval is not None:  # Has already run once.
            if last_automated_data_interval.end > current_time:  # The start date is in the future.
                start = earliest
                end = start + (last_automated_data_interval.end - last_automated_data_interval.start)
            else:
                start = coerce_utc(last_automated_data_interval.end)
                end = current_time
        else:  # First run.
            start = earliest
            end = max(earliest, current_time)

        if restriction.latest is not None and end > restriction.latest:
            return None

        return DagRunInfo.interval(start, coerce_utc(end))
