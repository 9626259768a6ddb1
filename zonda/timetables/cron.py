"""Cron expressions evaluated in an IANA timezone, exactly, across daylight-saving transitions.

Why not Airflow's approach
--------------------------
Airflow steps croniter over naive wall-clock times and converts each result with ``make_aware``, patching
hourly schedules separately. Near transitions its ``_get_next`` and ``_get_prev`` stop being inverses of one
another, which is how ``_skip_to_latest`` crashed with "next schedule shouldn't be earlier" (apache/airflow
#30088), how scheduling got stuck re-creating an existing run (#35272, #35558), and why runs in the skipped
hour appear "skipped" (#38098). Here a cron schedule is first defined as a *set of instants*, and
``next_after``/``prev_before`` are exact lookups in that set, so they are strictly monotonic and inverse to
each other by construction: no run is skipped, none is duplicated, and the scheduler always makes progress.

The set of instants (the DST semantics)
---------------------------------------
For every local wall-clock time ``w`` that the cron expression matches (day-of-month, month and weekday
are matched on the local date):

* ``w`` exists once: it fires at that instant.
* ``w`` is skipped by a spring-forward gap (``0 2 * * *`` on the last Sunday of March in Europe/Berlin):
  it fires at the first instant at which the wall clock reads ``w`` or later, which is the moment of the
  jump (03:00 CEST). This is what Vixie cron and cronie do ("jobs in the skipped hour run immediately after
  the change"), and it keeps one run per day instead of silently losing one.
* ``w`` happens twice in a fall-back fold (``30 1 * * *`` on the first Sunday of November in
  America/New_York): a schedule with a fixed hour fires once, because "daily at 01:30" means once a day,
  at the *later* occurrence (01:30 EST) -- where Airflow fires it (its ``make_aware`` reads an ambiguous
  wall time after the transition), so a migrated DAG runs at the same instants;
  ``ambiguous_time="earlier"`` chooses the first occurrence (01:30 EDT) instead. A schedule whose hour
  field is ``*`` (``0 * * * *``,
  ``*/15 * * * *``) fires at *both* occurrences, because it means "every hour on the clock" and an
  hour-long hole in an hourly series would be a skipped run. (Airflow draws the same line, see its
  ``_covers_every_hour``.)

Several wall times may collapse onto one instant (``0 2,3 * * *`` on the spring-forward day fires once at
03:00); the set simply contains it once. Data intervals between consecutive instants therefore last 23 or
25 hours around transitions for daily schedules, which is the honest length of those local days.

Only the standard five fields are accepted (plus Airflow's ``@`` presets): croniter's sixth (seconds) and
seventh (year) fields are extensions whose meaning differs between cron libraries, and its ``R`` (random)
and ``H`` (hashed) tokens would make a schedule depend on the process evaluating it.
"""

from __future__ import annotations

import contextlib
import copy
import datetime as dt
import functools
from collections.abc import Iterator
from typing import Any
from zoneinfo import ZoneInfo

import pendulum
from croniter import CroniterBadDateError, croniter
from pendulum import DateTime
from pendulum.tz.timezone import FixedTimezone, Timezone

from zonda.timetables.base import AirflowTimetableInvalid

__all__ = [
    "AMBIGUOUS_TIME_CHOICES",
    "CRON_PRESETS",
    "CronMixin",
    "CronSchedule",
    "encode_timezone",
    "parse_timezone",
]

#: Airflow's ``airflow.utils.dates.cron_presets`` plus the two aliases classic cron also knows.
CRON_PRESETS: dict[str, str] = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
    "@quarterly": "0 0 1 */3 *",
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
}

_UTC = dt.UTC
#: Which occurrence of a wall time a fall-back repeats fires a fixed-hour schedule: Airflow's or the first.
LATER, EARLIER = "later", "earlier"
AMBIGUOUS_TIME_CHOICES = (LATER, EARLIER)
# Longer than any fold in today's tzdata rules (Antarctica/Troll's 2 h is the largest), and short enough to
# hold at most one transition; see CronSchedule._fold_margin.
_TRANSITION_HORIZON = dt.timedelta(hours=26)
_RESOLUTION = dt.timedelta(microseconds=1)
# croniter needs a start to probe an expression with; any fixed date does, as long as it is fixed.
_PROBE_START = dt.datetime(2001, 1, 1)

TimezoneLike = str | int | Timezone | FixedTimezone | ZoneInfo


def parse_timezone(value: TimezoneLike) -> Timezone | FixedTimezone:
    """Resolve an IANA name (or Airflow's serialized fixed offset in seconds) to a pendulum timezone."""
    if isinstance(value, Timezone | FixedTimezone):
        return value
    if isinstance(value, ZoneInfo):
        value = value.key
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise AirflowTimetableInvalid(
            f"unknown timezone {value!r}: expected an IANA name such as 'Europe/Berlin'"
        )
    if isinstance(value, str) and not value.strip():
        raise AirflowTimetableInvalid("unknown timezone '': expected an IANA name such as 'Europe/Berlin'")
    try:
        return pendulum.timezone(value)
    except (ValueError, KeyError, OSError, TypeError) as exc:
        raise AirflowTimetableInvalid(
            f"unknown timezone {value!r}: expected an IANA name such as 'Europe/Berlin' or 'UTC'"
        ) from exc


def encode_timezone(tz: Timezone | FixedTimezone) -> str | int:
    """Airflow's encoding: the IANA name, ``"UTC"`` for a zero offset, else the fixed offset in seconds."""
    if isinstance(tz, FixedTimezone):
        return "UTC" if tz.offset == 0 else tz.offset
    return tz.name


def _validate_expression(expression: str) -> croniter:
    """The expression parsed (a croniter to copy, never to step: see `CronSchedule._walls`), or
    `AirflowTimetableInvalid`; parsed once per process (`_parse`), as every DAG pass builds its timetable."""
    return _parse(expression)


@functools.lru_cache(maxsize=1024)
def _parse(expression: str) -> croniter:
    fields = expression.split()
    if expression.strip() == "@once":
        raise AirflowTimetableInvalid("cron expression '@once' is not a cron schedule: use OnceTimetable")
    if len(fields) != 5:
        raise AirflowTimetableInvalid(
            f"invalid cron expression {expression!r}: expected 5 fields (minute hour day-of-month month "
            f"day-of-week) or one of {', '.join(CRON_PRESETS)}; got {len(fields)} field(s)"
        )
    for field in fields:
        for item in field.split(","):
            if item[:1].upper() in ("H", "R"):
                raise AirflowTimetableInvalid(
                    f"invalid cron expression {expression!r}: {item!r} is a croniter extension (hashed or "
                    "random) that Zonda does not support: a schedule must not depend on who computes it"
                )
    try:
        probe = croniter(expression, _PROBE_START)
        probe.get_next(dt.datetime)
    except CroniterBadDateError as exc:
        raise AirflowTimetableInvalid(f"invalid cron expression {expression!r}: it never fires") from exc
    except Exception as exc:  # croniter raises ValueError, KeyError, IndexError... for malformed fields.
        raise AirflowTimetableInvalid(f"invalid cron expression {expression!r}: {exc}") from exc
    return probe


#: Pairs of consecutive firing instants found (pendulum UTC instants, immutable: returned as they are),
#: per schedule (expression, timezone, ambiguous time), the newest last: every CronSchedule of that
#: schedule shares them. At a minute boundary 1,000 DAGs on `* * * * *` each ask for the same few
#: neighbours (a catch-up decision asks five times), and the scans behind those answers were most of a
#: DAG pass (py-spy, 1,000 DAGs). The schedule being a fixed set of instants and the two lookups exact
#: (see the module docstring), a bracket (a, b) of consecutive instants answers next_after(t) = b for
#: a <= t < b and prev_before(t) = a for a < t <= b.
_BRACKETS: dict[tuple[str, str | int, str], tuple[tuple[DateTime, DateTime], ...]] = {}
_BRACKETS_PER_SCHEDULE = 8
_SCHEDULES_REMEMBERED = 4096


class CronSchedule:
    """The instants at which a five-field cron expression fires in a timezone (see the module docstring).

    Wall-clock candidates come from croniter on naive local times; each is mapped to its first (and, for
    every-hour schedules, last) occurrence. Both mappings are monotonic in the wall time, so a scan returns
    at the first candidate past ``t`` -- provided it starts early enough, because inside a fold wall times
    before ``wall(t)`` can map after ``t`` (and after it, before). :meth:`_fold_margin` widens the start by
    exactly that overlap, so only scans that start inside a fold take extra steps.
    """

    def __init__(
        self, expression: str, timezone: Timezone | FixedTimezone, *, ambiguous_time: str = LATER
    ) -> None:
        probe = _validate_expression(expression)
        if ambiguous_time not in AMBIGUOUS_TIME_CHOICES:
            raise AirflowTimetableInvalid(
                f"ambiguous_time must be one of {', '.join(AMBIGUOUS_TIME_CHOICES)}, not {ambiguous_time!r}"
            )
        self.expression = expression
        self.timezone = timezone
        self.ambiguous_time = ambiguous_time
        # croniter normalises full ranges (0-23, */1) to "*".
        self.covers_every_hour: bool = probe.expanded[1] == ["*"]
        # Parsing dominates croniter's cost; scans copy this parsed prototype instead (see _walls).
        self._prototype = probe
        self._key = (expression, encode_timezone(timezone), ambiguous_time)

    def next_after(self, current: dt.datetime) -> DateTime:
        """The first firing instant strictly after ``current``."""
        t = _aware(current).astimezone(_UTC)
        for before, after in _BRACKETS.get(self._key, ()):
            if before <= t < after:
                return after
        found = _to_pendulum(self._scan_next_after(t))
        with contextlib.suppress(OverflowError):  # no instant before year 1 to bracket with
            earlier = self._scan_prev_before(found)
            if earlier <= t:  # the instants either side of t: a bracket (always, the lookups being exact)
                self._remember(_to_pendulum(earlier), found)
        return found

    def prev_before(self, current: dt.datetime) -> DateTime:
        """The last firing instant strictly before ``current``."""
        t = _aware(current).astimezone(_UTC)
        for before, after in _BRACKETS.get(self._key, ()):
            if before < t <= after:
                return before
        found = _to_pendulum(self._scan_prev_before(t))
        with contextlib.suppress(OverflowError):  # none after year 9999
            later = self._scan_next_after(found)
            if t <= later:
                self._remember(found, _to_pendulum(later))
        return found

    def _remember(self, before: DateTime, after: DateTime) -> None:
        if len(_BRACKETS) >= _SCHEDULES_REMEMBERED and self._key not in _BRACKETS:
            _BRACKETS.clear()  # schedules by the thousand: start again rather than grow without end
        kept = _BRACKETS.get(self._key, ())
        _BRACKETS[self._key] = (*kept, (before, after))[-_BRACKETS_PER_SCHEDULE:]

    def _scan_next_after(self, t: dt.datetime) -> dt.datetime:
        """`next_after` of a UTC instant, by stepping croniter over wall times."""
        start = self._wall(t)
        if self.covers_every_hour or self.ambiguous_time == LATER:
            start -= self._fold_margin(t, ahead=True)
        if not self.covers_every_hour and self.ambiguous_time == LATER:
            for wall in self._walls(start, forward=True):  # the last occurrence is monotonic in the wall
                if (last := self._occurrences(wall)[1]) > t:
                    return last
        best: dt.datetime | None = None
        for wall in self._walls(start, forward=True):
            first, last = self._occurrences(wall)
            if first > t:
                return first if best is None else min(best, first)
            if self.covers_every_hour and last > t and (best is None or last < best):
                best = last
        raise AssertionError("unreachable: croniter iterates without end")  # pragma: no cover

    def _scan_prev_before(self, t: dt.datetime) -> dt.datetime:
        """`prev_before` of a UTC instant, by stepping croniter over wall times."""
        start = self._wall(t) + self._fold_margin(t, ahead=False)
        if not self.covers_every_hour and self.ambiguous_time == LATER:
            for wall in self._walls(start, forward=False):
                if (last := self._occurrences(wall)[1]) < t:
                    return last
        best: dt.datetime | None = None
        for wall in self._walls(start, forward=False):
            first, last = self._occurrences(wall)
            top = last if self.covers_every_hour else first
            if top < t:
                return top if best is None else max(best, top)
            if first < t and (best is None or first > best):
                best = first
        raise AssertionError("unreachable: croniter iterates without end")  # pragma: no cover

    def at_or_after(self, current: dt.datetime) -> DateTime:
        """``current`` if it is a firing instant, else the next one (firings have microsecond precision)."""
        aware = _aware(current)
        try:
            return self.next_after(aware - _RESOLUTION)
        except OverflowError:
            # the first instant there is (Airflow's example_outlet_event_extra starts at datetime.min):
            # nothing before it to step from: it, if it is a firing (the last wall time before the second
            # after it is its own), else the next
            wall = self._wall(aware)
            with contextlib.suppress(OverflowError):
                if next(self._walls(wall + dt.timedelta(seconds=1), forward=False)) == wall:
                    return _to_pendulum(aware.astimezone(_UTC))
            return self.next_after(aware)

    def at_or_before(self, current: dt.datetime) -> DateTime:
        """``current`` if it is a firing instant, else the previous one."""
        return self.prev_before(_aware(current) + _RESOLUTION)

    # -- internals -------------------------------------------------------------------------------------

    def _wall(self, t: dt.datetime) -> dt.datetime:
        return t.astimezone(self.timezone).replace(tzinfo=None, fold=0)

    def _walls(self, start: dt.datetime, *, forward: bool) -> Iterator[dt.datetime]:
        """Matching naive wall times strictly after (or before) ``start``, in order.

        croniter holds its current time as a float timestamp, which keeps microseconds only within about
        285 years of 1970: before 1685 or after 2255 a start a microsecond off a firing lost it, and a
        lookup returned the firing itself or skipped one (a daily backfill from year 1 planned one date,
        `at_or_before` going back a day). Firings are whole seconds (whole minutes of wall time), so
        croniter starts from the whole second at or before ``start`` (forward) or at or after it
        (backward): no firing lies between the two, and whole seconds are exact as floats to year 9999.
        """
        if start.microsecond:
            start = start.replace(microsecond=0)
            if not forward:
                # the second after (none after 9999-12-31 23:59:59, which is no whole minute's firing)
                with contextlib.suppress(OverflowError):
                    start += dt.timedelta(seconds=1)
        iterator = copy.copy(self._prototype)  # shallow: the parsed fields are only read
        iterator.set_current(start, force=True)
        step = iterator.get_next if forward else iterator.get_prev
        while True:
            wall = step(dt.datetime)
            assert isinstance(wall, dt.datetime)
            yield wall

    def _fold_margin(self, t: dt.datetime, *, ahead: bool) -> dt.timedelta:
        """How much further than ``wall(t)`` a scan must start so that no fold occurrence is missed.

        Only a fall-back within ``_TRANSITION_HORIZON`` (ahead of ``t`` for ``next_after``, behind it for
        ``prev_before``) matters, and only by the part of the fold that overlaps ``t``'s wall time:
        ``fold length - |T - t|``. Elsewhere the margin is zero and scans take no extra step.
        """
        try:
            lo, hi = (t, t + _TRANSITION_HORIZON) if ahead else (t - _TRANSITION_HORIZON, t)
            before = lo.astimezone(self.timezone).utcoffset()
            after = hi.astimezone(self.timezone).utcoffset()
        except OverflowError:  # within a day of year 1 or 9999: no tzdata transition there, no fold
            return dt.timedelta(0)
        assert before is not None and after is not None
        if after >= before:
            return dt.timedelta(0)
        transition = self._transition_within(lo, hi)
        # Scans exclude their start, and a wall time exactly ``fold length`` away still needs a visit.
        return max(before - after - abs(transition - t), dt.timedelta(0)) + _RESOLUTION

    def _occurrences(self, wall: dt.datetime) -> tuple[dt.datetime, dt.datetime]:
        """The first and last UTC instants at which the local clock reads ``wall``.

        Python's ``fold`` attribute (PEP 495) gives both readings of an ambiguous time; for a time inside a
        gap, ``fold=0`` applies the offset from before the jump and ``fold=1`` the one after, so the two
        conversions come out in reverse order -- which is how a gap is recognised.
        """
        early = wall.replace(tzinfo=self.timezone, fold=0).astimezone(_UTC)
        late = wall.replace(tzinfo=self.timezone, fold=1).astimezone(_UTC)
        if early <= late:
            return early, late
        jump = self._transition_within(late, early)
        return jump, jump

    def _transition_within(self, lo: dt.datetime, hi: dt.datetime) -> dt.datetime:
        """The instant in ``(lo, hi]`` where the offset changes (to ``hi``'s), found by bisection.

        tzdata transitions fall on whole seconds; the ranges searched are at most a day and a bit, so this
        is at most 17 offset look-ups, on the two days a year that need it.
        """
        target = hi.astimezone(self.timezone).utcoffset()
        lo_s, hi_s = int(lo.timestamp()), int(hi.timestamp())
        while hi_s - lo_s > 1:
            mid = (lo_s + hi_s) // 2
            if dt.datetime.fromtimestamp(mid, self.timezone).utcoffset() == target:
                hi_s = mid
            else:
                lo_s = mid
        return dt.datetime.fromtimestamp(hi_s, _UTC)


def _aware(value: dt.datetime) -> dt.datetime:
    """Refuse naive datetimes: ``astimezone`` would silently read them in the host's local time."""
    if value.tzinfo is None:
        raise ValueError(f"datetime {value.isoformat()} is naive; scheduling needs timezone-aware datetimes")
    return value


def _to_pendulum(value: dt.datetime) -> DateTime:
    return pendulum.instance(value).in_timezone(pendulum.UTC)


class CronMixin:
    """What cron-based timetables share: the expression, its timezone, and exact next/prev lookups."""

    description: str

    def __init__(self, cron: str, timezone: TimezoneLike, *, ambiguous_time: str = LATER) -> None:
        if not isinstance(cron, str):
            raise AirflowTimetableInvalid(f"invalid cron expression {cron!r}: expected a string")
        self._expression = CRON_PRESETS.get(cron.strip(), cron.strip())
        self._timezone = parse_timezone(timezone)
        self._schedule = CronSchedule(self._expression, self._timezone, ambiguous_time=ambiguous_time)
        self._ambiguous_time = ambiguous_time
        self.description = f"cron {self._expression!r} in {encode_timezone(self._timezone)}"

    def _serialized_ambiguous_time(self) -> dict[str, Any]:
        """Only the non-default choice is written, so specs serialized before it existed stay equal."""
        return {} if self._ambiguous_time == LATER else {"ambiguous_time": self._ambiguous_time}

    def __eq__(self, other: Any) -> bool:
        if not isinstance(other, type(self)):
            return NotImplemented
        return bool(
            self._expression == other._expression
            and encode_timezone(self._timezone) == encode_timezone(other._timezone)
            and self._ambiguous_time == other._ambiguous_time
        )

    @property
    def summary(self) -> str:
        return self._expression

    def validate(self) -> None:
        _validate_expression(self._expression)

    def _get_next(self, current: DateTime) -> DateTime:
        """The first schedule strictly after ``current``."""
        return self._schedule.next_after(current)

    def _get_prev(self, current: DateTime) -> DateTime:
        """The last schedule strictly before ``current``."""
        return self._schedule.prev_before(current)

    def _align_to_next(self, current: DateTime) -> DateTime:
        """``current`` if it is a scheduled instant, else the next one.

        Airflow computes ``get_prev(get_next(current)) == current``; with exact lookups that is the same
        as one lookup from a microsecond earlier.
        """
        return self._schedule.at_or_after(current)

    def _align_to_prev(self, current: DateTime) -> DateTime:
        """``current`` if it is a scheduled instant, else the previous one."""
        return self._schedule.at_or_before(current)
