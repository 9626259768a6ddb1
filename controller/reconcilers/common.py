"""What both reconcilers share: the clock, status writes checked by resourceVersion, Events in the background.

Invariant: the controller writes only `status` (and creates/deletes its own children); a write is
a whole-status replace that fails with Conflict if anyone wrote since the read, so a user's clear or
mark is never overwritten by a decision made on the older object.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from controller.kube import Conflict, KubeApi
from controller.processes import clock
from controller.reconcilers import metrics
from zonda.passes import events as run_events
from zonda.resources.run_events import RunEvent

logger = logging.getLogger(__name__)

M = TypeVar("M", bound=BaseModel)


def utcnow() -> datetime:
    """The controller's clock, read once per pass (the core never reads one)."""
    return clock.utcnow()


def parse_status(model: type[M], raw: Mapping[str, Any] | None) -> M:
    """The object's status as `model`; an unreadable one (hand-edited, older version) counts as empty."""
    try:
        return model.model_validate(raw or {})
    except ValidationError:
        logger.warning("ignoring an unreadable %s", model.__name__)
        return model()


#: Seconds a watch event of an object waits for our status write of it under way (`settled`): past
#: that, it is judged without the answer, as before (a hung write is bounded by the API timeout).
OWN_WRITE_WAIT_SECONDS = 5.0

#: Told of an object as one of our writes left it (the apiserver's answer): plural, body.
OwnWriteObserver = Callable[[str, Mapping[str, Any]], None]


@dataclass
class StatusWriter:
    """Writes statuses and remembers their resourceVersions, so our own writes' watch events are skipped.

    Views kept from a watch (`controller.reconcilers.dags.DagRunRefs`) `subscribe` to our own writes
    (status writes here, creates via `wrote`): the watch delivers a write some time after it answered,
    and a pass run in between must not decide on the state before it. A run's pass that writes
    `success` wakes its DAG at once; without this, that DAG's pass counted the run as still active,
    and the watch event, ours, woke nobody again (the DAG stalled at maxActiveRuns).
    """

    kube: KubeApi
    own_writes: dict[tuple[str, str, str], str] = field(default_factory=dict)
    observers: list[OwnWriteObserver] = field(default_factory=list)
    _background: set[asyncio.Task[None]] = field(default_factory=set)
    #: The latest posting task of each object: the next one waits for it, so passes stay in order.
    _last_post: dict[tuple[str, str], asyncio.Task[None]] = field(default_factory=dict)
    #: Seconds a task outcome is kept at most to share an Event with the next ones (0: each posted at once).
    fold_seconds: float = 0.0
    #: Per object: the object as last seen, the outcomes kept, and the timer that posts them.
    _folds: dict[tuple[str, str], tuple[Mapping[str, Any], list[RunEvent], asyncio.Task[None]]] = field(
        default_factory=dict
    )
    #: Status writes under way, by object, done when the write has answered (`settled`).
    _writing: dict[tuple[str, str, str], asyncio.Future[None]] = field(default_factory=dict)

    async def write_status(
        self, plural: str, obj: Mapping[str, Any], old: Mapping[str, Any], new: Mapping[str, Any]
    ) -> bool:
        """Replace the whole status if it changed, only if nobody wrote since we read (else False)."""
        if dict(old) == dict(new):
            return True
        body = {
            "apiVersion": obj["apiVersion"],
            "kind": obj["kind"],
            "metadata": obj["metadata"],
            "spec": obj["spec"],
            "status": dict(new),
        }
        meta = obj["metadata"]
        key = (plural, meta["namespace"], meta["name"])
        answered = self._writing[key] = asyncio.get_running_loop().create_future()
        try:
            written = await self.kube.replace_custom_status(plural, meta["namespace"], body)
        except Conflict:
            metrics.API_ERRORS.labels("conflict").inc()
            return False
        finally:
            if self._writing.get(key) is answered:
                del self._writing[key]
            answered.set_result(None)  # its waiters run after the lines below: ours is known by then
        self.own_writes[key] = written["metadata"]["resourceVersion"]
        self.wrote(plural, written)
        return True

    async def settled(self, plural: str, namespace: str, name: str) -> None:
        """Wait until our status write of the object under way, if any, has answered (at most
        `OWN_WRITE_WAIT_SECONDS`; none under way: at once).

        The watch delivers a write's event on another connection than its answer, and on a busy
        loop it often comes first: `is_own_write` then took it for someone else's and woke the run
        for a pass of its own, after the one that wrote (2-14 extra passes per 20-task chain, most
        of them writing the status again; each event of that pass's write could do the same). An
        event that waits here is judged once the answer is known, as one delivered after it."""
        answered = self._writing.get((plural, namespace, name))
        if answered is not None:
            await asyncio.wait([answered], timeout=OWN_WRITE_WAIT_SECONDS)

    def subscribe(self, observer: OwnWriteObserver) -> None:
        self.observers.append(observer)

    def wrote(self, plural: str, body: Mapping[str, Any]) -> None:
        """An object as one of our writes (a status write, a create) left it: tell the observers."""
        for observer in self.observers:
            observer(plural, body)

    def written_version(self, plural: str, namespace: str, name: str) -> str | None:
        """The resourceVersion of our latest status write of the object (None: none yet)."""
        return self.own_writes.get((plural, namespace, name))

    def is_own_write(self, plural: str, namespace: str, name: str, resource_version: str | None) -> bool:
        """True for the watch event of a status we wrote, or of any version before our latest write:
        it needs no reconcile of its own.

        Each pass already settles everything its decision implies, and asks to be woken for the rest;
        re-reading our own write would only cost three API reads per task-instance change. Older
        versions are not news either: a status write is checked by resourceVersion, so our latest one
        was made on the version just before it, and everything older is in that. Only equality was
        taken before: when two passes wrote before the watch delivered the first write, its event
        looked like someone else's and woke a pass (2.7 run passes per task instance instead of 1.1
        with 100 runs at once, each recording a pod running and writing again).
        """
        own = self.own_writes.get((plural, namespace, name))
        if resource_version is None or own is None:
            return False
        if own.isdigit() and resource_version.isdigit():  # etcd's revisions, as every apiserver serves
            return int(resource_version) <= int(own)
        return own == resource_version

    def post_events(self, obj: Mapping[str, Any], events: Sequence[RunEvent]) -> None:
        """Post Events in the background, in order: advisory, so the next reconcile need not wait.

        In order across passes too: a pass's Events wait for those of the object's previous pass, which
        may still be posting (else `kubectl describe` could show a later pass's Event between two of an
        earlier one's, since it sorts by the time each was posted).

        With `fold_seconds`, task outcomes (`zonda.passes.events.foldable`) are kept until the
        object's next other Event, at most that long, and posted as one Event with every message
        (`events.fold`): on a chain each pass has one outcome, and one Event per task instance was a
        quarter of the controller's writes. A warning or a run's own Event posts what was kept first,
        so the order shown is the order things happened; a run's successful end carries them in its
        own note (`events.close`).
        """
        if not events:
            return
        key = (obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
        now_: list[RunEvent] = []
        for event in events:
            if self.fold_seconds > 0 and not now_ and run_events.closes(event):
                now_ = run_events.close(self._take_kept(key), event)
                continue
            if self.fold_seconds <= 0 or not run_events.foldable(event):
                now_.append(event)
                continue
            kept = self._folds.get(key)
            if now_ or (kept is not None and not run_events.fits(kept[1], event)):
                self._post_now(obj, [*self._take_fold(key), *now_])
                now_ = []
            self._keep(key, obj, event)
        if now_:
            self._post_now(obj, [*self._take_fold(key), *now_])

    def _keep(self, key: tuple[str, str], obj: Mapping[str, Any], event: RunEvent) -> None:
        kept = self._folds.get(key)
        if kept is not None:
            self._folds[key] = (obj, [*kept[1], event], kept[2])
            return

        async def post_when_due() -> None:
            await asyncio.sleep(self.fold_seconds)
            if (due := self._folds.get(key)) is not None and due[2] is timer:
                self._post_now(due[0], self._take_fold(key))

        timer = asyncio.create_task(post_when_due())
        self._track(key, timer, last_post=False)
        self._folds[key] = (obj, [event], timer)

    def _take_fold(self, key: tuple[str, str]) -> list[RunEvent]:
        """The outcomes kept for `key`, folded into one Event (none kept: none); their timer stops."""
        kept = self._take_kept(key)
        return [run_events.fold(kept)] if kept else []

    def _take_kept(self, key: tuple[str, str]) -> list[RunEvent]:
        """The outcomes kept for `key`, in order (none kept: none); their timer stops."""
        kept = self._folds.pop(key, None)
        if kept is None:
            return []
        if kept[2] is not asyncio.current_task():
            kept[2].cancel()
        return kept[1]

    def _post_now(self, obj: Mapping[str, Any], events: Sequence[RunEvent]) -> None:
        if not events:
            return
        key = (obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
        previous = self._last_post.get(key)

        async def post() -> None:
            if previous is not None:
                await asyncio.wait([previous])  # its end, whatever it was (never raises)
            for event in events:  # one after another: `kubectl describe` shows them as they happened
                try:
                    await self.kube.emit_event(
                        obj, reason=event.reason, message=event.message, warning=event.warning
                    )
                except Exception as exc:  # an Event lost is advisory; the status holds the truth
                    metrics.API_ERRORS.labels("event").inc()
                    logger.warning("posting an Event failed: %s", exc)

        self._track(key, asyncio.create_task(post()), last_post=True)

    def _track(self, key: tuple[str, str], task: asyncio.Task[None], *, last_post: bool) -> None:
        self._background.add(task)
        if last_post:
            self._last_post[key] = task

        def done(finished: asyncio.Task[None]) -> None:
            self._background.discard(finished)
            if self._last_post.get(key) is finished:
                del self._last_post[key]

        task.add_done_callback(done)

    async def flush_events(self, within: float) -> int:
        """Wait up to `within` seconds for the Events still posting; how many were left unposted.

        Called on shutdown, after the last pass: a controller stopped right after a run ended would
        otherwise drop that run's last Events (`RunSucceeded`...), which only a later pass could not
        repost, since the status that caused them is already written."""
        for key, (obj, _, _) in list(self._folds.items()):
            self._post_now(obj, self._take_fold(key))  # kept outcomes: posted now, not at their time
        if not self._background:
            return 0
        _, pending = await asyncio.wait(set(self._background), timeout=within)
        return len(pending)
