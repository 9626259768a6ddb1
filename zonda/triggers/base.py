"""Airflow's trigger authoring API: `BaseTrigger`, `TriggerEvent`, and the task-ending events.

A trigger lives twice. In the task's try, an operator builds it and hands it to `defer`; the runner
calls `serialize()` and the controller stores the result in a `Trigger` resource (`spec.classpath`,
`spec.kwargs`). In a triggerer replica, `load_trigger` rebuilds it from those two fields and runs its
async generator `run()` until the first event. So `__init__` and `serialize` are written as a pair, and
the kwargs must survive JSON: `serialize_trigger` turns datetimes into ISO 8601 strings and
`load_trigger` turns such strings back into datetimes.
"""

from __future__ import annotations

import abc
import functools
import logging
from collections.abc import AsyncIterator, Hashable, Mapping
from typing import Any, ClassVar

from zonda.resources.json_values import from_json_safe, to_json_safe
from zonda.resources.models import TaskInstanceState
from zonda.specs.imports import import_string


class BaseTrigger(abc.ABC):
    """Base class of all triggers (Airflow's `airflow.triggers.base.BaseTrigger`).

    Subclasses implement `serialize` (how to rebuild them elsewhere) and the async generator `run`
    (yield a `TriggerEvent` when the awaited condition holds, then return). `cleanup` is awaited once
    `run` is over, however it ended: first event, cancellation (the task instance stopped waiting,
    or the replica lost the trigger's shard) or an error.
    """

    #: Whether it may watch an asset (`BaseEventTrigger`).
    event_trigger: ClassVar[bool] = False

    def __init__(self, **kwargs: Any) -> None:
        #: Name of the `Trigger` resource this instance runs for; set by the triggerer.
        self.trigger_id: str | None = None

    @property
    def log(self) -> logging.Logger:
        """This trigger class's logger (Airflow's `LoggingMixin.log`)."""
        return logging.getLogger(f"{type(self).__module__}.{type(self).__qualname__}")

    @abc.abstractmethod
    def serialize(self) -> tuple[str, dict[str, Any]]:
        """Return (class path, keyword arguments) that rebuild this trigger in another process."""
        raise NotImplementedError("Triggers must implement serialize()")

    @abc.abstractmethod
    def run(self) -> AsyncIterator[TriggerEvent]:
        """Wait asynchronously and yield events; the first one resumes the deferred task instance.

        Implement it as ``async def run(self): ... yield TriggerEvent(...)``. It must `await` whenever
        it waits: a blocking call stalls every other trigger of the replica (the triggerer logs it).
        A trigger may run in two places at once during a failover; its events must therefore be the
        same wherever it runs, so that the second one is recognised as a duplicate.
        """
        raise NotImplementedError("Triggers must implement run()")

    async def cleanup(self) -> None:  # noqa: B027 - an optional hook, like Airflow's
        """Release what `run` acquired; called after `run` ends in every case. Errors are logged only."""

    def __repr__(self) -> str:
        classpath, kwargs = self.serialize()
        arguments = ", ".join(f"{key}={value}" for key, value in kwargs.items())
        return f"<{classpath} {arguments}>"


class BaseEventTrigger(BaseTrigger):
    """A trigger that can watch an asset (Airflow 3's `airflow.triggers.base.BaseEventTrigger`).

    Given to `AssetWatcher(name, trigger)` on an `Asset` in a DAG's schedule, it runs in the triggerer
    for as long as a DAG is scheduled on the asset: every event it yields records an AssetEvent
    (extra `{"from_trigger": true, "payload": ...}`, as Airflow's), and when `run()` returns it is
    started again. The event's payload names it (with `event_key`, when the trigger gives one): the
    same payload twice is one event (Airflow's rule that events be "the same wherever the trigger is
    run"), so a watcher replayed after a failover, or restarted, does not update the asset again for
    what it already reported.
    """

    #: What `AssetWatcher` checks, as Airflow's `isinstance(trigger, BaseEventTrigger)`.
    event_trigger: ClassVar[bool] = True

    def event_key(self, event: TriggerEvent) -> str | None:
        """Zonda's: what, beside the payload, names the AssetEvent that `event` records.

        None (the default): the payload alone, right for a trigger that reports a state (a failover
        replays it, and the replay is the same event). A trigger that *consumes* what it reports (Airflow's
        `FileDeleteTrigger` deletes the file and yields ``True`` for every file) returns a key of that one
        occurrence, the same wherever it is read (a file's inode and times): equal payloads with
        different keys are different events, and such an event is recorded even if the shard's Lease
        lapsed meanwhile, since nobody else can see it again. Called as the event is yielded.
        """
        return None

    # Airflow 3.3's shared streams: sibling triggers with the same key may share one poll. Zonda's
    # triggerer runs each watcher's `run()` on its own (Airflow's standalone fallback); these are here so
    # that triggers written for them load and run unchanged.

    def shared_stream_key(self) -> Hashable | None:
        """Triggers returning the same key may share one `open_shared_stream` poll (None: not shared)."""
        return None

    @classmethod
    async def open_shared_stream(cls, kwargs: dict[str, Any]) -> AsyncIterator[Any]:
        """The shared poll, from one sibling's serialized kwargs; each item goes to every sibling."""
        raise NotImplementedError(f"{cls.__name__} does not implement open_shared_stream")
        yield  # pragma: no cover - makes this an async generator, as Airflow's

    async def filter_shared_stream(self, shared_stream: AsyncIterator[Any]) -> AsyncIterator[TriggerEvent]:
        """This trigger's events out of the shared poll's items."""
        raise NotImplementedError(f"{type(self).__name__} does not implement filter_shared_stream")
        yield  # pragma: no cover


class TriggerEvent:
    """Something a trigger fires when its condition is met; equal (and hashable) by payload.

    Equality by payload is what lets duplicates drop: the same trigger running in two replicas during a
    failover yields equal events, and only the first is ever written.
    """

    __slots__ = ("payload",)

    def __init__(self, payload: Any) -> None:
        self.payload = payload

    def __repr__(self) -> str:
        return f"TriggerEvent<{self.payload!r}>"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, TriggerEvent):
            return bool(other.payload == self.payload)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(_hashable(self.payload))


class BaseTaskEndEvent(TriggerEvent):
    """An event that ends the task instance from the triggerer instead of resuming it on a worker.

    Its payload is the final state (Airflow's), so the triggerer writes ``event: "success"`` etc.
    """

    __slots__ = ("xcoms",)

    task_instance_state: ClassVar[TaskInstanceState]

    def __init__(self, *, xcoms: dict[str, Any] | None = None, **kwargs: Any) -> None:
        if "payload" in kwargs:
            raise ValueError("Param 'payload' not supported for this class.")
        super().__init__(payload=self.task_instance_state.value)
        self.xcoms = xcoms


class TaskSuccessEvent(BaseTaskEndEvent):
    """Yield this event to end the task successfully."""

    __slots__ = ()
    task_instance_state = TaskInstanceState.SUCCESS


class TaskFailedEvent(BaseTaskEndEvent):
    """Yield this event to end the task with failure."""

    __slots__ = ()
    task_instance_state = TaskInstanceState.FAILED


class TaskSkippedEvent(BaseTaskEndEvent):
    """Yield this event to end the task as skipped."""

    __slots__ = ()
    task_instance_state = TaskInstanceState.SKIPPED


# ------------------------------------------------------------------------------------ (de)serialization


def serialize_trigger(trigger: BaseTrigger) -> tuple[str, dict[str, Any]]:
    """The trigger's (classpath, kwargs) in the JSON-safe form a `Trigger` resource stores."""
    classpath, kwargs = trigger.serialize()
    encoded: dict[str, Any] = to_json_safe(kwargs, path="kwargs")
    return classpath, encoded


def load_trigger(classpath: str, kwargs: Mapping[str, Any]) -> BaseTrigger:
    """Rebuild a trigger from a `Trigger` resource's `spec.classpath` and `spec.kwargs`.

    `classpath` is ``package.module.Class`` or ``package.module:Class``. Raises ImportError when the
    class cannot be found, TypeError when it is not a trigger or rejects the kwargs.
    """
    trigger_class = import_trigger_class(classpath)
    return trigger_class(**from_json_safe(dict(kwargs)))


@functools.cache
def import_trigger_class(classpath: str) -> type[BaseTrigger]:
    """The `BaseTrigger` subclass at `classpath` (cached, as Airflow's triggerer caches it)."""
    found = import_string(classpath)
    if not (isinstance(found, type) and issubclass(found, BaseTrigger)):
        raise TypeError(f"{classpath!r} is not a BaseTrigger subclass")
    return found


def _hashable(value: Any) -> Any:
    """A hashable stand-in for `value` such that equal values give equal stand-ins."""
    if isinstance(value, Mapping):
        return frozenset((key, _hashable(item)) for key, item in value.items())
    if isinstance(value, list | tuple):
        return tuple(_hashable(item) for item in value)
    if isinstance(value, set | frozenset):
        return frozenset(_hashable(item) for item in value)
    try:
        hash(value)
    except TypeError:
        return repr(value)
    return value
