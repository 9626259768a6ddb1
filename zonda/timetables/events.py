"""Runs at an explicit list of instants, for schedules no rule describes (match days, launches)."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from datetime import datetime
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

__all__ = ["EventsTimetable"]


class EventsTimetable(Timetable):
    """Schedule a run at each of ``event_dates`` (duplicates are ignored), each with an exact interval.

    :param event_dates: aware datetimes; the list is held in memory, so keep it reasonably small.
    :param restrict_to_events: whether a manual run gets the most recent event as its interval (``True``)
        or the trigger time itself (``False``).
    :param presorted: skip sorting when ``event_dates`` is already in ascending order.
    :param description: display name; by default "N events between A and B".
    """

    def __init__(
        self,
        event_dates: Iterable[DateTime],
        restrict_to_events: bool = False,
        presorted: bool = False,
        description: str | None = None,
    ) -> None:
        try:
            self.event_dates = [coerce_utc(when) for when in event_dates]
        except (ValueError, AttributeError, TypeError) as exc:
            raise AirflowTimetableInvalid(f"event dates must be timezone-aware datetimes: {exc}") from exc
        if not presorted:
            self.event_dates.sort()
        self.restrict_to_events = restrict_to_events
        self._custom_description = description
        if description is None:
            if self.event_dates:
                self.description = (
                    f"{len(self.event_dates)} events between {self.event_dates[0]} and {self.event_dates[-1]}"
                )
            else:
                self.description = "No events"
            self._summary = f"{len(self.event_dates)} events"
        else:
            self._summary = description
            self.description = description

    @property
    def summary(self) -> str:
        return self._summary

    def __repr__(self) -> str:
        return self.summary

    def __eq__(self, other: Any) -> bool:
        if not isinstance(other, EventsTimetable):
            return NotImplemented
        return (self.event_dates, self.restrict_to_events, self._custom_description) == (
            other.event_dates,
            other.restrict_to_events,
            other._custom_description,
        )

    def next_dagrun_info(
        self,
        *,
        last_automated_data_interval: DataInterval | None,
        restriction: TimeRestriction,
    ) -> DagRunInfo | None:
        earliest = restriction.earliest
        if not restriction.catchup:
            current_time = utcnow()
            if earliest is None or current_time > earliest:
                earliest = current_time

        for next_event in self.event_dates:
            if earliest and next_event < earliest:
                continue
            if last_automated_data_interval and next_event <= last_automated_data_interval.end:
                continue
            break
        else:
            return None  # No events at all, or none left.

        if restriction.latest is not None and next_event > restriction.latest:
            return None

        return DagRunInfo.exact(next_event)

    def infer_manual_data_interval(self, *, run_after: DateTime) -> DataInterval:
        if not self.restrict_to_events or not self.event_dates:
            return DataInterval.exact(coerce_utc(run_after))
        # The most recent past event, or the first one if they are all in the future.
        if run_after < self.event_dates[0]:
            return DataInterval.exact(self.event_dates[0])
        past_events = itertools.dropwhile(lambda when: when > run_after, reversed(self.event_dates))
        return DataInterval.exact(next(past_events))

    def serialize(self) -> dict[str, Any]:
        """Airflow's fields, plus ``description`` when one was given (Airflow loses it on a round trip)."""
        data: dict[str, Any] = {
            "event_dates": [when.isoformat() for when in self.event_dates],
            "restrict_to_events": self.restrict_to_events,
        }
        if self._custom_description is not None:
            data["description"] = self._custom_description
        return data

    @classmethod
    def deserialize(cls, data: dict[str, Any]) -> Timetable:
        return cls(
            [coerce_utc(datetime.fromisoformat(when)) for when in data["event_dates"]],
            data.get("restrict_to_events", False),
            presorted=True,
            description=data.get("description"),
        )
