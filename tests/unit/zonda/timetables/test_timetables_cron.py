"""Cron timetables: Airflow 2.x's scheduling rules, and exact behaviour across daylight-saving transitions.

Everything here is pure: the clock is pinned with ``pinned_clock`` (what ``zonda.schedules.scheduling``
does), never
travelled. Expected instants are written as local ISO strings so that a reader can check them by eye.
"""

from __future__ import annotations

import datetime as dt
import functools

import pendulum
import pytest
from croniter import croniter
from hypothesis import given, settings
from hypothesis import strategies as st
from pendulum import DateTime

from zonda.timetables import (
    AirflowTimetableInvalid,
    CronDataIntervalTimetable,
    CronTriggerTimetable,
    DagRunInfo,
    DataInterval,
    TimeRestriction,
    Timetable,
)
from zonda.timetables.base import pinned_clock
from zonda.timetables.cron import CronSchedule, parse_timezone


def at(text: str) -> DateTime:
    """An instant from an ISO string with offset, as a pendulum UTC DateTime."""
    parsed = pendulum.parse(text)
    assert isinstance(parsed, DateTime)
    return parsed.in_timezone("UTC")


def interval(start: str, end: str) -> DataInterval:
    return DataInterval(at(start), at(end))


def next_info(
    timetable: Timetable,
    *,
    last: DataInterval | None = None,
    earliest: str | None = None,
    latest: str | None = None,
    catchup: bool = True,
    now: str = "2030-01-01T00:00:00+00:00",
) -> DagRunInfo | None:
    restriction = TimeRestriction(
        None if earliest is None else at(earliest), None if latest is None else at(latest), catchup
    )
    with pinned_clock(at(now)):
        return timetable.next_dagrun_info(last_automated_data_interval=last, restriction=restriction)


def boundaries(timetable: Timetable, earliest: str, count: int) -> list[DateTime]:
    """Start of the first run, then the end of each of ``count`` consecutive runs (with catchup)."""
    last: DataInterval | None = None
    points: list[DateTime] = []
    for _ in range(count):
        info = next_info(timetable, last=last, earliest=earliest)
        assert info is not None
        if not points:
            points.append(info.data_interval.start)
        points.append(info.data_interval.end)
        last = info.data_interval
    return points


DAILY_UTC = CronDataIntervalTimetable("0 0 * * *", "UTC")


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        pytest.param(
            {"earliest": "2024-01-01T00:00:00+00:00"},
            interval("2024-01-01T00:00:00+00:00", "2024-01-02T00:00:00+00:00"),
            id="with catchup the first run starts at start_date when it is on the schedule",
        ),
        pytest.param(
            {"earliest": "2024-01-01T12:00:00+00:00"},
            interval("2024-01-02T00:00:00+00:00", "2024-01-03T00:00:00+00:00"),
            id="an unaligned start_date waits for the next boundary",
        ),
        pytest.param(
            {
                "earliest": "2024-01-01T00:00:00+00:00",
                "last": interval("2024-01-01T00:00:00+00:00", "2024-01-02T00:00:00+00:00"),
            },
            interval("2024-01-02T00:00:00+00:00", "2024-01-03T00:00:00+00:00"),
            id="a previous run is followed by the next contiguous interval",
        ),
        pytest.param(
            {"earliest": "2024-01-01T00:00:00+00:00", "catchup": False, "now": "2024-01-10T12:00:00+00:00"},
            interval("2024-01-09T00:00:00+00:00", "2024-01-10T00:00:00+00:00"),
            id="catchup off starts at the latest complete interval",
        ),
        pytest.param(
            {"earliest": "2024-01-01T00:00:00+00:00", "catchup": False, "now": "2024-01-10T00:00:00+00:00"},
            interval("2024-01-09T00:00:00+00:00", "2024-01-10T00:00:00+00:00"),
            id="catchup off exactly on a boundary takes the interval that ends right then",
        ),
        pytest.param(
            {
                "earliest": "2024-01-01T00:00:00+00:00",
                "last": interval("2024-01-02T00:00:00+00:00", "2024-01-03T00:00:00+00:00"),
                "catchup": False,
                "now": "2024-01-10T12:00:00+00:00",
            },
            interval("2024-01-09T00:00:00+00:00", "2024-01-10T00:00:00+00:00"),
            id="catchup off skips the runs missed while the DAG was paused",
        ),
        pytest.param(
            {
                "earliest": "2024-01-01T00:00:00+00:00",
                "last": interval("2024-01-09T00:00:00+00:00", "2024-01-10T00:00:00+00:00"),
                "catchup": False,
                "now": "2024-01-10T12:00:00+00:00",
            },
            interval("2024-01-10T00:00:00+00:00", "2024-01-11T00:00:00+00:00"),
            id="catchup off after the latest run waits for the current interval to end",
        ),
        pytest.param(
            {"earliest": "2024-02-01T00:00:00+00:00", "catchup": False, "now": "2024-01-10T12:00:00+00:00"},
            interval("2024-02-01T00:00:00+00:00", "2024-02-02T00:00:00+00:00"),
            id="catchup off with a future start_date waits for it",
        ),
        pytest.param(
            {"catchup": False, "now": "2024-01-10T12:00:00+00:00"},
            interval("2024-01-09T00:00:00+00:00", "2024-01-10T00:00:00+00:00"),
            id="catchup off without start_date schedules from now",
        ),
        pytest.param(
            {"earliest": "2024-01-01T00:00:00+00:00", "latest": "2024-01-01T00:00:00+00:00"},
            interval("2024-01-01T00:00:00+00:00", "2024-01-02T00:00:00+00:00"),
            id="end_date bounds the logical date inclusively",
        ),
    ],
)
def test_cron_data_interval_follows_airflow(kwargs: dict[str, object], expected: DataInterval) -> None:
    info = next_info(DAILY_UTC, **kwargs)  # type: ignore[arg-type]
    assert info == DagRunInfo.interval(*expected)


@pytest.mark.parametrize(
    "kwargs",
    [
        pytest.param({}, id="with catchup and no start_date there is nowhere to start"),
        pytest.param(
            {
                "earliest": "2024-01-01T00:00:00+00:00",
                "latest": "2024-01-01T00:00:00+00:00",
                "last": interval("2024-01-01T00:00:00+00:00", "2024-01-02T00:00:00+00:00"),
            },
            id="no run has a logical date after end_date",
        ),
    ],
)
def test_cron_data_interval_declines(kwargs: dict[str, object]) -> None:
    assert next_info(DAILY_UTC, **kwargs) is None  # type: ignore[arg-type]


def test_a_changed_schedule_realigns_to_the_last_runs_end() -> None:
    noon = CronDataIntervalTimetable("0 12 * * *", "UTC")
    last = interval("2024-01-01T00:00:00+00:00", "2024-01-02T00:00:00+00:00")
    info = next_info(noon, last=last, earliest="2024-01-01T00:00:00+00:00")
    assert info == DagRunInfo.interval(at("2024-01-01T12:00:00+00:00"), at("2024-01-02T12:00:00+00:00"))


@pytest.mark.parametrize(
    ("run_after", "expected"),
    [
        pytest.param(
            "2024-01-25T01:00:00+00:00",
            interval("2024-01-24T00:00:00+00:00", "2024-01-25T00:00:00+00:00"),
            id="a manual run covers the last complete period",
        ),
        pytest.param(
            "2024-01-25T00:00:00+00:00",
            interval("2024-01-24T00:00:00+00:00", "2024-01-25T00:00:00+00:00"),
            id="a manual run on a boundary covers the period ending then",
        ),
    ],
)
def test_cron_manual_data_interval(run_after: str, expected: DataInterval) -> None:
    assert DAILY_UTC.infer_manual_data_interval(run_after=at(run_after)) == expected


# -- Daylight saving ------------------------------------------------------------------------------------
# Europe/Berlin: 2024-03-31 02:00 CET -> 03:00 CEST; 2024-10-27 03:00 CEST -> 02:00 CET.
# America/New_York: 2024-03-10 02:00 EST -> 03:00 EDT; 2024-11-03 02:00 EDT -> 01:00 EST.


@pytest.mark.parametrize(
    ("cron", "tz", "earliest", "expected"),
    [
        pytest.param(
            "0 2 * * *",
            "Europe/Berlin",
            "2024-03-30T00:00:00+01:00",
            ["2024-03-30T02:00:00+01:00", "2024-03-31T03:00:00+02:00", "2024-04-01T02:00:00+02:00"],
            id="a daily run in Berlin's skipped hour runs when the clock jumps, not never",
        ),
        pytest.param(
            "0 2 * * *",
            "Europe/Berlin",
            "2024-10-26T00:00:00+02:00",
            ["2024-10-26T02:00:00+02:00", "2024-10-27T02:00:00+01:00", "2024-10-28T02:00:00+01:00"],
            id="a daily run in Berlin's repeated hour runs once, at the later 02:00 as Airflow's",
        ),
        pytest.param(
            "0 * * * *",
            "Europe/Berlin",
            "2024-03-31T00:00:00+01:00",
            [
                "2024-03-31T00:00:00+01:00",
                "2024-03-31T01:00:00+01:00",
                "2024-03-31T03:00:00+02:00",
                "2024-03-31T04:00:00+02:00",
            ],
            id="hourly runs in Berlin stay an hour apart when the clock springs forward",
        ),
        pytest.param(
            "0 * * * *",
            "Europe/Berlin",
            "2024-10-27T01:00:00+02:00",
            [
                "2024-10-27T01:00:00+02:00",
                "2024-10-27T02:00:00+02:00",
                "2024-10-27T02:00:00+01:00",
                "2024-10-27T03:00:00+01:00",
            ],
            id="hourly runs in Berlin run in both copies of the repeated hour",
        ),
        pytest.param(
            "0 2 * * *",
            "America/New_York",
            "2024-03-09T00:00:00-05:00",
            ["2024-03-09T02:00:00-05:00", "2024-03-10T03:00:00-04:00", "2024-03-11T02:00:00-04:00"],
            id="a daily run in New York's skipped hour runs when the clock jumps (#38098)",
        ),
        pytest.param(
            "30 1 * * *",
            "America/New_York",
            "2024-11-02T00:00:00-04:00",
            ["2024-11-02T01:30:00-04:00", "2024-11-03T01:30:00-05:00", "2024-11-04T01:30:00-05:00"],
            id="a daily run in New York's repeated hour runs once, at the later 01:30 as Airflow's",
        ),
        pytest.param(
            "0 * * * *",
            "America/New_York",
            "2024-03-10T00:00:00-05:00",
            [
                "2024-03-10T00:00:00-05:00",
                "2024-03-10T01:00:00-05:00",
                "2024-03-10T03:00:00-04:00",
                "2024-03-10T04:00:00-04:00",
            ],
            id="hourly runs in New York stay an hour apart when the clock springs forward",
        ),
        pytest.param(
            "*/30 * * * *",
            "America/New_York",
            "2024-11-03T01:00:00-04:00",
            [
                "2024-11-03T01:00:00-04:00",
                "2024-11-03T01:30:00-04:00",
                "2024-11-03T01:00:00-05:00",
                "2024-11-03T01:30:00-05:00",
                "2024-11-03T02:00:00-05:00",
            ],
            id="half-hourly runs in New York run in both copies of the repeated hour",
        ),
        pytest.param(
            "0 2,3 * * *",
            "Europe/Berlin",
            "2024-03-31T00:00:00+01:00",
            ["2024-03-31T03:00:00+02:00", "2024-04-01T02:00:00+02:00", "2024-04-01T03:00:00+02:00"],
            id="two wall times that land on the same instant make one run, not a duplicate",
        ),
        pytest.param(
            "0 7-21 * * *",
            "Europe/Paris",
            "2023-10-28T20:00:00+02:00",
            [
                "2023-10-28T20:00:00+02:00",
                "2023-10-28T21:00:00+02:00",
                "2023-10-29T07:00:00+01:00",
                "2023-10-29T08:00:00+01:00",
            ],
            id="a business-hours schedule does not get stuck after fall-back (#35558)",
        ),
    ],
)
def test_dst_runs_follow_the_wall_clock(cron: str, tz: str, earliest: str, expected: list[str]) -> None:
    got = boundaries(CronDataIntervalTimetable(cron, tz), earliest, len(expected) - 1)
    assert got == [at(text) for text in expected]
    assert all(isinstance(point, DateTime) and point.timezone_name == "UTC" for point in got)


@pytest.mark.parametrize(
    ("cron", "tz", "earliest", "expected"),
    [
        pytest.param(
            "0 2 * * *",
            "Europe/Berlin",
            "2024-10-26T00:00:00+02:00",
            ["2024-10-26T02:00:00+02:00", "2024-10-27T02:00:00+02:00", "2024-10-28T02:00:00+01:00"],
            id="Berlin's repeated 02:00 at its first occurrence",
        ),
        pytest.param(
            "30 1 * * *",
            "America/New_York",
            "2024-11-02T00:00:00-04:00",
            ["2024-11-02T01:30:00-04:00", "2024-11-03T01:30:00-04:00", "2024-11-04T01:30:00-05:00"],
            id="New York's repeated 01:30 at its first occurrence",
        ),
    ],
)
def test_the_first_occurrence_is_an_explicit_choice(
    cron: str, tz: str, earliest: str, expected: list[str]
) -> None:
    timetable = CronDataIntervalTimetable(cron, tz, ambiguous_time="earlier")
    assert boundaries(timetable, earliest, len(expected) - 1) == [at(text) for text in expected]
    assert timetable.serialize()["ambiguous_time"] == "earlier"
    assert CronDataIntervalTimetable.deserialize(timetable.serialize()) == timetable
    assert "ambiguous_time" not in CronDataIntervalTimetable(cron, tz).serialize()  # Airflow's, the default
    trigger = CronTriggerTimetable(cron, timezone=tz, ambiguous_time="earlier")
    assert CronTriggerTimetable.deserialize(trigger.serialize()) == trigger


def test_an_unknown_ambiguous_time_choice_is_refused() -> None:
    with pytest.raises(AirflowTimetableInvalid, match="ambiguous_time must be one of later, earlier"):
        CronDataIntervalTimetable("0 2 * * *", "UTC", ambiguous_time="first")


@pytest.mark.parametrize("hour", range(0, 24))
def test_catchup_off_never_crashes_on_a_dst_day(hour: int) -> None:
    """apache/airflow#30088: ``20 */4 * * *`` in Los Angeles made _skip_to_latest assert on 2023-03-12."""
    timetable = CronDataIntervalTimetable("20 */4 * * *", "America/Los_Angeles")
    now = f"2023-03-12T{hour:02d}:30:00+00:00"
    info = next_info(timetable, catchup=False, now=now)
    assert info is not None
    assert info.data_interval.start < info.data_interval.end <= at(now)
    following = next_info(timetable, last=info.data_interval, catchup=False, now=now)
    assert following is not None and following.run_after > at(now)


@pytest.mark.parametrize(
    ("cron", "tz", "run_after", "expected"),
    [
        pytest.param(
            "0 2 * * *",
            "America/New_York",
            "2024-03-10T07:30:00+00:00",
            interval("2024-03-09T02:00:00-05:00", "2024-03-10T03:00:00-04:00"),
            id="a manual run after the spring-forward gap gets a full day, not a zero-length interval",
        ),
        pytest.param(
            "0 1 * * *",
            "America/New_York",
            "2024-11-03T05:30:00+00:00",
            interval("2024-11-01T01:00:00-04:00", "2024-11-02T01:00:00-04:00"),
            id="a manual run in the repeated hour (before its later 01:00) gets the day before",
        ),
    ],
)
def test_manual_runs_across_dst(cron: str, tz: str, run_after: str, expected: DataInterval) -> None:
    got = CronDataIntervalTimetable(cron, tz).infer_manual_data_interval(run_after=at(run_after))
    assert got == expected
    assert got.start < got.end <= at(run_after)


# -- CronTriggerTimetable ---------------------------------------------------------------------------------

MIDNIGHT_TRIGGER = CronTriggerTimetable("0 0 * * *", timezone="UTC")


@pytest.mark.parametrize(
    ("timetable", "kwargs", "expected"),
    [
        pytest.param(
            MIDNIGHT_TRIGGER,
            {"earliest": "2024-01-01T00:00:00+00:00"},
            DagRunInfo.exact(at("2024-01-01T00:00:00+00:00")),
            id="a trigger timetable runs at the firing itself, not one period later",
        ),
        pytest.param(
            MIDNIGHT_TRIGGER,
            {
                "earliest": "2024-01-01T00:00:00+00:00",
                "last": DataInterval.exact(at("2024-01-01T00:00:00+00:00")),
            },
            DagRunInfo.exact(at("2024-01-02T00:00:00+00:00")),
            id="a trigger timetable with catchup continues after the last run",
        ),
        pytest.param(
            MIDNIGHT_TRIGGER,
            {"earliest": "2024-01-01T00:00:00+00:00", "catchup": False, "now": "2024-01-10T12:00:00+00:00"},
            DagRunInfo.exact(at("2024-01-10T00:00:00+00:00")),
            id="a trigger timetable without catchup runs the most recent firing that already passed",
        ),
        pytest.param(
            CronTriggerTimetable("0 0 * * *", timezone="UTC", interval=dt.timedelta(hours=1)),
            {"earliest": "2024-01-01T00:00:00+00:00"},
            DagRunInfo.interval(at("2023-12-31T23:00:00+00:00"), at("2024-01-01T00:00:00+00:00")),
            id="a trigger interval covers the hour before each firing",
        ),
        pytest.param(
            CronTriggerTimetable("0 2 * * *", timezone="Europe/Berlin"),
            {"earliest": "2024-03-31T00:00:00+01:00"},
            DagRunInfo.exact(at("2024-03-31T03:00:00+02:00")),
            id="a trigger in Berlin's skipped hour fires when the clock jumps",
        ),
    ],
)
def test_cron_trigger_follows_airflow(
    timetable: CronTriggerTimetable, kwargs: dict[str, object], expected: DagRunInfo
) -> None:
    assert next_info(timetable, **kwargs) == expected  # type: ignore[arg-type]


def test_cron_trigger_stops_after_end_date() -> None:
    info = next_info(
        MIDNIGHT_TRIGGER,
        earliest="2024-01-01T00:00:00+00:00",
        latest="2024-01-01T12:00:00+00:00",
        last=DataInterval.exact(at("2024-01-01T00:00:00+00:00")),
    )
    assert info is None


def test_cron_trigger_manual_interval_reaches_back_by_the_interval() -> None:
    timetable = CronTriggerTimetable("0 0 * * *", timezone="UTC", interval=dt.timedelta(hours=2))
    got = timetable.infer_manual_data_interval(run_after=at("2024-01-01T05:00:00+00:00"))
    assert got == interval("2024-01-01T03:00:00+00:00", "2024-01-01T05:00:00+00:00")


# -- The set of firing instants, against an independent oracle --------------------------------------------
# The oracle walks UTC minute by minute and decides for each instant whether the local clock "passes" a
# matching wall time there: the first (or, for every-hour schedules, any) occurrence of a matching wall
# time, or the moment a gap skips over one. The implementation instead walks cron wall times with croniter.

ORACLE_CRONS = ["0 2 * * *", "30 1 * * *", "0 * * * *", "*/15 * * * *", "45 2 * * 0", "20 */4 * * *"]
ORACLE_TRANSITIONS = [
    ("Europe/Berlin", "2024-03-31T01:00:00+00:00"),
    ("Europe/Berlin", "2024-10-27T01:00:00+00:00"),
    ("America/New_York", "2024-03-10T07:00:00+00:00"),
    ("America/New_York", "2024-11-03T06:00:00+00:00"),
    ("Australia/Lord_Howe", "2024-04-06T15:00:00+00:00"),
    ("Australia/Lord_Howe", "2024-10-05T15:30:00+00:00"),
    ("Pacific/Chatham", "2024-04-06T14:00:00+00:00"),
    ("Pacific/Chatham", "2024-09-28T14:00:00+00:00"),
]
_WINDOW = dt.timedelta(hours=7)


def _matches(expanded: list[list[object]], wall: dt.datetime) -> bool:
    minute, hour, dom, month, dow = expanded[:5]

    def has(field: list[object], value: int) -> bool:
        return field == ["*"] or value in field

    day_of_month, day_of_week = has(dom, wall.day), has(dow, wall.isoweekday() % 7)
    day = (day_of_month or day_of_week) if (dom != ["*"] and dow != ["*"]) else (day_of_month and day_of_week)
    return has(minute, wall.minute) and has(hour, wall.hour) and has(month, wall.month) and day


@functools.cache
def oracle(cron: str, tz_name: str, transition: str, ambiguous_time: str) -> tuple[dt.datetime, ...]:
    tz = parse_timezone(tz_name)
    expanded = croniter(cron).expanded
    every_hour = expanded[1] == ["*"]
    minute = dt.timedelta(minutes=1)
    # Plain datetimes: pendulum's arithmetic would make this minute-by-minute walk ten times slower.
    middle = dt.datetime.fromtimestamp(at(transition).timestamp(), dt.UTC)
    instant, end = middle - _WINDOW, middle + _WINDOW
    fired: list[dt.datetime] = []
    previous_wall: dt.datetime | None = None
    while instant < end:
        local = instant.astimezone(tz)
        wall = local.replace(tzinfo=None, fold=0)
        if ambiguous_time == "earlier":
            chosen = local.fold == 0
        else:  # the later reading: the second pass of a fold, or a wall time that happens once
            chosen = local.fold == 1 or wall.replace(tzinfo=tz, fold=1).astimezone(dt.UTC) == instant
        fires = _matches(expanded, wall) and (every_hour or chosen)
        if previous_wall is not None and wall - previous_wall > minute:  # the clock jumped over a gap
            skipped = previous_wall + minute
            while skipped < wall:
                fires = fires or _matches(expanded, skipped)
                skipped += minute
        if fires:
            fired.append(instant)
        previous_wall, instant = wall, instant + minute
    return tuple(fired)


@pytest.mark.parametrize("ambiguous_time", ["later", "earlier"])
@pytest.mark.parametrize("cron", ORACLE_CRONS)
@pytest.mark.parametrize(("tz", "transition"), ORACLE_TRANSITIONS)
def test_firings_near_transitions_match_the_oracle(
    cron: str, tz: str, transition: str, ambiguous_time: str
) -> None:
    schedule = CronSchedule(cron, parse_timezone(tz), ambiguous_time=ambiguous_time)
    instants = oracle(cron, tz, transition, ambiguous_time)
    expected = [t for t in instants if t >= at(transition) - dt.timedelta(hours=6)]
    assert expected, "every case fires at least once within six hours of its transition"
    got: list[DateTime] = []
    point = at(transition) - dt.timedelta(hours=6, microseconds=1)
    while len(got) < len(expected):
        point = schedule.next_after(point)
        got.append(point)
    assert got == expected
    backwards = [schedule.prev_before(t) for t in expected[1:]]
    assert backwards == expected[:-1]


@settings(max_examples=100, deadline=None)
@given(
    cron=st.sampled_from(ORACLE_CRONS),
    place=st.sampled_from(ORACLE_TRANSITIONS),
    offset_s=st.integers(-5 * 3600, 5 * 3600),
    ambiguous_time=st.sampled_from(["later", "earlier"]),
)
def test_next_and_prev_from_any_instant_match_the_oracle(
    cron: str, place: tuple[str, str], offset_s: int, ambiguous_time: str
) -> None:
    tz, transition = place
    instants = oracle(cron, tz, transition, ambiguous_time)
    t = at(transition) + dt.timedelta(seconds=offset_s, microseconds=offset_s % 7)
    schedule = CronSchedule(cron, parse_timezone(tz), ambiguous_time=ambiguous_time)
    later = [s for s in instants if s > t]
    earlier = [s for s in instants if s < t]
    if later and later[0] < instants[-1]:
        assert schedule.next_after(t) == later[0]
    if earlier and earlier[-1] > instants[0]:
        assert schedule.prev_before(t) == earlier[-1]


# -- Validation ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cron", "tz", "named"),
    [
        pytest.param("61 * * * *", "UTC", "61 * * * *", id="a minute out of range names the expression"),
        pytest.param("* * *", "UTC", "* * *", id="too few fields names the expression"),
        pytest.param("0 0 * * * 30", "UTC", "0 0 * * * 30", id="a seconds field is not accepted"),
        pytest.param("H 0 * * *", "UTC", "H 0 * * *", id="hashed expressions are not accepted"),
        pytest.param("0 0 30 2 *", "UTC", "0 0 30 2 *", id="an expression that never fires is refused"),
        pytest.param("@once", "UTC", "@once", id="@once is not a cron schedule"),
        pytest.param(
            "0 0 * * *", "Mars/Olympus_Mons", "Mars/Olympus_Mons", id="an unknown timezone is named"
        ),
        pytest.param("0 0 * * *", "", "''", id="an empty timezone is refused"),
    ],
)
def test_invalid_cron_or_timezone_is_refused(cron: str, tz: str, named: str) -> None:
    for build in (
        lambda: CronDataIntervalTimetable(cron, tz),
        lambda: CronTriggerTimetable(cron, timezone=tz),
    ):
        with pytest.raises(AirflowTimetableInvalid) as raised:
            build()
        assert named in str(raised.value)
        assert isinstance(raised.value, ValueError)


def test_month_and_weekday_names_are_not_mistaken_for_extensions() -> None:
    timetable = CronDataIntervalTimetable("0 9 * MAR-JUN THU", "UTC")
    timetable.validate()
    assert timetable.summary == "0 9 * MAR-JUN THU"


def test_fixed_offset_timezones_work_and_serialize_as_seconds() -> None:
    timetable = CronDataIntervalTimetable("0 0 * * *", pendulum.FixedTimezone(3600))
    assert timetable.serialize() == {"expression": "0 0 * * *", "timezone": 3600}
    info = next_info(timetable, earliest="2024-01-01T00:00:00+01:00")
    assert info == DagRunInfo.interval(at("2024-01-01T00:00:00+01:00"), at("2024-01-02T00:00:00+01:00"))


def test_a_schedule_aligns_from_the_first_instant_there_is() -> None:
    """Airflow's example_outlet_event_extra starts at `datetime.min`: aligning to it must not overflow."""
    schedule = CronSchedule("0 0 * * *", parse_timezone("UTC"))
    first = dt.datetime.min.replace(tzinfo=dt.UTC)
    assert schedule.at_or_after(first) == first  # it fires: stepping back from the second after finds it
    hourly = CronSchedule("0 1 * * *", parse_timezone("UTC"))
    assert hourly.at_or_after(first) == first + dt.timedelta(hours=1)


# --- the remembered brackets: every CronSchedule of a schedule shares its consecutive instants ------------


@settings(max_examples=60, deadline=None)
@given(
    expression=st.sampled_from(["0 2 * * *", "30 1 * * *", "*/15 * * * *", "0 * * * *", "* * * * *"]),
    zone=st.sampled_from(
        [  # three days from each start hold a transition (Lord Howe's is half an hour)
            ("Europe/Berlin", dt.datetime(2026, 3, 27, 12, tzinfo=dt.UTC)),
            ("Europe/Berlin", dt.datetime(2026, 10, 24, 12, tzinfo=dt.UTC)),
            ("America/New_York", dt.datetime(2026, 10, 31, 12, tzinfo=dt.UTC)),
            ("Australia/Lord_Howe", dt.datetime(2026, 4, 3, 12, tzinfo=dt.UTC)),
            ("UTC", dt.datetime(2026, 12, 4, 12, tzinfo=dt.UTC)),
        ]
    ),
    ambiguous=st.sampled_from(["later", "earlier"]),
    offsets=st.lists(st.integers(min_value=0, max_value=3 * 24 * 3600 * 10**6), min_size=1, max_size=30),
)
def test_remembered_answers_equal_the_scans_across_transitions(
    expression: str, zone: tuple[str, dt.datetime], ambiguous: str, offsets: list[int]
) -> None:
    """Queries in any order over three days around a transition (answered from brackets whenever one
    covers them) give exactly what a fresh scan of croniter gives."""
    tz, base = zone
    schedule = CronSchedule(expression, parse_timezone(tz), ambiguous_time=ambiguous)
    for offset in offsets:
        t = base + dt.timedelta(microseconds=offset)
        assert schedule.next_after(t) == schedule._scan_next_after(t)
        assert schedule.prev_before(t) == schedule._scan_prev_before(t)
        assert CronSchedule(expression, parse_timezone(tz), ambiguous_time=ambiguous).at_or_before(t) == (
            schedule._scan_prev_before(t + dt.timedelta(microseconds=1))
        )


def test_a_boundarys_lookups_are_answered_without_a_scan_by_every_schedule_of_the_expression(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """1,000 DAGs on `* * * * *` ask for the same neighbours at each minute: one scan answers them all."""
    first = CronSchedule("* * * * *", parse_timezone("UTC"))
    t = dt.datetime(2026, 12, 4, 21, 0, 0, 5000, tzinfo=dt.UTC)
    assert first.next_after(t) == at("2026-12-04T21:01:00+00:00")  # a positive control: scanned
    assert first.prev_before(t) == at("2026-12-04T21:00:00+00:00")

    def no_scan(*args: object, **kwargs: object) -> None:
        raise AssertionError("scanned")

    monkeypatch.setattr(CronSchedule, "_walls", no_scan)
    other = CronSchedule("* * * * *", parse_timezone("UTC"))  # another DAG's timetable
    later = t + dt.timedelta(seconds=30)
    assert other.next_after(later) == at("2026-12-04T21:01:00+00:00")
    assert other.prev_before(later) == at("2026-12-04T21:00:00+00:00")
    assert other.at_or_before(at("2026-12-04T21:00:00+00:00")) == at("2026-12-04T21:00:00+00:00")
    with pytest.raises(AssertionError, match="scanned"):  # another minute is not remembered
        other.next_after(t + dt.timedelta(minutes=5))


@pytest.mark.parametrize("year", [1, 1000, 1600, 2300, 5000, 9999], ids=lambda year: f"year {year}")
def test_lookups_stay_exact_far_from_1970(year: int) -> None:
    """croniter keeps its current time as a float timestamp, microseconds lost beyond about 285
    years of 1970: a lookup a microsecond off a firing returned the firing itself or the one before
    (a backfill from year 1 planned a single date). Checked from year 1 to 9999."""
    daily = CronSchedule("0 0 * * *", parse_timezone("UTC"))
    day = dt.timedelta(days=1)
    second = dt.datetime(year, 1, 3, tzinfo=dt.UTC)
    assert daily.at_or_after(second) == second
    assert daily.at_or_before(second) == second
    assert daily.next_after(second) == second + day
    assert daily.prev_before(second) == second - day
    assert daily.next_after(second - dt.timedelta(microseconds=1)) == second
    assert daily.prev_before(second + dt.timedelta(microseconds=1)) == second
    assert daily.at_or_after(second + dt.timedelta(microseconds=1)) == second + day
    assert daily.at_or_before(second - dt.timedelta(microseconds=1)) == second - day
    every_five = CronSchedule("*/5 * * * *", parse_timezone("UTC"))
    noon = dt.datetime(year, 6, 1, 12, tzinfo=dt.UTC)
    assert every_five.at_or_after(noon) == noon and every_five.at_or_before(noon) == noon
    assert every_five.next_after(noon) == noon + dt.timedelta(minutes=5)


def test_the_last_second_there_is_looks_back_without_overflowing() -> None:
    """A manual run at 9999-12-31T23:59:59 asks for the firing at or before it (its data interval)."""
    last = dt.datetime(9999, 12, 31, 23, 59, 59, tzinfo=dt.UTC)
    assert CronSchedule("0 0 * * *", parse_timezone("UTC")).at_or_before(last) == last.replace(
        hour=0, minute=0, second=0
    )
