"""`Follower`: one resource listed, then watched, into a handler, for as long as the process runs.

The controller's hottest watches (its task pods and DagRuns: eight or so events per task instance)
are followed here rather than by kopf. kopf's per-event machinery (per-object memories, a worker task
and a batching timer per object, three loggers, a throttler, a diff of essences, cause detection, a
patch to apply) was a fifth of the controller's busy loop with 100 runs at once (py-spy), for
handlers that only note what changed and enqueue a key. Here an event is a line decoded with msgspec
and one call of the same handler, with the arguments kopf gave it (`type`, `body`, `name`,
`namespace`, `event`); an object listed has `type` None, as in kopf.

What a watch must survive, and how:
- the server ending the stream (its timeout, an apiserver restart): watched again from the last
  resourceVersion seen, so nothing is missed and nothing delivered twice;
- bookmarks (`allowWatchBookmarks`): they move that resourceVersion on while nothing of ours changes,
  so a quiet watch resumes instead of listing again;
- 410 Gone (the version compacted away, as an ERROR event or a status): listed again; the objects
  that were delivered before and are missing from the new list are delivered as DELETED (their last
  body), which kopf did not do: a deletion in a watch gap is not lost;
- a failure (connection refused or reset, a stalled stream, a 5xx, a 429): watched again after a
  back-off that grows to `BACKOFF[-1]` and starts over once an event arrives.

Each call runs in a task of its own, as under kopf's per-object workers: a handler that awaits (a pod
event that patches the pod) does not hold up the stream, and a timeout inside it cancels that call,
not the follower. The next events of that same object wait for it, so one object's events keep their
order. (A call started in the follower's task until its first suspension saved ~30 us an event, but
aiohttp's request timeout entered there would cancel the follower.)
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import Counter

from controller.kube.errors import KubeError
from controller.kube.protocol import KubeApi

Body = dict[str, Any]
Handler = Callable[..., Awaitable[None]]
Key = tuple[str, str]  # namespace, name

log = logging.getLogger(__name__)

#: Seconds to wait before watching again after failures in a row (the last repeats).
BACKOFF = (0.1, 0.5, 1.0, 2.0, 5.0)
EVENTS = Counter(
    "zonda_watch_events_total", "Watch events and listed objects delivered to handlers", ["resource"]
)

#: The server-side timeout of one watch request; it is then watched again from where it ended.
SERVER_TIMEOUT_SECONDS = 300


def _key(body: Body) -> Key:
    meta = body.get("metadata") or {}
    return meta.get("namespace", ""), meta.get("name", "")


@dataclass
class Follower:
    kube: KubeApi
    plural: str
    namespace: str | None  # None: every namespace
    handler: Handler
    label_selector: str | None = None
    #: How the follower waits between failures (a test's clock may stand in).
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    #: The resourceVersion to watch from (None: list first).
    version: str | None = None
    #: The last body delivered of every object that exists: a list after a 410 finds the deletions.
    known: dict[Key, Body] = field(default_factory=dict)
    #: Handler calls still running, by object: that object's next events wait for them.
    running: dict[Key, asyncio.Task[None]] = field(default_factory=dict)
    lists: int = 0
    watches: int = 0
    failures: int = 0

    def __post_init__(self) -> None:
        self.events = EVENTS.labels(self.plural)

    async def run(self) -> None:
        """Forever (until cancelled)."""
        while True:
            try:
                if self.version is None:
                    await self.relist()
                await self.watch_once()
                self.failures = 0
            except asyncio.CancelledError:
                raise
            except KubeError as error:
                if error.status == 410:
                    log.info("watch of %s in %s expired; listing again", self.plural, self.where)
                    self.version = None
                    continue
                await self._back_off(error)
            except Exception as error:  # a dropped or stalled connection: watch again after a pause
                await self._back_off(error)

    @property
    def where(self) -> str:
        return self.namespace or "all namespaces"

    async def _back_off(self, error: BaseException) -> None:
        delay = BACKOFF[min(self.failures, len(BACKOFF) - 1)]
        self.failures += 1
        log.warning("watching %s in %s failed: %r; again in %ss", self.plural, self.where, error, delay)
        await self.sleep(delay)

    async def relist(self) -> None:
        """List, deliver each object (type None) and the deletions the list reveals, then watch from
        the list's resourceVersion."""
        items, version = await self.kube.list_objects(self.plural, self.namespace, self.label_selector)
        self.lists += 1
        listed = {_key(item) for item in items}
        for key in [key for key in self.known if key not in listed]:
            body = self.known.pop(key)
            await self.deliver("DELETED", body)
        for item in items:
            self.known[_key(item)] = item
            await self.deliver(None, item)
        self.version = version

    async def watch_once(self) -> None:
        """One watch request, until the server ends it; its events delivered in order."""
        self.watches += 1
        stream = self.kube.watch_objects(
            self.plural,
            self.namespace,
            label_selector=self.label_selector,
            resource_version=self.version,
            timeout_seconds=SERVER_TIMEOUT_SECONDS,
            bookmarks=True,
        )
        async for kind, body in stream:
            version = (body.get("metadata") or {}).get("resourceVersion")
            if kind == "BOOKMARK":
                self.version = version or self.version
                continue
            if kind not in ("ADDED", "MODIFIED", "DELETED"):
                log.warning("watch of %s in %s: ignoring an event of type %r", self.plural, self.where, kind)
                continue
            key = _key(body)
            if kind == "DELETED":
                self.known.pop(key, None)
            else:
                self.known[key] = body
            await self.deliver(kind, body)
            self.version = version or self.version
            self.failures = 0

    async def deliver(self, kind: str | None, body: Body) -> None:
        """Call the handler as kopf's `on.event` did, in a task of its own as kopf's per-object worker
        did: a handler that awaits (a pod event that patches the pod) does not hold up the stream, and
        inside it `asyncio.current_task()` is that call's task (aiohttp's request timeouts and
        `asyncio.timeout` cancel the task they were entered in: started in the follower's task, a
        timeout would cancel the follower). The next events of the same object wait for it, so one
        object's events keep their order; tasks start in the order they were made."""
        meta = body.get("metadata") or {}
        key = (meta.get("namespace", ""), meta.get("name", ""))
        self.events.inc()
        arguments = {
            "type": kind,
            "body": body,
            "name": key[1],
            "namespace": key[0],
            "event": {"type": kind, "object": body},
        }
        before = self.running.get(key)
        if before is not None and not before.done():
            self._track(key, asyncio.create_task(self._after(before, arguments)))
        else:
            self._track(key, asyncio.create_task(self._finish(key, self.handler(**arguments))))

    def _track(self, key: Key, task: asyncio.Task[None]) -> None:
        self.running[key] = task
        task.add_done_callback(lambda done: self._untrack(key, done))

    def _untrack(self, key: Key, task: asyncio.Task[None]) -> None:
        if self.running.get(key) is task:
            del self.running[key]

    async def _after(self, before: asyncio.Task[None], arguments: dict[str, Any]) -> None:
        await asyncio.wait([before])
        await self._finish((arguments["namespace"], arguments["name"]), self.handler(**arguments))

    async def _finish(self, key: Key, call: Awaitable[None]) -> None:
        try:
            await call
        except Exception:
            log.exception("handling %s %s/%s failed", self.plural, key[0], key[1])
