"""Airflow's time triggers: `DateTimeTrigger` fires at a moment, `TimeDeltaTrigger` after a delay."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from typing import Any

from zonda.triggers import timezone
from zonda.triggers.base import BaseTrigger, TaskSuccessEvent, TriggerEvent

#: The longest single sleep: the clock is re-read at least this often, so a wall-clock jump (NTP
#: step, suspended VM) delays an event by at most this much instead of by the whole wait.
MAX_SLEEP_SECONDS = 60.0


class DateTimeTrigger(BaseTrigger):
    """Fire exactly once, at `moment` (Airflow's `DateTimeTrigger`).

    :param moment: when to fire; timezone-aware (converted to UTC), or an ISO 8601 string with an offset
        as stored in a `Trigger` resource. Naive datetimes are refused.
    :param end_from_trigger: end the task instance successfully from the triggerer (`TaskSuccessEvent`)
        instead of resuming it in `execute_complete`.
    """

    def __init__(self, moment: datetime | str, *, end_from_trigger: bool = False) -> None:
        super().__init__()
        if isinstance(moment, str):
            moment = datetime.fromisoformat(moment)
        if not isinstance(moment, datetime):
            raise TypeError(f"Expected datetime.datetime type for moment. Got {type(moment)}")
        self.moment = timezone.convert_to_utc(moment)
        self.end_from_trigger = end_from_trigger

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            "zonda.triggers.temporal.DateTimeTrigger",
            {"moment": self.moment.isoformat(), "end_from_trigger": self.end_from_trigger},
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        """Sleep until the moment, re-reading the clock at least every `MAX_SLEEP_SECONDS`.

        Airflow sleeps in steps of an hour, a minute, ten seconds, then one second, so it fires up to a
        second late and wakes every second near the end. Sleeping the remaining time (capped) fires
        within the event loop's precision and costs one wake-up per trigger, which matters at 10,000
        triggers per replica; the cap keeps Airflow's protection against clock changes.
        """
        while True:
            remaining = (self.moment - timezone.utcnow()).total_seconds()
            if remaining <= 0:
                break
            await asyncio.sleep(min(remaining, MAX_SLEEP_SECONDS))
        if self.end_from_trigger:
            self.log.info("Sensor time condition reached; marking task successful and exiting")
            yield TaskSuccessEvent()
        else:
            self.log.debug("yielding event with payload %r", self.moment)
            yield TriggerEvent(self.moment)


class TimeDeltaTrigger(DateTimeTrigger):
    """Fire once `delta` has passed; made absolute (now + delta) when built, so a restart does not
    start the wait over. It serializes as a `DateTimeTrigger`, as in Airflow."""

    def __init__(self, delta: timedelta, *, end_from_trigger: bool = False) -> None:
        super().__init__(moment=timezone.utcnow() + delta, end_from_trigger=end_from_trigger)
