"""Airflow 2.x's timetable protocol, so that Airflow timetables run on Zonda with only their imports changed.

The names, fields and keyword-only signatures are Airflow's (``airflow/timetables/base.py``):
``DataInterval``, ``TimeRestriction``, ``DagRunInfo`` and the ``Timetable`` base class with
``next_dagrun_info(*, last_automated_data_interval, restriction)``.

The clock
---------
Airflow's timetables read the wall clock themselves (``_skip_to_latest`` calls ``utcnow()`` when catchup is
off), which makes a scheduling decision depend on when it is computed and forces tests into time travel.
Zonda keeps Airflow's signature -- adding a ``now`` parameter would break every user timetable -- and instead
makes the clock injectable: :func:`utcnow` is the single clock read in the whole ``zonda`` package, and it
returns the instant pinned in the :data:`current_time` context variable when one is set.
``zonda.schedules.scheduling`` pins it to the controller's ``now`` around every timetable call (see
:func:`pinned_clock`), so the built-in timetables, and custom timetables that ask
``zonda.timetables.base.utcnow()`` for the time, are pure functions of their arguments.
Only outside a pinned block (a REPL, a user's own script) does :func:`utcnow` fall back to the real clock.
A custom timetable that reads the clock some other way (``pendulum.today()``, ``Date.today()``) still works,
but its decisions then depend on real time; test those with ``time_machine``.

Every datetime the built-in timetables return is a ``pendulum.DateTime`` in UTC, as in Airflow.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime
from typing import Any, NamedTuple

import pendulum
from pendulum import DateTime

__all__ = [
    "AirflowTimetableInvalid",
    "DagRunInfo",
    "DataInterval",
    "TimeRestriction",
    "Timetable",
    "coerce_utc",
    "current_time",
    "pinned_clock",
    "utcnow",
]


class AirflowTimetableInvalid(ValueError):
    """A timetable is wrongly specified: a bad cron expression, an unknown timezone, a non-positive delta.

    Airflow derives it from ``AirflowException``; here it is a :class:`ValueError` so that configuration
    code can catch one familiar type, while ``except AirflowTimetableInvalid`` keeps working for ported code.
    """


#: The instant :func:`utcnow` reports while set. ``zonda.schedules.scheduling`` sets it; nothing else should
#: need to.
current_time: ContextVar[DateTime | None] = ContextVar("zonda_timetables_current_time", default=None)


def utcnow() -> DateTime:
    """Return the pinned scheduling time, or -- only when nothing pinned it -- the real UTC time.

    This is deliberately the one place in ``zonda`` that may read the system clock.
    """
    pinned = current_time.get()
    if pinned is not None:
        return pinned
    return pendulum.now(pendulum.UTC)


@contextmanager
def pinned_clock(now: datetime) -> Iterator[DateTime]:
    """Make :func:`utcnow` answer ``now`` inside the block (and in tasks it spawns), then restore it."""
    pinned = coerce_utc(now)
    token = current_time.set(pinned)
    try:
        yield pinned
    finally:
        current_time.reset(token)


def coerce_utc(value: datetime) -> DateTime:
    """Convert an aware datetime to a ``pendulum.DateTime`` in UTC; refuse naive ones.

    Naive datetimes are refused rather than guessed at: a schedule silently shifted by the host's
    offset is the kind of bug that only shows up twice a year.
    """
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"datetime {value.isoformat()} is naive; scheduling needs timezone-aware datetimes")
    if isinstance(value, DateTime) and value.tzinfo == pendulum.UTC:
        return value
    return pendulum.instance(value).in_timezone(pendulum.UTC)


class DataInterval(NamedTuple):
    """The span of data a DagRun operates over; both ends are aware and ``start <= end``."""

    start: DateTime
    end: DateTime

    @classmethod
    def exact(cls, at: DateTime) -> DataInterval:
        """Represent an "interval" containing only an exact time."""
        return cls(start=at, end=at)


class TimeRestriction(NamedTuple):
    """What the DAG allows: no logical date before ``earliest`` nor after ``latest`` (both inclusive).

    With ``catchup`` false, missed schedules are not backfilled: the timetable skips to the present.
    Both bounds apply to the run's *logical date* (the start of its data interval), not to when it runs.
    """

    earliest: DateTime | None
    latest: DateTime | None
    catchup: bool


class DagRunInfo(NamedTuple):
    """When to create the next DagRun (``run_after``) and what data it covers (``data_interval``)."""

    run_after: DateTime
    """The earliest time this DagRun is created and its tasks scheduled; aware."""

    data_interval: DataInterval
    """The data interval this DagRun operates over."""

    @classmethod
    def exact(cls, at: DateTime) -> DagRunInfo:
        """Represent a run on an exact time."""
        return cls(run_after=at, data_interval=DataInterval.exact(at))

    @classmethod
    def interval(cls, start: DateTime, end: DateTime) -> DagRunInfo:
        """Represent a run scheduled right after its data interval ends (cron and delta schedules)."""
        return cls(run_after=end, data_interval=DataInterval(start, end))

    @property
    def logical_date(self) -> DateTime:
        """The run's logical date (``execution_date`` before Airflow 2.2): its data interval's start."""
        return self.data_interval.start


class Timetable:
    """Base class of every timetable; subclass it and override what your schedule needs.

    In Airflow this is a ``Protocol`` that timetables subclass anyway; here it is a plain base class,
    which is what subclassing code needs and lets ``load_timetable`` check ``issubclass``.
    """

    description: str = ""
    """Human-readable description of the timetable, e.g. for a UI or ``kubectl describe``."""

    periodic: bool = True
    """Whether this timetable runs periodically (``None`` and ``@once`` schedules do not)."""

    can_be_scheduled: bool = True
    """Whether this timetable schedules runs by itself at all (``NullTimetable`` does not)."""

    run_ordering: Sequence[str] = ("data_interval_end", "execution_date")
    """How runs of this timetable are ordered for display: field names on the DagRun."""

    active_runs_limit: int | None = None
    """Default for the DAG's ``max_active_runs``; ``ContinuousTimetable`` sets 1."""

    @classmethod
    def deserialize(cls, data: dict[str, Any]) -> Timetable:
        """Rebuild a timetable from what :meth:`serialize` returned; by default, with no arguments."""
        return cls()

    def serialize(self) -> dict[str, Any]:
        """Return a JSON-serializable dict that :meth:`deserialize` turns back into an equal timetable."""
        return {}

    def validate(self) -> None:
        """Raise :class:`AirflowTimetableInvalid` if the timetable is wrongly specified."""
        return

    @property
    def summary(self) -> str:
        """A short summary for display, e.g. the cron expression; by default the class name."""
        return type(self).__name__

    def infer_manual_data_interval(self, *, run_after: DateTime) -> DataInterval:
        """Infer the data interval of a run triggered by hand at ``run_after``."""
        raise NotImplementedError()

    def next_dagrun_info(
        self,
        *,
        last_automated_data_interval: DataInterval | None,
        restriction: TimeRestriction,
    ) -> DagRunInfo | None:
        """Describe the next automated run, or return ``None`` if no run should happen (for now).

        ``last_automated_data_interval`` is the data interval of the DAG's last scheduled or backfilled
        run (manual runs do not count); ``None`` before the first one.
        """
        raise NotImplementedError()

    def generate_run_id(
        self,
        *,
        run_type: Any,
        logical_date: DateTime,
        data_interval: DataInterval | None,
        **extra: Any,
    ) -> str:
        """Airflow's run id: ``<run_type>__<logical date in ISO 8601>``.

        ``run_type`` may be a string or a string enum (Airflow's ``DagRunType`` is one); Kubernetes
        object names come from ``zonda.schedules.scheduling.dagrun_name`` instead, since run ids are not DNS
        names.
        """
        kind = getattr(run_type, "value", run_type)
        return f"{kind}__{logical_date.isoformat()}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.summary!r})"
