"""Custom timetables that misbehave, for the controller's time limit on user code (unit and cluster tests).

`HangingTimetable` blocks in `next_dagrun_info` and `infer_manual_data_interval` until `RELEASE` is set
(in the controller's process nobody sets it: it hangs for good, as a timetable stuck on a network call
would). `RaisingTimetable` raises `RuntimeError(DOWN)` from both.
"""

from __future__ import annotations

import threading
from datetime import timedelta

from pendulum import DateTime

from zonda.timetables import DagRunInfo, DataInterval, TimeRestriction, Timetable

RELEASE = threading.Event()
#: Set once a call has started blocking (the unit test waits on it rather than on time).
ENTERED = threading.Event()
CALLS: list[DateTime | None] = []


class HangingTimetable(Timetable):
    """Every minute, once it answers; it does not answer until `RELEASE` is set."""

    def infer_manual_data_interval(self, *, run_after: DateTime) -> DataInterval:
        ENTERED.set()
        RELEASE.wait()
        return DataInterval.exact(run_after)

    def next_dagrun_info(
        self, *, last_automated_data_interval: DataInterval | None, restriction: TimeRestriction
    ) -> DagRunInfo | None:
        CALLS.append(last_automated_data_interval.end if last_automated_data_interval else None)
        ENTERED.set()
        RELEASE.wait()
        start = restriction.earliest
        if start is None:
            return None
        if last_automated_data_interval is not None:
            start = max(start, last_automated_data_interval.end)
        return DagRunInfo.interval(start, start + timedelta(minutes=1))


DOWN = "the calendar service is down"


class RaisingTimetable(Timetable):
    """A timetable whose every answer is an exception (a bug, or a service it asks failing)."""

    def infer_manual_data_interval(self, *, run_after: DateTime) -> DataInterval:
        raise RuntimeError(DOWN)

    def next_dagrun_info(
        self, *, last_automated_data_interval: DataInterval | None, restriction: TimeRestriction
    ) -> DagRunInfo | None:
        raise RuntimeError(DOWN)
