"""Properties every timetable sequence must have, in every timezone, especially across DST transitions.

Start instants are drawn near the real 2024-2025 offset transitions of each zone (found by bisection
below), where schedules break if they are going to: Lord Howe shifts by 30 minutes, Chatham sits at
+12:45/+13:45, Kolkata never shifts.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
from collections.abc import Iterator

import pendulum
from hypothesis import given, settings
from hypothesis import strategies as st
from pendulum import DateTime

from zonda.schedules.scheduling import decide_next_run
from zonda.timetables import (
    CronDataIntervalTimetable,
    CronTriggerTimetable,
    DataInterval,
    DeltaDataIntervalTimetable,
    EventsTimetable,
    TimeRestriction,
    Timetable,
)
from zonda.timetables.cron import parse_timezone

TIMEZONES = [
    "UTC",
    "Europe/Berlin",
    "America/New_York",
    "Asia/Kolkata",
    "Australia/Lord_Howe",
    "Pacific/Chatham",
]
CRONS = [
    "0 * * * *",
    "*/20 * * * *",
    "0 0 * * *",
    "0 2 * * *",
    "30 1 * * *",
    "45 2 * * *",
    "20 */4 * * *",
    "0 9-17 * * 1-5",
    "0 3 * * 0",
    "0 0 1 * *",
]


def _offset(tz: dt.tzinfo, instant: dt.datetime) -> dt.timedelta | None:
    return instant.astimezone(tz).utcoffset()


def _transitions(name: str) -> list[dt.datetime]:
    tz = parse_timezone(name)
    found: list[dt.datetime] = []
    day = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    while day.year < 2026:
        lo, hi = day, day + dt.timedelta(days=1)
        if _offset(tz, lo) != _offset(tz, hi):
            while hi - lo > dt.timedelta(minutes=1):
                mid = lo + (hi - lo) / 2
                lo, hi = (mid, hi) if _offset(tz, mid) == _offset(tz, lo) else (lo, mid)
            found.append(hi)
        day += dt.timedelta(days=1)
    return found or [dt.datetime(2024, 6, 1, tzinfo=dt.UTC)]


TRANSITIONS = {name: _transitions(name) for name in TIMEZONES}


@st.composite
def near_a_transition(draw: st.DrawFn, tz: str) -> DateTime:
    anchor = draw(st.sampled_from(TRANSITIONS[tz]))
    seconds = draw(st.integers(-3 * 86400, 86400))
    return pendulum.instance(anchor + dt.timedelta(seconds=seconds)).in_timezone("UTC")


@st.composite
def cron_cases(draw: st.DrawFn) -> tuple[str, str, DateTime]:
    tz = draw(st.sampled_from(TIMEZONES))
    return draw(st.sampled_from(CRONS)), tz, draw(near_a_transition(tz))


def automated_runs(timetable: Timetable, earliest: DateTime, count: int) -> Iterator[DataInterval]:
    last: DataInterval | None = None
    for _ in range(count):
        info = timetable.next_dagrun_info(
            last_automated_data_interval=last, restriction=TimeRestriction(earliest, None, True)
        )
        assert info is not None
        assert isinstance(info.run_after, DateTime) and info.run_after.timezone_name == "UTC"
        yield info.data_interval
        last = info.data_interval


def test_the_sampled_zones_really_have_transitions() -> None:
    assert len(TRANSITIONS["Europe/Berlin"]) == 4 and len(TRANSITIONS["Australia/Lord_Howe"]) == 4
    assert TRANSITIONS["Asia/Kolkata"] == [dt.datetime(2024, 6, 1, tzinfo=dt.UTC)]


@settings(max_examples=60, deadline=None)
@given(cron_cases())
def test_cron_intervals_are_contiguous_and_increasing(case: tuple[str, str, DateTime]) -> None:
    cron, tz, earliest = case
    timetable = CronDataIntervalTimetable(cron, tz)
    intervals = list(automated_runs(timetable, earliest, 8))
    assert intervals[0].start >= earliest
    for interval in intervals:
        assert interval.start < interval.end
        assert interval.start.timezone_name == interval.end.timezone_name == "UTC"
    for before, after in itertools.pairwise(intervals):
        assert after.start == before.end


@settings(max_examples=60, deadline=None)
@given(cron_cases())
def test_cron_triggers_strictly_increase(case: tuple[str, str, DateTime]) -> None:
    cron, tz, earliest = case
    timetable = CronTriggerTimetable(cron, timezone=tz)
    runs = [interval.end for interval in automated_runs(timetable, earliest, 8)]
    assert runs[0] >= earliest
    assert all(a < b for a, b in itertools.pairwise(runs))


@settings(max_examples=30, deadline=None)
@given(case=cron_cases(), steps=st.lists(st.integers(1, 6 * 3600), min_size=10, max_size=20))
def test_a_controller_without_catchup_never_repeats_or_overlaps_runs(
    case: tuple[str, str, DateTime], steps: list[int]
) -> None:
    """Drive decide_next_run like the controller does: wake up at arbitrary times, create what is due."""
    cron, tz, now = case
    timetable = CronDataIntervalTimetable(cron, tz)
    start_date = now - dt.timedelta(days=2)
    last: DataInterval | None = None
    created: list[DataInterval] = []
    for step in steps:
        decision = decide_next_run(
            timetable,
            last_automated_data_interval=last,
            start_date=start_date,
            end_date=None,
            catchup=False,
            now=now,
        )
        if decision.due is not None:
            assert decision.due.run_after <= now
            created.append(decision.due.data_interval)
            last = decision.due.data_interval
        else:
            assert decision.wake_at is not None and decision.wake_at > now
        now = now + dt.timedelta(seconds=step)
    for before, after in itertools.pairwise(created):
        assert before.end <= after.start


@settings(max_examples=60, deadline=None)
@given(
    delta=st.timedeltas(min_value=dt.timedelta(minutes=1), max_value=dt.timedelta(days=3)),
    earliest=near_a_transition("Europe/Berlin"),
)
def test_delta_intervals_are_contiguous_and_of_fixed_length(delta: dt.timedelta, earliest: DateTime) -> None:
    intervals = list(automated_runs(DeltaDataIntervalTimetable(delta), earliest, 6))
    assert intervals[0].start == earliest
    assert all(interval.end - interval.start == delta for interval in intervals)
    assert all(a.end == b.start for a, b in itertools.pairwise(intervals))


@settings(max_examples=40, deadline=None)
@given(
    events=st.lists(
        st.datetimes(
            min_value=dt.datetime(2024, 1, 1),
            max_value=dt.datetime(2025, 12, 31),
            timezones=st.sampled_from([parse_timezone(tz) for tz in TIMEZONES]),
        ),
        min_size=1,
        max_size=8,
    )
)
def test_events_run_once_each_in_order(events: list[dt.datetime]) -> None:
    timetable = EventsTimetable(events)
    expected = sorted({pendulum.instance(e).in_timezone("UTC") for e in events})
    earliest = expected[0] - dt.timedelta(days=1)
    assert [i.start for i in automated_runs(timetable, earliest, len(expected))] == expected
    last = DataInterval.exact(expected[-1])
    restriction = TimeRestriction(earliest, None, True)
    assert timetable.next_dagrun_info(last_automated_data_interval=last, restriction=restriction) is None


@settings(max_examples=60, deadline=None)
@given(
    cron=st.sampled_from([*CRONS, "@daily", "@weekly", "@quarterly"]),
    tz=st.sampled_from(TIMEZONES),
    interval=st.timedeltas(min_value=dt.timedelta(0), max_value=dt.timedelta(days=2)),
)
def test_cron_timetables_round_trip_through_json(cron: str, tz: str, interval: dt.timedelta) -> None:
    for timetable in (
        CronDataIntervalTimetable(cron, tz),
        CronTriggerTimetable(cron, timezone=tz, interval=interval),
    ):
        restored = type(timetable).deserialize(json.loads(json.dumps(timetable.serialize())))
        assert restored == timetable and restored.summary == timetable.summary


@settings(max_examples=60, deadline=None)
@given(
    delta=st.timedeltas(min_value=dt.timedelta(microseconds=1), max_value=dt.timedelta(days=400)),
    events=st.lists(st.datetimes(timezones=st.just(dt.UTC)), max_size=5),
    restrict=st.booleans(),
)
def test_delta_and_events_round_trip_through_json(
    delta: dt.timedelta, events: list[dt.datetime], restrict: bool
) -> None:
    for timetable in (
        DeltaDataIntervalTimetable(delta),
        EventsTimetable(events, restrict_to_events=restrict),
    ):
        restored = type(timetable).deserialize(json.loads(json.dumps(timetable.serialize())))
        assert restored == timetable
