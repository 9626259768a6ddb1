"""Running one trigger: to its first event, with Airflow's semantics, and its `cleanup()` always after.

The triggerer's runtime starts `drive_trigger` as one asyncio task per trigger it holds; the result
is handed to `deliver` (the runtime queues it for the fenced status write in `writes`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
from collections.abc import Callable

from controller.processes.health import TimedSteps
from zonda.triggers import BaseTrigger, TriggerEvent

log = logging.getLogger("controller.triggerer.runtime")


@dataclasses.dataclass
class RunningTrigger:
    """A trigger this replica runs: where it came from (shard, version) and its asyncio task."""

    name: str
    shard: int
    resource_version: str | None
    task: asyncio.Task[None] | None = None


async def first_event(trigger: BaseTrigger) -> TriggerEvent | None:
    """Run `trigger` until its first event (None if it returns without one), then close `run()`."""
    events = trigger.run()
    if not inspect.isasyncgen(events):
        if inspect.iscoroutine(events):
            events.close()  # never awaited: close it so Python does not warn about it
        raise TypeError(
            f"{type(trigger).__name__}.run() must be an async generator that yields TriggerEvents "
            f"(got {type(events).__name__}: did it return the event instead of yielding it?)"
        )
    try:
        async for event in events:
            if not isinstance(event, TriggerEvent):
                raise TypeError(f"run() yielded {event!r}, not a TriggerEvent")
            return event
        return None
    finally:
        await events.aclose()


@dataclasses.dataclass(frozen=True)
class TriggerResult:
    """How a trigger's run ended: its first event, or why it failed."""

    event: TriggerEvent | None = None
    failure: str | None = None


async def drive_trigger(
    trigger: BaseTrigger,
    *,
    deliver: Callable[[TriggerResult], None],
    report_step: Callable[[float], None] = lambda seconds: None,
    name: str = "",
) -> None:
    """Run `trigger` to its first event and `deliver` the result; always await `cleanup()` after.

    Airflow's semantics: an exception or a return without an event fails the trigger (and so the task
    instance), cancellation is not a failure and delivers nothing, and `cleanup()` errors are logged
    and otherwise ignored. The result is delivered before `cleanup()`, so a slow cleanup does not
    delay the event.
    """
    try:
        try:
            event = await TimedSteps(first_event(trigger), report_step)
        except asyncio.CancelledError:
            raise
        except Exception as error:
            log.exception("Trigger %s failed", name or trigger)
            deliver(TriggerResult(failure=f"Trigger failure: {type(error).__name__}: {error}"))
        else:
            if event is None:
                log.error("Trigger %s exited without sending an event", name or trigger)
                deliver(
                    TriggerResult(
                        failure="Trigger exited without sending an event. Dependent tasks will be failed."
                    )
                )
            else:
                deliver(TriggerResult(event=event))
    finally:
        try:
            await trigger.cleanup()
        except Exception:  # Airflow ignores cleanup errors; at least log them
            log.exception("cleanup() of trigger %s failed", name or trigger)


#: Seconds before a watcher whose `run()` returned, or failed, is started again (Airflow's triggerer
#: starts an asset's trigger again at its next loop).
WATCHER_RESTART_SECONDS = 5.0


async def each_event(trigger: BaseTrigger, deliver: Callable[[BaseTrigger, TriggerEvent], None]) -> None:
    """Run `trigger` to its end, handing every event it yields to `deliver` (with the trigger, whose
    `event_key` describes the event just yielded), then close `run()`."""
    events = trigger.run()
    if not inspect.isasyncgen(events):
        if inspect.iscoroutine(events):
            events.close()
        raise TypeError(
            f"{type(trigger).__name__}.run() must be an async generator that yields TriggerEvents"
        )
    try:
        async for event in events:
            if not isinstance(event, TriggerEvent):
                raise TypeError(f"run() yielded {event!r}, not a TriggerEvent")
            deliver(trigger, event)
    finally:
        await events.aclose()


async def drive_watcher(
    make: Callable[[], BaseTrigger],
    *,
    deliver: Callable[[BaseTrigger, TriggerEvent], None],
    report_step: Callable[[float], None] = lambda seconds: None,
    name: str = "",
    restart_after: float = WATCHER_RESTART_SECONDS,
) -> None:
    """Run an asset watcher's trigger for good: every event to `deliver`; when `run()` returns or
    raises, `cleanup()`, then a fresh trigger from `make` after `restart_after` seconds. Only
    cancellation (the Trigger deleted, the shard lost, shutdown) ends it."""
    while True:
        trigger = make()
        try:
            await TimedSteps(each_event(trigger, deliver), report_step)
            log.info("Asset watcher %s returned; starting it again in %.0fs", name, restart_after)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("Asset watcher %s failed; starting it again in %.0fs", name, restart_after)
        finally:
            try:
                await trigger.cleanup()
            except Exception:
                log.exception("cleanup() of trigger %s failed", name)
        await asyncio.sleep(restart_after)
