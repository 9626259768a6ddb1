"""`BaseSensorOperator`: Airflow's poke loop, in `poke` or `reschedule` mode.

A sensor runs in the try's Pod or process, so its "now" is legitimately the wall clock at run time —
unlike the scheduling core, which is handed `now`. It reads it through `utcnow()` only, and waits
through `sleep()` only, so that tests pin and move one clock.

In `reschedule` mode a sensor that is not satisfied raises `AirflowRescheduleException`: the try ends,
its Pod is freed, and the scheduler starts the next poke at the given time (`up_for_reschedule`). The
timeout is measured from the first try's start, which the runner sets in `first_try_start`.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from zonda.context import Context
from zonda.exceptions import (
    AirflowException,
    AirflowFailException,
    AirflowRescheduleException,
    AirflowSensorTimeout,
    AirflowSkipException,
    AirflowTaskTimeout,
    TaskDeferralError,
    TaskDeferralTimeout,
)
from zonda.operators.base import BaseOperator
from zonda.resources.durations import parse_duration

#: Airflow's `[sensors] default_timeout`: seven days.
DEFAULT_SENSOR_TIMEOUT = 7 * 24 * 3600.0


def utcnow() -> datetime:
    """The sensors' clock (timezone-aware UTC). Tests pin it with time-machine."""
    return datetime.now(UTC)


def sleep(seconds: float) -> None:
    """Wait between pokes; tests replace it with a move of the pinned clock."""
    time.sleep(seconds)


def to_timedelta(value: timedelta | float | str, *, name: str) -> timedelta:
    """A duration given as a timedelta, seconds, or a duration string ("30s", "1h30m") from YAML."""
    if isinstance(value, timedelta):
        duration = value
    elif isinstance(value, bool):
        raise AirflowException(f"{name} must be a duration such as 60, '30s' or '1h', not a boolean")
    elif isinstance(value, int | float):
        duration = timedelta(seconds=value)
    elif isinstance(value, str):
        try:
            duration = parse_duration(value)
        except ValueError as error:
            raise AirflowException(f"{name}: {error}") from None
    else:
        raise AirflowException(f"{name} must be a duration such as 60, '30s' or '1h', not {value!r}")
    if duration < timedelta(0):
        raise AirflowException(f"The {name} must be a non-negative number")
    return duration


class PokeReturnValue:
    """What `poke` may return instead of a bool: whether it is done, and the XCom value if so."""

    def __init__(self, is_done: bool, xcom_value: Any | None = None) -> None:
        self.xcom_value = xcom_value
        self.is_done = is_done

    def __bool__(self) -> bool:
        return self.is_done


class BaseSensorOperator(BaseOperator):
    """Airflow's `BaseSensorOperator`: override `poke(context)`, which returns whether to stop waiting.

    :param poke_interval: time between pokes (seconds, timedelta or "30s").
    :param timeout: time, from the first poke, after which the sensor fails without retry
        (`AirflowSensorTimeout`), or is skipped when `soft_fail`.
    :param soft_fail: skip instead of failing on timeout (and on a deferral's failure).
    :param mode: `poke` keeps the Pod and sleeps between pokes; `reschedule` frees it between pokes.
    :param exponential_backoff: lengthen the waits between pokes, as Airflow does.
    :param max_wait: the longest wait between pokes with `exponential_backoff`.
    :param silent_fail: a poke raising an unexpected error counts as "not yet" (logged).
    :param never_fail: any error, or a timeout, skips the sensor instead of failing it.
    """

    valid_modes = ("poke", "reschedule")

    def __init__(
        self,
        *,
        poke_interval: timedelta | float | str = 60,
        timeout: timedelta | float | str = DEFAULT_SENSOR_TIMEOUT,
        soft_fail: bool = False,
        mode: str = "poke",
        exponential_backoff: bool = False,
        max_wait: timedelta | float | str | None = None,
        silent_fail: bool = False,
        never_fail: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.poke_interval = to_timedelta(poke_interval, name="poke_interval").total_seconds()
        self.timeout = to_timedelta(timeout, name="timeout").total_seconds()
        self.max_wait = None if max_wait is None else to_timedelta(max_wait, name="max_wait")
        self.soft_fail = soft_fail
        self.mode = mode
        self.exponential_backoff = exponential_backoff
        self.silent_fail = silent_fail
        self.never_fail = never_fail
        if soft_fail and never_fail:
            raise ValueError("soft_fail and never_fail are mutually exclusive, you can not provide both.")
        if mode not in self.valid_modes:
            raise AirflowException(
                f"The mode must be one of {list(self.valid_modes)},'{self.task_id}'; received '{mode}'."
            )
        #: Start of the first try, set by the runner for a rescheduled sensor; None on the first poke.
        self.first_try_start: datetime | None = None

    @property
    def reschedule(self) -> bool:
        return self.mode == "reschedule"

    def poke(self, context: Context) -> bool | PokeReturnValue:
        """Whether the awaited condition holds; override it."""
        raise AirflowException("Override me.")

    def execute(self, context: Context) -> Any:
        started_at = (self.first_try_start if self.reschedule else None) or utcnow()

        def run_duration() -> float:
            return (utcnow() - started_at).total_seconds()

        poke_count = 1
        while True:
            poke_return = self._poke_once(context)
            if poke_return:
                self.log.info("Success criteria met. Exiting.")
                return poke_return.xcom_value if isinstance(poke_return, PokeReturnValue) else None
            if run_duration() > self.timeout:
                message = (
                    f"Sensor has timed out; run duration of {run_duration()} seconds exceeds "
                    f"the specified timeout of {self.timeout}."
                )
                if self.soft_fail or self.never_fail:
                    raise AirflowSkipException(message)
                raise AirflowSensorTimeout(message)
            interval = self._get_next_poke_interval(started_at, run_duration, poke_count)
            if self.reschedule:
                raise AirflowRescheduleException(utcnow() + timedelta(seconds=interval))
            sleep(interval)
            poke_count += 1

    def _poke_once(self, context: Context) -> bool | PokeReturnValue:
        try:
            return self.poke(context)
        except (AirflowSensorTimeout, AirflowTaskTimeout, AirflowFailException) as error:
            if self.soft_fail:
                raise AirflowSkipException("Skipping due to soft_fail is set to True.") from error
            if self.never_fail:
                raise AirflowSkipException("Skipping due to never_fail is set to True.") from error
            raise
        except AirflowSkipException:
            raise
        except Exception as error:
            if self.silent_fail:
                self.log.exception("Sensor poke failed")
                return False
            if self.never_fail:
                raise AirflowSkipException("Skipping due to never_fail is set to True.") from error
            raise

    def resume_execution(self, next_method: str, next_kwargs: dict[str, Any] | None, context: Context) -> Any:
        try:
            return super().resume_execution(next_method, next_kwargs, context)
        except TaskDeferralTimeout as error:
            if self.soft_fail:
                raise AirflowSkipException(str(error)) from error
            raise AirflowSensorTimeout(*error.args) from error
        except (AirflowException, TaskDeferralError) as error:
            if self.soft_fail:
                raise AirflowSkipException(str(error)) from error
            raise

    def _get_next_poke_interval(
        self, started_at: datetime, run_duration: Callable[[], float], poke_count: int
    ) -> float:
        """Airflow's backoff: doubling waits with a deterministic jitter, capped by timeout and max_wait."""
        if not self.exponential_backoff:
            return self.poke_interval
        if self.reschedule:
            # Each reschedule is a new process: estimate how many pokes the elapsed time holds.
            elapsed, cumulative, estimated = run_duration(), 0.0, 0
            while cumulative <= elapsed:
                estimated += 1
                cumulative += self._backoff_with_jitter(started_at, estimated)
            poke_count = estimated or poke_count
        interval = min(self.timeout - int(run_duration()), self._backoff_with_jitter(started_at, poke_count))
        if self.max_wait:
            interval = min(self.max_wait.total_seconds(), interval)
        self.log.info("new %s interval is %s", self.mode, interval)
        return interval

    def _backoff_with_jitter(self, started_at: datetime, poke_count: int) -> float:
        min_backoff = max(int(self.poke_interval * (2 ** (poke_count - 2))), 1)
        seed = f"{self.dag_id}#{self.task_id}#{started_at}#{poke_count}".encode()
        run_hash = int(hashlib.sha1(seed, usedforsecurity=False).hexdigest(), 16)
        return min(min_backoff + run_hash % min_backoff, timedelta.max.total_seconds() - 1)
