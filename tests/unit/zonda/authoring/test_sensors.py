"""Sensors in-process with a pinned clock: the poke loop, reschedule, timeouts, soft_fail, the sensors.

Real: files in a temporary directory, triggers built by `zonda.triggers`, the templating context. The
wall clock is pinned with time-machine and `zonda.sensors.base.sleep` moves it instead of sleeping, so
a poke loop of hours runs in microseconds and every duration is exact.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, time, timedelta
from pathlib import Path
from typing import Any

import pendulum
import pytest
import time_machine
from hypothesis import given, settings
from hypothesis import strategies as st

from examples.operators.wait_one_hour import WaitOneHourSensor
from zonda.context import Context
from zonda.exceptions import (
    AirflowException,
    AirflowFailException,
    AirflowRescheduleException,
    AirflowSensorTimeout,
    AirflowSkipException,
    TaskDeferralError,
    TaskDeferred,
)
from zonda.resources.invocations import TaskInvocation
from zonda.resources.run_types import RunType
from zonda.sensors import base as sensors_base
from zonda.sensors.base import BaseSensorOperator, PokeReturnValue, to_timedelta, utcnow
from zonda.sensors.filesystem import FileSensor
from zonda.sensors.python import PythonSensor
from zonda.sensors.time import (
    DateTimeSensor,
    DateTimeSensorAsync,
    TimeDeltaSensor,
    TimeDeltaSensorAsync,
    TimeSensor,
    TimeSensorAsync,
    WaitSensor,
)
from zonda.tries import task_context
from zonda.triggers import DateTimeTrigger

START = datetime(2024, 1, 3, 6, 0, tzinfo=UTC)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[time_machine.Traveller]:
    """The wall clock pinned at START; a sensor's sleep moves it forward instead of waiting."""
    with time_machine.travel(START, tick=False) as traveller:
        monkeypatch.setattr(
            sensors_base, "sleep", lambda seconds: traveller.shift(timedelta(seconds=seconds))
        )
        yield traveller


def make_context(timezone: str = "UTC", **fields: Any) -> Context:
    defaults: dict[str, Any] = {
        "dag_name": "etl",
        "run_name": "scheduled-2024-01-02",
        "run_type": RunType.SCHEDULED,
        "task_id": "wait",
        "try_number": 1,
        "operator": None,
        "timezone": timezone,
        "logical_date": datetime(2024, 1, 2, tzinfo=UTC),
        "data_interval_start": datetime(2024, 1, 2, tzinfo=UTC),
        "data_interval_end": datetime(2024, 1, 3, tzinfo=UTC),
    }
    return task_context.build_context(TaskInvocation(**{**defaults, **fields}))


def prepared(sensor: BaseSensorOperator, context: Context) -> BaseSensorOperator:
    """What the runner does before execute: the DAG from the context, templates rendered."""
    sensor.dag = context["dag"]
    sensor.render_template_fields(context)
    return sensor


class ReadyAfter(BaseSensorOperator):
    """Done from a given moment on; records when it poked."""

    def __init__(self, *, ready_at: datetime, xcom: Any = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.ready_at = ready_at
        self.xcom = xcom
        self.pokes: list[datetime] = []

    def poke(self, context: Context) -> bool | PokeReturnValue:
        self.pokes.append(utcnow())
        done = utcnow() >= self.ready_at
        return PokeReturnValue(done, self.xcom) if self.xcom is not None else done


class Raising(BaseSensorOperator):
    def __init__(self, *, error: BaseException, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.error = error

    def poke(self, context: Context) -> bool:
        raise self.error


# ----------------------------------------------------------------------------------- poke loop


def test_poke_mode_sleeps_poke_interval_between_pokes_until_done(clock: time_machine.Traveller) -> None:
    sensor = ReadyAfter(task_id="wait", ready_at=START + timedelta(minutes=2), poke_interval="1m")
    assert sensor.execute({}) is None
    assert sensor.pokes == [START, START + timedelta(minutes=1), START + timedelta(minutes=2)]


def test_a_poke_return_value_gives_the_xcom(clock: time_machine.Traveller) -> None:
    sensor = ReadyAfter(task_id="wait", ready_at=START, xcom={"rows": 3})
    assert sensor.execute({}) == {"rows": 3}


@pytest.mark.parametrize(
    ("mode", "soft_fail", "expected"),
    [
        pytest.param("poke", False, AirflowSensorTimeout, id="a poking sensor past its timeout fails"),
        pytest.param(
            "poke", True, AirflowSkipException, id="a soft-failing poking sensor past its timeout skips"
        ),
        pytest.param(
            "reschedule",
            False,
            AirflowSensorTimeout,
            id="a rescheduled sensor past its timeout since the first try fails",
        ),
        pytest.param(
            "reschedule",
            True,
            AirflowSkipException,
            id="a soft-failing rescheduled sensor past its timeout skips",
        ),
    ],
)
def test_timeout(
    clock: time_machine.Traveller, mode: str, soft_fail: bool, expected: type[Exception]
) -> None:
    sensor = ReadyAfter(
        task_id="wait",
        ready_at=START + timedelta(days=1),
        poke_interval=60,
        timeout="10m",
        mode=mode,
        soft_fail=soft_fail,
    )
    if mode == "reschedule":
        sensor.first_try_start = START - timedelta(minutes=10, seconds=1)
    with pytest.raises(expected, match="Sensor has timed out"):
        sensor.execute({})
    if mode == "poke":
        assert utcnow() - START == timedelta(minutes=11), "the timeout counts from the first poke"


def test_timeout_is_airflow_sensor_timeout_which_fails_without_retry() -> None:
    assert issubclass(AirflowSensorTimeout, AirflowException)


@pytest.mark.parametrize(
    ("first_try_start", "expected_reschedule"),
    [
        pytest.param(None, START + timedelta(minutes=5), id="the first poke reschedules poke_interval later"),
        pytest.param(
            START - timedelta(minutes=9),
            START + timedelta(minutes=5),
            id="a later poke within the timeout reschedules poke_interval later",
        ),
    ],
)
def test_reschedule_mode_frees_the_slot_until_the_next_poke(
    clock: time_machine.Traveller, first_try_start: datetime | None, expected_reschedule: datetime
) -> None:
    sensor = ReadyAfter(
        task_id="wait",
        ready_at=START + timedelta(days=1),
        poke_interval="5m",
        timeout="1h",
        mode="reschedule",
    )
    sensor.first_try_start = first_try_start
    with pytest.raises(AirflowRescheduleException) as raised:
        sensor.execute({})
    assert raised.value.reschedule_date == expected_reschedule
    assert sensor.pokes == [START], "a rescheduled sensor pokes once per try"


def test_reschedule_mode_succeeds_when_the_condition_holds(clock: time_machine.Traveller) -> None:
    sensor = ReadyAfter(task_id="wait", ready_at=START, mode="reschedule")
    assert sensor.execute({}) is None


def test_exponential_backoff_lengthens_the_waits_up_to_max_wait(clock: time_machine.Traveller) -> None:
    sensor = ReadyAfter(
        task_id="wait",
        ready_at=START + timedelta(hours=3),
        poke_interval=60,
        exponential_backoff=True,
        max_wait="20m",
    )
    sensor.execute({})
    waits = [(b - a).total_seconds() for a, b in zip(sensor.pokes, sensor.pokes[1:], strict=False)]
    assert waits[0] < waits[2] < waits[4], waits
    assert max(waits) == 20 * 60


@settings(max_examples=50)
@given(elapsed_minutes=st.integers(min_value=0, max_value=600), poke_interval=st.integers(1, 600))
def test_backoff_never_waits_past_the_timeout_nor_max_wait(elapsed_minutes: int, poke_interval: int) -> None:
    sensor = ReadyAfter(
        task_id="wait",
        ready_at=START,
        poke_interval=poke_interval,
        timeout="10h",
        exponential_backoff=True,
        max_wait="30m",
        mode="reschedule",
    )
    interval = sensor._get_next_poke_interval(START, lambda: elapsed_minutes * 60.0, 1)
    assert interval <= min(30 * 60, 10 * 3600 - elapsed_minutes * 60)


@pytest.mark.parametrize(
    ("error", "flags", "expected"),
    [
        pytest.param(ValueError("boom"), {}, ValueError, id="an unexpected poke error fails the sensor"),
        pytest.param(
            ValueError("boom"),
            {"never_fail": True},
            AirflowSkipException,
            id="never_fail skips on an unexpected poke error",
        ),
        pytest.param(
            AirflowFailException("no"),
            {"soft_fail": True},
            AirflowSkipException,
            id="soft_fail skips when a poke fails without retry",
        ),
        pytest.param(
            AirflowSkipException("not today"), {}, AirflowSkipException, id="a poke skipping skips the sensor"
        ),
    ],
)
def test_poke_errors(
    clock: time_machine.Traveller, error: Exception, flags: dict[str, bool], expected: type[Exception]
) -> None:
    with pytest.raises(expected):
        Raising(task_id="wait", error=error, **flags).execute({})


def test_silent_fail_treats_a_failing_poke_as_not_yet(clock: time_machine.Traveller) -> None:
    with pytest.raises(AirflowSensorTimeout):
        Raising(task_id="wait", error=ValueError("flaky"), silent_fail=True, timeout=120).execute({})


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param(60, timedelta(minutes=1), id="a number is seconds"),
        pytest.param(1.5, timedelta(seconds=1.5), id="a float is seconds"),
        pytest.param("1h30m", timedelta(minutes=90), id="a duration string from YAML"),
        pytest.param(timedelta(hours=2), timedelta(hours=2), id="a timedelta as is"),
    ],
)
def test_durations(value: Any, expected: timedelta) -> None:
    assert to_timedelta(value, name="timeout") == expected


@pytest.mark.parametrize(
    "kwargs",
    [
        pytest.param({"poke_interval": -1}, id="a negative poke_interval"),
        pytest.param({"timeout": "soon"}, id="a timeout that is not a duration"),
        pytest.param({"timeout": True}, id="a boolean timeout"),
        pytest.param({"mode": "sometimes"}, id="an unknown mode"),
    ],
)
def test_invalid_sensor_arguments_are_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(AirflowException):
        ReadyAfter(task_id="wait", ready_at=START, **kwargs)


@pytest.mark.parametrize(
    ("next_kwargs", "soft_fail", "expected"),
    [
        pytest.param(
            {"error": "Trigger timeout"},
            False,
            AirflowSensorTimeout,
            id="a deferred sensor whose trigger timed out fails as a sensor timeout",
        ),
        pytest.param(
            {"error": "Trigger timeout"},
            True,
            AirflowSkipException,
            id="a soft-failing deferred sensor whose trigger timed out skips",
        ),
        pytest.param(
            {"error": "Trigger failure"},
            False,
            TaskDeferralError,
            id="a deferred sensor whose trigger failed fails",
        ),
        pytest.param(
            {"error": "Trigger failure"},
            True,
            AirflowSkipException,
            id="a soft-failing deferred sensor whose trigger failed skips",
        ),
    ],
)
def test_resuming_a_sensor_after_a_failed_deferral(
    next_kwargs: dict[str, str], soft_fail: bool, expected: type[Exception]
) -> None:
    sensor = ReadyAfter(task_id="wait", ready_at=START, soft_fail=soft_fail)
    with pytest.raises(expected):
        sensor.resume_execution("__fail__", next_kwargs, {})


# ---------------------------------------------------------------------------------- the sensors


def truthy_after_start(data_interval_end: datetime, threshold: int = 0) -> bool:
    return utcnow() > data_interval_end + timedelta(hours=threshold)


def test_python_sensor_gets_context_variables_and_op_kwargs(clock: time_machine.Traveller) -> None:
    context = make_context()
    done = PythonSensor(task_id="wait", python_callable=truthy_after_start, op_kwargs={"threshold": 5})
    pending = PythonSensor(task_id="wait", python_callable=truthy_after_start, op_kwargs={"threshold": 7})
    assert done.poke(dict(context)) and not pending.poke(dict(context))


def test_python_sensor_by_import_path_with_a_poke_return_value(clock: time_machine.Traveller) -> None:
    sensor = PythonSensor(
        task_id="wait",
        python_callable="examples.operators.callables:return_value",
        op_kwargs={"value": PokeReturnValue(True, "found")},
    )
    assert sensor.execute(make_context()) == "found"


@pytest.mark.parametrize(
    ("layout", "pattern", "recursive", "expected"),
    [
        pytest.param([], "data/ready.csv", False, False, id="a missing file is not there yet"),
        pytest.param(["data/ready.csv"], "data/ready.csv", False, True, id="an existing file is found"),
        pytest.param(["data/"], "data", False, False, id="an empty directory does not count"),
        pytest.param(["data/part-0"], "data", False, True, id="a directory holding a file counts"),
        pytest.param(["data/a/b/part-0"], "data", False, True, id="a file deep in a directory counts"),
        pytest.param(["data/x.csv", "data/y.txt"], "data/*.txt", False, True, id="a glob matching a file"),
        pytest.param(
            ["data/a/b/x.txt"],
            "data/**/x.txt",
            False,
            False,
            id="without recursive ** matches one directory level only",
        ),
        pytest.param(
            ["data/a/b/x.txt"], "data/**/x.txt", True, True, id="with recursive ** matches any depth"
        ),
    ],
)
def test_file_sensor(
    tmp_path: Path, layout: list[str], pattern: str, recursive: bool, expected: bool
) -> None:
    for entry in layout:
        path = tmp_path / entry
        if entry.endswith("/"):
            path.mkdir(parents=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("x")
    sensor = FileSensor(task_id="wait", filepath=str(tmp_path / pattern), recursive=recursive)
    assert sensor.poke({}) is expected


def test_file_sensor_path_is_templated(tmp_path: Path) -> None:
    (tmp_path / "2024-01-02.csv").write_text("x")
    sensor = prepared(FileSensor(task_id="wait", filepath=f"{tmp_path}/{{{{ ds }}}}.csv"), make_context())
    assert sensor.poke({})


def test_file_sensor_refuses_a_connection_zonda_does_not_have() -> None:
    with pytest.raises(AirflowException, match="connections do not exist"):
        FileSensor(task_id="wait", filepath="/x", fs_conn_id="my_nfs")


@pytest.mark.parametrize(
    ("target", "timezone", "expected"),
    [
        pytest.param("05:59", "UTC", True, id="a time of day already past in the DAG's timezone"),
        pytest.param("06:00", "UTC", False, id="the very time of day is not yet past, as in Airflow"),
        pytest.param(
            "06:30:00",
            "Europe/Paris",
            True,
            id="the time of day is read in the DAG's timezone (07:00 in Paris)",
        ),
        pytest.param("07:30", "Europe/Paris", False, id="a time of day still to come in the DAG's timezone"),
        pytest.param(time(5, 0), "UTC", True, id="a datetime.time works as in Airflow"),
        pytest.param("07:30+02:00", "UTC", True, id="a time of day with an offset is read at that offset"),
    ],
)
def test_time_sensor(clock: time_machine.Traveller, target: Any, timezone: str, expected: bool) -> None:
    context = make_context(timezone=timezone)
    assert prepared(TimeSensor(task_id="wait", target_time=target), context).poke(context) is expected


def test_time_sensor_explains_an_unquoted_yaml_time() -> None:
    with pytest.raises(TypeError, match="quote it in YAML"):
        TimeSensor(task_id="wait", target_time=630)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        pytest.param("2024-01-03T05:00:00+00:00", True, id="a moment in the past"),
        pytest.param("2024-01-03T07:00:00", False, id="a moment to come, UTC when it gives no offset"),
        pytest.param("2024-01-03T07:00:00+02:00", True, id="a moment with an offset"),
        pytest.param("{{ data_interval_end }}", True, id="a templated moment"),
        pytest.param(datetime(2024, 1, 4, tzinfo=UTC), False, id="a datetime works as in Airflow"),
    ],
)
def test_date_time_sensor(clock: time_machine.Traveller, target: Any, expected: bool) -> None:
    context = make_context()
    assert prepared(DateTimeSensor(task_id="wait", target_time=target), context).poke(context) is expected


@pytest.mark.parametrize(
    ("delta", "expected"),
    [
        pytest.param("5h", True, id="the delay after the data interval has passed"),
        pytest.param(timedelta(hours=6), False, id="the delay ends exactly now: not yet, as in Airflow"),
        pytest.param(7 * 3600, False, id="the delay has not passed"),
    ],
)
def test_time_delta_sensor_waits_after_the_data_interval(
    clock: time_machine.Traveller, delta: Any, expected: bool
) -> None:
    context = make_context()
    assert prepared(TimeDeltaSensor(task_id="wait", delta=delta), context).poke(context) is expected


def deferred_moment(execute: Callable[[], Any]) -> datetime:
    with pytest.raises(TaskDeferred) as raised:
        execute()
    assert raised.value.method_name == "execute_complete"
    assert isinstance(raised.value.trigger, DateTimeTrigger)
    moment: datetime = raised.value.trigger.moment
    return moment


ASYNC_CASES = [
    pytest.param(
        lambda: TimeSensorAsync(task_id="wait", target_time="09:30"),
        "Europe/Paris",
        datetime(2024, 1, 3, 8, 30, tzinfo=UTC),
        id="TimeSensorAsync defers until today's time of day in the DAG's timezone",
    ),
    pytest.param(
        lambda: DateTimeSensorAsync(
            task_id="wait", target_time="{{ data_interval_end + macros.timedelta(hours=8) }}"
        ),
        "UTC",
        datetime(2024, 1, 3, 8, 0, tzinfo=UTC),
        id="DateTimeSensorAsync defers until its rendered moment",
    ),
    pytest.param(
        lambda: TimeDeltaSensorAsync(task_id="wait", delta="7h"),
        "UTC",
        datetime(2024, 1, 3, 7, 0, tzinfo=UTC),
        id="TimeDeltaSensorAsync defers until delta after the data interval",
    ),
    pytest.param(
        lambda: TimeSensor(task_id="wait", target_time="09:30", deferrable=True),
        "Europe/Paris",
        datetime(2024, 1, 3, 8, 30, tzinfo=UTC),
        id="TimeSensor(deferrable=True), the standard provider's, defers as TimeSensorAsync",
    ),
    pytest.param(
        lambda: TimeDeltaSensor(task_id="wait", delta="7h", deferrable=True),
        "UTC",
        datetime(2024, 1, 3, 7, 0, tzinfo=UTC),
        id="TimeDeltaSensor(deferrable=True) defers as TimeDeltaSensorAsync",
    ),
    pytest.param(
        lambda: WaitSensor(task_id="wait", time_to_wait=timedelta(minutes=90), deferrable=True),
        "UTC",
        START + timedelta(minutes=90),
        id="WaitSensor(deferrable=True), the standard provider's, defers from the task's start",
    ),
    pytest.param(
        lambda: WaitOneHourSensor(task_id="wait"),
        "UTC",
        START + timedelta(hours=1),
        id="Airflow's WaitOneHourSensor example defers for an hour",
    ),
]


@pytest.mark.parametrize(("build", "timezone", "moment"), ASYNC_CASES)
def test_deferrable_sensors_defer_to_a_date_time_trigger(
    clock: time_machine.Traveller, build: Callable[[], BaseSensorOperator], timezone: str, moment: datetime
) -> None:
    context = make_context(timezone=timezone)
    sensor = prepared(build(), context)
    assert deferred_moment(lambda: sensor.execute(context)) == moment
    assert sensor.resume_execution("execute_complete", {"event": moment}, context) is None


def test_time_delta_sensor_async_succeeds_at_once_when_the_moment_is_past(
    clock: time_machine.Traveller,
) -> None:
    context = make_context()
    assert TimeDeltaSensorAsync(task_id="wait", delta="1h").execute(context) is True


def test_a_deferrable_time_delta_sensor_waits_at_most_its_timeout(clock: time_machine.Traveller) -> None:
    """The standard provider's `TimeDeltaSensor` defers with `timeout=self.timeout`."""
    context = make_context()
    sensor = TimeDeltaSensor(task_id="wait", delta="7h", deferrable=True, timeout=600)
    with pytest.raises(TaskDeferred) as raised:
        sensor.execute(context)
    assert raised.value.timeout == timedelta(seconds=600)
    assert TimeSensor(task_id="poke", target_time="09:30").deferrable is False


@pytest.mark.parametrize(
    ("time_to_wait", "waited"),
    [(timedelta(seconds=90), 90), (2, 120), ("3", 180), ("45s", 45)],
    ids=["a timedelta", "minutes, as Airflow's int", "a rendered template: minutes", "a manifest's duration"],
)
def test_wait_sensor_sleeps_its_time_to_wait_from_the_tasks_start(
    clock: time_machine.Traveller, time_to_wait: Any, waited: int
) -> None:
    """The standard provider's `WaitSensor` (not deferrable): `sleep(time_to_wait)` in the try."""
    WaitSensor(task_id="wait", time_to_wait=time_to_wait).execute(make_context())
    assert utcnow() == START + timedelta(seconds=waited)


def test_the_sensor_clock_is_utc_aware() -> None:
    now = utcnow()
    assert now.tzinfo is not None and now.utcoffset() == timedelta(0)
    assert pendulum.instance(now).timezone_name in ("UTC", "+00:00")
