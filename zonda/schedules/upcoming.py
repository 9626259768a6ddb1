"""The next runs a DAG's schedule will create (Airflow's `dags next-execution`), pure: `now` passed in.

Asks the timetable as the scheduler does (after the DAG's last automated data interval, kept in its
status; `startDate`, `endDate`, `catchup`, with the clock pinned at `now`), and keeps asking after
each answer, so due and future runs are listed alike.
"""

from __future__ import annotations

from datetime import datetime

from zonda.resources.models import DagSpec, DagStatus
from zonda.schedules import scheduling
from zonda.schedules.dag_plans import last_automated_interval, timetable_for
from zonda.timetables.base import DataInterval, TimeRestriction, coerce_utc, pinned_clock


def next_runs(spec: DagSpec, status: DagStatus, *, now: datetime, count: int) -> list[scheduling.DueRun]:
    """Up to `count` runs the scheduler would create next, oldest first (none for a manual-only DAG)."""
    timetable = timetable_for(spec)
    restriction = TimeRestriction(
        earliest=None if spec.start_date is None else coerce_utc(spec.start_date),
        latest=None if spec.end_date is None else coerce_utc(spec.end_date),
        catchup=spec.catchup,
    )
    last = last_automated_interval(status, [])
    runs: list[scheduling.DueRun] = []
    with pinned_clock(coerce_utc(now)):
        while len(runs) < count:
            info = timetable.next_dagrun_info(last_automated_data_interval=last, restriction=restriction)
            if info is None:
                break
            interval = DataInterval(coerce_utc(info.data_interval.start), coerce_utc(info.data_interval.end))
            if last is not None and interval == last:
                break  # the timetable does not move on (@continuous as of one instant)
            runs.append(
                scheduling.DueRun(
                    logical_date=interval.start, data_interval=interval, run_after=coerce_utc(info.run_after)
                )
            )
            last = interval
    return runs
