"""The controller's decision of which DagRun comes next: purely computational, no side effects.

The controller gathers a DAG's timetable, its last automated data interval, start/end dates, catchup and
``now``; :func:`decide_next_run` answers with a run that is due now, or the instant to wake up at, or that
no run will come. Creating the DagRun object (named by :func:`dagrun_name`, so that a retry after a crash
hits AlreadyExists instead of creating a duplicate) is the controller's job. To work through a backlog,
the controller feeds each created run's interval back in; :func:`catchup_backlog` does that loop for it.

The timetable is called with its clock pinned to ``now`` (:func:`zonda.timetables.base.pinned_clock`),
so the same inputs always give the same decision -- the property every test here relies on.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import datetime
from enum import Enum

from pendulum import DateTime

from zonda.timetables.base import (
    DagRunInfo,
    DataInterval,
    TimeRestriction,
    Timetable,
    coerce_utc,
    pinned_clock,
)

__all__ = [
    "DueRun",
    "NextRunDecision",
    "catchup_backlog",
    "dagrun_name",
    "decide_next_run",
    "manual_run",
]

#: Kubernetes' limit for object names that are DNS-1123 subdomains (most kinds, custom resources included).
MAX_NAME_LENGTH = 253
_HASH_LENGTH = 8
_INVALID_NAME_CHARS = re.compile(r"[^a-z0-9-]+")  # dots are valid, but not next to dashes: keep none
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


@dataclass(frozen=True, slots=True)
class DueRun:
    """A DagRun to create now: its logical date, data interval, and the time it became runnable."""

    logical_date: DateTime
    data_interval: DataInterval
    run_after: DateTime
    #: A partitioned timetable's (`CronPartitionTimetable`): the partition the run is for.
    partition_key: str | None = None
    partition_date: DateTime | None = None


@dataclass(frozen=True, slots=True)
class NextRunDecision:
    """Exactly one of: a run is ``due``; nothing is due before ``wake_at``; neither -- no run will come.

    ``reason`` is a sentence for events and status conditions, saying which case and why.
    """

    due: DueRun | None
    wake_at: DateTime | None
    reason: str


def decide_next_run(
    timetable: Timetable,
    *,
    last_automated_data_interval: DataInterval | None,
    start_date: datetime | None,
    end_date: datetime | None,
    catchup: bool,
    now: datetime,
) -> NextRunDecision:
    """Ask the timetable for the next automated run as of ``now`` and say whether it is due.

    ``start_date``/``end_date`` bound the logical date (inclusive). A run is due once ``run_after <= now``,
    unless it is the last run's data interval once more. All datetimes must be timezone-aware; the results
    are ``pendulum.DateTime`` in UTC.
    """
    pinned_now = coerce_utc(now)
    restriction = TimeRestriction(
        earliest=None if start_date is None else coerce_utc(start_date),
        latest=None if end_date is None else coerce_utc(end_date),
        catchup=catchup,
    )
    last = None if last_automated_data_interval is None else _utc_interval(last_automated_data_interval)
    try:
        with pinned_clock(pinned_now):
            info = timetable.next_dagrun_info(last_automated_data_interval=last, restriction=restriction)
        run = None if info is None else _due_run(info)
    except (OverflowError, ValueError) as error:
        if not _past_the_last_date(error):
            raise
        after = restriction.earliest if last is None else last.end
        return NextRunDecision(
            due=None,
            wake_at=None,
            reason=(
                f"timetable {type(timetable).__name__} ({timetable.summary}) has no run after "
                f"{_iso(after) if after else 'its start'}: the next would be past year 9999"
            ),
        )
    if run is None:
        return NextRunDecision(
            due=None, wake_at=None, reason=_why_no_run(timetable, last, restriction, pinned_now)
        )
    if last is not None and run.data_interval == last:
        # Creating it would collide with the last run's name forever (@continuous asked again at the same
        # ``now``, or a buggy custom timetable): nothing is due until the timetable moves on.
        return NextRunDecision(
            due=None,
            wake_at=None,
            reason=(
                f"{type(timetable).__name__} ({timetable.summary}) offered the last run's data interval "
                f"{_describe(last)} again; no new run until it moves on"
            ),
        )
    when = f"logical date {_iso(run.logical_date)} (data interval {_describe(run.data_interval)})"
    if run.run_after <= pinned_now:
        return NextRunDecision(
            due=run, wake_at=None, reason=f"run for {when} is due since {_iso(run.run_after)}"
        )
    return NextRunDecision(
        due=None, wake_at=run.run_after, reason=f"next run for {when} is due at {_iso(run.run_after)}"
    )


def _past_the_last_date(error: Exception) -> bool:
    """Whether `error` is Python's (or pendulum's) refusal of a date past 9999-12-31: the next run of a
    timetable near that date does not exist (`OverflowError: date value out of range`,
    `ValueError: year 10000 is out of range`)."""
    return isinstance(error, OverflowError) or "out of range" in str(error)


def catchup_backlog(
    timetable: Timetable,
    *,
    last_automated_data_interval: DataInterval | None,
    start_date: datetime | None,
    end_date: datetime | None,
    catchup: bool,
    now: datetime,
    limit: int,
) -> tuple[list[DueRun], NextRunDecision]:
    """All runs due at ``now`` (at most ``limit``, oldest first), and the decision that follows them.

    The trailing decision is what :func:`decide_next_run` says after the last returned run: a wake-up
    time, no more runs, or -- when ``limit`` cut the backlog short -- the next due run. The timetable's
    ``active_runs_limit`` also caps the backlog: ``@continuous`` would otherwise fill it with empty
    intervals ending at ``now``. (Runs already active are the caller's to count against ``max_active_runs``.)
    """
    if limit < 0:
        raise ValueError(f"limit must not be negative, got {limit}")
    if timetable.active_runs_limit is not None:
        limit = min(limit, timetable.active_runs_limit)
    runs: list[DueRun] = []
    last = last_automated_data_interval
    while True:
        decision = decide_next_run(
            timetable,
            last_automated_data_interval=last,
            start_date=start_date,
            end_date=end_date,
            catchup=catchup,
            now=now,
        )
        if decision.due is None or len(runs) >= limit:
            return runs, decision
        runs.append(decision.due)
        last = decision.due.data_interval


def manual_run(timetable: Timetable, *, run_after: datetime) -> DueRun:
    """A run triggered by hand at ``run_after``; as in Airflow 2, that is also its logical date."""
    when = coerce_utc(run_after)
    with pinned_clock(when):
        interval = timetable.infer_manual_data_interval(run_after=when)
    return DueRun(logical_date=when, data_interval=_utc_interval(interval), run_after=when)


def dagrun_name(
    dag_name: str,
    logical_date: datetime,
    run_type: str | Enum,
    *,
    max_length: int = MAX_NAME_LENGTH,
) -> str:
    """The DagRun's object name, ``<dag>-<run type>-<UTC logical date>``: ``etl-scheduled-20260101t000000z``.

    Deterministic, so that creating the same run twice is an AlreadyExists (and no duplicate), and valid
    as a DNS-1123 subdomain. The timestamp keeps microseconds when there are any, so that two manual runs
    in the same second stay distinct. A DAG name that is too long, or that had to be changed to be valid
    (upper case, underscores), is cut and suffixed with a hash of the original, so distinct DAGs never
    share run names. ``max_length`` can be lowered, e.g. to 63 where the name is also used as a label value.
    """
    moment = coerce_utc(logical_date)
    fraction = f"{moment.microsecond:06d}" if moment.microsecond else ""
    stamp = f"{moment.strftime('%Y%m%dt%H%M%S')}{fraction}z"
    kind = _sanitize(str(getattr(run_type, "value", run_type)))
    if not kind:
        raise ValueError(f"run type {run_type!r} has no characters usable in a Kubernetes name")
    suffix = f"-{kind}-{stamp}"
    dag = _sanitize(dag_name)
    budget = max_length - len(suffix)
    if dag != dag_name or len(dag) > budget or not dag:
        digest = hashlib.sha256(dag_name.encode()).hexdigest()[:_HASH_LENGTH]
        keep = budget - _HASH_LENGTH - 1
        if keep < 0:
            raise ValueError(f"max_length {max_length} leaves no room for a DAG name before {suffix!r}")
        dag = f"{dag[:keep].rstrip('-')}-{digest}" if dag[:keep].rstrip("-") else digest
    name = f"{dag}{suffix}"
    if len(name) > max_length:
        raise ValueError(f"max_length {max_length} is too small for DagRun name {name!r}")
    assert _DNS1123_SUBDOMAIN.match(name), name
    return name


# -- helpers ---------------------------------------------------------------------------------------------


def _sanitize(text: str) -> str:
    """Lower-case, runs of invalid characters to ``-``, and no leading/trailing dashes."""
    return _INVALID_NAME_CHARS.sub("-", text.lower()).strip("-")


def _utc_interval(interval: DataInterval) -> DataInterval:
    return DataInterval(coerce_utc(interval.start), coerce_utc(interval.end))


def _due_run(info: DagRunInfo) -> DueRun:
    interval = _utc_interval(info.data_interval)
    return DueRun(logical_date=interval.start, data_interval=interval, run_after=coerce_utc(info.run_after))


def _iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def _describe(interval: DataInterval) -> str:
    return f"{_iso(interval.start)} to {_iso(interval.end)}"


def _why_no_run(
    timetable: Timetable,
    last: DataInterval | None,
    restriction: TimeRestriction,
    now: DateTime,
) -> str:
    """Best-effort explanation of a ``None`` from the timetable, for humans reading the DAG's status."""
    name = f"{type(timetable).__name__} ({timetable.summary})"
    if not timetable.can_be_scheduled:
        return f"timetable {name} never schedules runs by itself; trigger runs manually"
    if restriction.latest is not None:
        # Would there be a run without the end date? Then the end date is what stops it.
        try:
            with pinned_clock(now):
                unbounded = timetable.next_dagrun_info(
                    last_automated_data_interval=last, restriction=restriction._replace(latest=None)
                )
        except (OverflowError, ValueError) as error:  # an end date on 9999-12-30: none after it anyway
            if not _past_the_last_date(error):
                raise
            unbounded = None
        if unbounded is not None:
            return (
                f"end_date {_iso(restriction.latest)} reached: the next logical date would be "
                f"{_iso(coerce_utc(unbounded.logical_date))}"
            )
    if restriction.earliest is None and last is None:
        return f"timetable {name} needs a start_date to schedule the first run"
    if last is not None:
        return f"timetable {name} has no run after the data interval {_describe(last)}"
    return f"timetable {name} has no run to schedule"
