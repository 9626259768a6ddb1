"""The trigger authoring API (`zonda.triggers`): Airflow's classes, on a fake event-loop clock.

Nothing here sleeps for real: `FakeClock` runs the loop on virtual time, which jumps to the next
timer whenever nothing is ready, and installs the same virtual time as the triggers' `utcnow()`.
"""

from __future__ import annotations

import asyncio
import copy
import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pendulum
import pytest
from hypothesis import given
from hypothesis import strategies as st

from examples.triggers.temporal import DateTimeTrigger as SimplifiedDateTimeTrigger
from zonda.triggers import (
    BaseTrigger,
    DateTimeTrigger,
    FileTrigger,
    TaskSuccessEvent,
    TimeDeltaTrigger,
    TriggerEvent,
    from_json_safe,
    load_trigger,
    serialize_trigger,
    to_json_safe,
)
from zonda.triggers import (
    timezone as trigger_timezone,
)
from zonda.triggers.testing import FakeClock

START = datetime(2024, 3, 1, 12, 0, tzinfo=UTC)


async def first_event(trigger: BaseTrigger) -> TriggerEvent | None:
    async for event in trigger.run():
        return event
    return None


@pytest.fixture
def clock() -> Any:
    with FakeClock(START) as fake:
        yield fake


# ------------------------------------------------------------------------------------ DateTimeTrigger


@pytest.mark.parametrize(
    "delay",
    [
        pytest.param(timedelta(milliseconds=500), id="a moment half a second away fires exactly then"),
        pytest.param(timedelta(seconds=90), id="a moment ninety seconds away fires exactly then"),
        pytest.param(timedelta(hours=3, seconds=7), id="a moment hours away fires exactly then"),
        pytest.param(timedelta(days=9), id="a moment days away fires exactly then"),
    ],
)
def test_date_time_trigger_fires_at_its_moment(clock: FakeClock, delay: timedelta) -> None:
    moment = START + delay
    event = clock.run(first_event(DateTimeTrigger(moment)))
    assert event == TriggerEvent(moment)
    assert clock.utcnow() == moment


def test_date_time_trigger_in_the_past_fires_at_once(clock: FakeClock) -> None:
    moment = START - timedelta(hours=1)
    assert clock.run(first_event(DateTimeTrigger(moment))) == TriggerEvent(moment)
    assert clock.utcnow() == START


def test_date_time_trigger_does_not_fire_before_its_moment(clock: FakeClock) -> None:
    trigger = DateTimeTrigger(START + timedelta(minutes=10))
    with pytest.raises(TimeoutError):
        clock.run(asyncio.wait_for(first_event(trigger), timeout=599.9))


def test_date_time_trigger_ends_the_task_itself_with_end_from_trigger(clock: FakeClock) -> None:
    event = clock.run(first_event(DateTimeTrigger(START, end_from_trigger=True)))
    assert isinstance(event, TaskSuccessEvent)
    assert event.payload == "success"


@pytest.mark.parametrize(
    ("moment", "error", "match"),
    [
        pytest.param(datetime(2024, 1, 1), ValueError, "naive", id="a naive datetime is refused"),
        pytest.param("2024-01-01T00:00:00", ValueError, "naive", id="ISO text without an offset is refused"),
        pytest.param(1704067200, TypeError, "Expected datetime", id="a timestamp number is refused"),
    ],
)
def test_date_time_trigger_refuses_moments_without_a_timezone(moment: Any, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        DateTimeTrigger(moment)


@pytest.mark.parametrize(
    "moment",
    [
        pytest.param(datetime(2024, 1, 1, 9, tzinfo=timezone(timedelta(hours=9))), id="a fixed offset"),
        pytest.param(pendulum.datetime(2024, 1, 1, 1, tz="Europe/Paris"), id="a pendulum zone"),
        pytest.param("2024-01-01T00:00:00Z", id="an ISO string with Z, as stored in a Trigger resource"),
    ],
)
def test_date_time_trigger_converts_aware_moments_to_utc(moment: Any) -> None:
    trigger = DateTimeTrigger(moment)
    assert trigger.moment == datetime(2024, 1, 1, 0, tzinfo=UTC)
    assert trigger.moment.utcoffset() == timedelta(0)


def test_time_delta_trigger_is_made_absolute_when_built() -> None:
    with trigger_timezone.use_clock(lambda: START):
        trigger = TimeDeltaTrigger(timedelta(minutes=5))
    classpath, kwargs = serialize_trigger(trigger)
    # A triggerer rebuilding it an hour later still waits for the same moment, not five more minutes.
    with trigger_timezone.use_clock(lambda: START + timedelta(hours=1)):
        rebuilt = load_trigger(classpath, kwargs)
    assert classpath == "zonda.triggers.temporal.DateTimeTrigger"
    assert isinstance(rebuilt, DateTimeTrigger)
    assert rebuilt.moment == trigger.moment == START + timedelta(minutes=5)


def test_the_seed_example_trigger_runs_unchanged(clock: FakeClock) -> None:
    moment = START + timedelta(seconds=30)
    rebuilt = load_trigger(*serialize_trigger(SimplifiedDateTimeTrigger(moment)))
    assert clock.run(first_event(rebuilt)) == TriggerEvent(moment)
    assert clock.utcnow() == moment


# ---------------------------------------------------------------------------------------- FileTrigger


def test_file_trigger_fires_once_the_file_appears(clock: FakeClock, tmp_path: Path) -> None:
    target = tmp_path / "data.csv"
    clock.loop.call_later(30, target.write_text, "a,b\n")
    event = clock.run(first_event(FileTrigger(str(target), poke_interval=5)))
    assert event == TriggerEvent(True)
    assert START + timedelta(seconds=30) <= clock.utcnow() <= START + timedelta(seconds=35)


@pytest.mark.parametrize(
    ("make", "pattern", "recursive", "fires"),
    [
        pytest.param(["in/a.txt"], "in/*.txt", False, True, id="a glob matching a file fires"),
        pytest.param(["in/sub/a.txt"], "in/**/*.txt", True, True, id="a recursive glob finds nested files"),
        pytest.param(["in/sub/a.txt"], "in", False, True, id="a directory holding a file fires"),
        pytest.param([], "in", False, False, id="an empty directory does not fire"),
        pytest.param(["in/a.txt"], "in/*.csv", False, False, id="a glob matching nothing does not fire"),
    ],
)
def test_file_trigger_matches_like_airflow(
    clock: FakeClock, tmp_path: Path, make: list[str], pattern: str, recursive: bool, fires: bool
) -> None:
    (tmp_path / "in").mkdir()
    for relative in make:
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text("x")
    trigger = FileTrigger(str(tmp_path / pattern), recursive=recursive, poke_interval=1)
    if fires:
        assert clock.run(first_event(trigger)) == TriggerEvent(True)
    else:
        with pytest.raises(TimeoutError):
            clock.run(asyncio.wait_for(first_event(trigger), timeout=60))


def test_file_trigger_accepts_airflows_deprecated_poll_interval() -> None:
    with pytest.warns(DeprecationWarning, match="poke_interval"):
        trigger = FileTrigger("/tmp/x", poll_interval=7)
    assert trigger.poke_interval == 7.0


# ------------------------------------------------------------------------------------- serialization


@pytest.mark.parametrize(
    "trigger",
    [
        pytest.param(DateTimeTrigger(START), id="DateTimeTrigger"),
        pytest.param(DateTimeTrigger(START, end_from_trigger=True), id="DateTimeTrigger ending the task"),
        pytest.param(TimeDeltaTrigger(timedelta(hours=1)), id="TimeDeltaTrigger, as a DateTimeTrigger"),
        pytest.param(FileTrigger("/data/*.csv", recursive=True, poke_interval=2.5), id="FileTrigger"),
        pytest.param(SimplifiedDateTimeTrigger(START), id="the example whose serialize returns a datetime"),
    ],
)
def test_serialize_round_trips_through_json(trigger: BaseTrigger) -> None:
    classpath, kwargs = serialize_trigger(trigger)
    stored = json.loads(json.dumps(kwargs))  # what the apiserver gives back
    rebuilt = load_trigger(classpath, stored)
    assert serialize_trigger(rebuilt) == (classpath, kwargs)
    assert rebuilt.serialize() == load_trigger(*trigger.serialize()).serialize()


@pytest.mark.parametrize(
    ("classpath", "error"),
    [
        pytest.param("zonda.triggers.temporal.NoSuchTrigger", ImportError, id="a missing class"),
        pytest.param("no_such_module.Trigger", ImportError, id="a missing module"),
        pytest.param("zonda.triggers.base.TriggerEvent", TypeError, id="a class that is not a trigger"),
        pytest.param("DateTimeTrigger", ImportError, id="a bare class name"),
    ],
)
def test_load_trigger_refuses_bad_classpaths(classpath: str, error: type[Exception]) -> None:
    with pytest.raises(error):
        load_trigger(classpath, {})


def test_load_trigger_accepts_the_colon_form() -> None:
    trigger = load_trigger("zonda.triggers.temporal:DateTimeTrigger", {"moment": START.isoformat()})
    assert isinstance(trigger, DateTimeTrigger)


@pytest.mark.parametrize(
    ("value", "match"),
    [
        pytest.param({"at": datetime(2024, 1, 1)}, r'kwargs\["at"\]: naive', id="a naive datetime"),
        pytest.param({"delay": timedelta(1)}, r'kwargs\["delay"\]: timedelta', id="a timedelta"),
        pytest.param({"paths": [Path("/x")]}, r'kwargs\["paths"\]\[0\]', id="a Path inside a list"),
        pytest.param({1: "x"}, "key 1 is not a string", id="a non-string key"),
        pytest.param({"timeout": float("inf")}, r'kwargs\["timeout"\]: float inf', id="infinity"),
    ],
)
def test_to_json_safe_names_what_cannot_be_stored(value: Any, match: str) -> None:
    with pytest.raises(TypeError, match=match):
        to_json_safe(value, path="kwargs")


aware_datetimes = st.datetimes(
    min_value=datetime(1970, 1, 2), max_value=datetime(9998, 1, 1), timezones=st.timezones()
).filter(
    lambda moment: (
        moment.utcoffset() is not None
        and moment.utcoffset().seconds % 60 == 0
        # A wall time in a DST gap or fold (ambiguous) is never equal to a time in another zone (PEP 495's
        # inter-zone rule), so the stored offset form cannot compare equal to it: skip both.
        and moment.astimezone(UTC).astimezone(moment.tzinfo) == moment
        and moment.replace(fold=1 - moment.fold).utcoffset() == moment.utcoffset()
    )
)
json_leaves = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text()
)
json_values = st.recursive(
    json_leaves | aware_datetimes,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=12,
)


@given(json_values)
def test_json_safe_round_trips_every_value_holding_aware_datetimes(value: Any) -> None:
    stored = json.loads(json.dumps(to_json_safe(value)))
    assert from_json_safe(stored) == value


# ------------------------------------------------------------------------------------ TriggerEvent


@pytest.mark.parametrize(
    ("first", "second", "equal"),
    [
        pytest.param(TriggerEvent({"a": [1]}), TriggerEvent({"a": [1]}), True, id="equal payloads are equal"),
        pytest.param(TriggerEvent(START), TriggerEvent(START), True, id="equal datetimes are equal"),
        pytest.param(TriggerEvent(1), TriggerEvent(2), False, id="different payloads differ"),
        pytest.param(TriggerEvent(True), TriggerEvent("True"), False, id="a bool is not its text"),
        pytest.param(TaskSuccessEvent(), TaskSuccessEvent(), True, id="two task-success events are equal"),
    ],
)
def test_trigger_events_are_equal_by_payload(first: TriggerEvent, second: TriggerEvent, equal: bool) -> None:
    assert (first == second) is equal
    if equal:
        assert hash(first) == hash(second)
        assert len({first, second}) == 1  # the duplicate drops


@given(json_values)
def test_a_duplicate_event_is_equal_and_hashes_alike(payload: Any) -> None:
    original, duplicate = TriggerEvent(payload), TriggerEvent(copy.deepcopy(payload))
    assert original == duplicate
    assert hash(original) == hash(duplicate)
    assert original != object()


def test_task_end_events_refuse_a_payload() -> None:
    with pytest.raises(ValueError, match="payload"):
        TaskSuccessEvent(payload="x")


def test_trigger_repr_shows_classpath_and_kwargs() -> None:
    assert repr(FileTrigger("/x")) == (
        "<zonda.triggers.file.FileTrigger filepath=/x, recursive=False, poke_interval=5.0>"
    )
