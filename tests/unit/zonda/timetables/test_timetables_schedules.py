"""From a DAG resource's words to a Timetable: schedule strings, class paths, and serialized params."""

from __future__ import annotations

import datetime as dt
import json

import pendulum
import pytest
from dateutil.relativedelta import FR, relativedelta

from zonda.timetables import (
    CRON_PRESETS,
    AirflowTimetableInvalid,
    ContinuousTimetable,
    CronDataIntervalTimetable,
    CronTriggerTimetable,
    DeltaDataIntervalTimetable,
    EventsTimetable,
    NullTimetable,
    OnceTimetable,
    Timetable,
    load_timetable,
    timetable_for_schedule,
)


@pytest.mark.parametrize(
    ("schedule", "expected"),
    [
        pytest.param(None, NullTimetable(), id="no schedule means manual runs only"),
        pytest.param("@once", OnceTimetable(), id="@once runs once"),
        pytest.param("@continuous", ContinuousTimetable(), id="@continuous runs back to back"),
        pytest.param(
            "@hourly", CronDataIntervalTimetable("0 * * * *", "Europe/Berlin"), id="@hourly is a cron"
        ),
        pytest.param(
            "@daily", CronDataIntervalTimetable("0 0 * * *", "Europe/Berlin"), id="@daily is a cron"
        ),
        pytest.param(
            "@midnight", CronDataIntervalTimetable("0 0 * * *", "Europe/Berlin"), id="@midnight too"
        ),
        pytest.param(
            "@weekly", CronDataIntervalTimetable("0 0 * * 0", "Europe/Berlin"), id="@weekly is Sunday"
        ),
        pytest.param("@monthly", CronDataIntervalTimetable("0 0 1 * *", "Europe/Berlin"), id="@monthly"),
        pytest.param(
            "@quarterly", CronDataIntervalTimetable("0 0 1 */3 *", "Europe/Berlin"), id="@quarterly"
        ),
        pytest.param("@yearly", CronDataIntervalTimetable("0 0 1 1 *", "Europe/Berlin"), id="@yearly"),
        pytest.param("@annually", CronDataIntervalTimetable("0 0 1 1 *", "Europe/Berlin"), id="@annually"),
        pytest.param(
            "0 2 * * *", CronDataIntervalTimetable("0 2 * * *", "Europe/Berlin"), id="a cron string"
        ),
        pytest.param("30m", DeltaDataIntervalTimetable(dt.timedelta(minutes=30)), id="a duration is a delta"),
        pytest.param("1h30m", DeltaDataIntervalTimetable(dt.timedelta(minutes=90)), id="a compound duration"),
        pytest.param("1d", DeltaDataIntervalTimetable(dt.timedelta(days=1)), id="a day-long delta"),
    ],
)
def test_timetable_for_schedule(schedule: str | None, expected: Timetable) -> None:
    assert timetable_for_schedule(schedule, "Europe/Berlin") == expected


def test_every_preset_is_understood() -> None:
    for preset, cron in CRON_PRESETS.items():
        timetable = timetable_for_schedule(preset, "UTC")
        assert isinstance(timetable, CronDataIntervalTimetable) and timetable.summary == cron


@pytest.mark.parametrize(
    ("schedule", "timezone", "named"),
    [
        pytest.param("@fortnightly", "UTC", "@fortnightly", id="an unknown preset is named"),
        pytest.param("61 * * * *", "UTC", "61 * * * *", id="an invalid cron is named"),
        pytest.param("banana", "UTC", "banana", id="a word that is neither cron nor duration is named"),
        pytest.param("0s", "UTC", "'0s'", id="a zero duration is not a schedule"),
        pytest.param("@daily", "Mars/Olympus_Mons", "Mars/Olympus_Mons", id="an unknown timezone is named"),
    ],
)
def test_bad_schedules_are_refused(schedule: str, timezone: str, named: str) -> None:
    with pytest.raises(AirflowTimetableInvalid) as raised:
        timetable_for_schedule(schedule, timezone)
    assert named in str(raised.value)


def test_timetable_errors_are_value_errors() -> None:
    assert issubclass(AirflowTimetableInvalid, ValueError)


@pytest.mark.parametrize(
    ("class_path", "params", "expected"),
    [
        pytest.param(
            "zonda.timetables.CronDataIntervalTimetable",
            {"expression": "0 2 * * *", "timezone": "Europe/Berlin"},
            CronDataIntervalTimetable("0 2 * * *", "Europe/Berlin"),
            id="a dotted class path with serialized params",
        ),
        pytest.param(
            "zonda.timetables.trigger:CronTriggerTimetable",
            {"expression": "0 2 * * *", "timezone": "UTC", "interval": 3600.0},
            CronTriggerTimetable("0 2 * * *", timezone="UTC", interval=dt.timedelta(hours=1)),
            id="a module:Class path",
        ),
        pytest.param("zonda.timetables.NullTimetable", {}, NullTimetable(), id="a parameterless timetable"),
    ],
)
def test_load_timetable(class_path: str, params: dict[str, object], expected: Timetable) -> None:
    assert load_timetable(class_path, params) == expected


@pytest.mark.parametrize(
    ("class_path", "params", "message"),
    [
        pytest.param("no_such_package.mod.Klass", {}, "cannot be imported", id="a missing module"),
        pytest.param("zonda.timetables.NoSuchTimetable", {}, "cannot be imported", id="a missing class"),
        pytest.param("datetime.datetime", {}, "is not a Timetable", id="a class that is not a Timetable"),
        pytest.param("zonda.timetables.base.utcnow", {}, "is not a Timetable", id="a function"),
        pytest.param("Timetable", {}, "invalid timetable class path", id="a bare name names no module"),
        pytest.param("zonda timetables", {}, "invalid timetable class path", id="a path with a space"),
        pytest.param(
            "zonda.timetables.CronDataIntervalTimetable",
            {"expression": "0 2 * * *"},
            "rejected params",
            id="missing params are reported with the class",
        ),
        pytest.param(
            "zonda.timetables.CronDataIntervalTimetable",
            {"expression": "0 25 * * *", "timezone": "UTC"},
            "0 25 * * *",
            id="invalid params keep their own message",
        ),
    ],
)
def test_load_timetable_explains_failures(class_path: str, params: dict[str, object], message: str) -> None:
    with pytest.raises(AirflowTimetableInvalid, match=message):
        load_timetable(class_path, params)


BUILT_INS: list[Timetable] = [
    NullTimetable(),
    OnceTimetable(),
    ContinuousTimetable(),
    CronDataIntervalTimetable("0 2 * * *", "America/New_York"),
    CronDataIntervalTimetable("@daily", "UTC"),
    CronDataIntervalTimetable("0 0 * * *", pendulum.FixedTimezone(-3 * 3600)),
    CronTriggerTimetable("*/5 * * * *", timezone="Asia/Kolkata"),
    CronTriggerTimetable("0 0 * * *", timezone="UTC", interval=relativedelta(days=1)),
    DeltaDataIntervalTimetable(dt.timedelta(minutes=90)),
    DeltaDataIntervalTimetable(relativedelta(months=1, weekday=FR(-1))),
    EventsTimetable([pendulum.datetime(2024, 5, 1, 9, tz="Europe/Berlin")], restrict_to_events=True),
    EventsTimetable([pendulum.datetime(2024, 5, 1, tz="UTC")], description="Launch"),
]


@pytest.mark.parametrize("timetable", BUILT_INS, ids=repr)
def test_serialize_round_trips_through_json(timetable: Timetable) -> None:
    data = json.loads(json.dumps(timetable.serialize()))
    assert type(timetable).deserialize(data) == timetable
    class_path = f"{type(timetable).__module__}.{type(timetable).__name__}"
    assert load_timetable(class_path, data) == timetable
