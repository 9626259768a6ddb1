"""`Follower` against FakeKube's watches: resumes where a stream ended, lists again after 410 Gone
(delivering the deletions it missed), moves on with bookmarks, backs off, and lets a handler wait.

Each test waits for what the follower delivered (`until`), never for time to pass.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

import pytest

from controller.kube.fake import FakeKube
from controller.kube.follow import BACKOFF, Follower, Handler
from zonda.resources.models import DAGRUNS

NS = "ns"


def run_body(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "zonda.dev/v1",
        "kind": "DagRun",
        "metadata": {"name": name},
        "spec": {"dagName": "d"},
    }


class Seen:
    """The events a handler was called with: (type, name, resourceVersion)."""

    def __init__(self) -> None:
        self.events: list[tuple[str | None, str, str]] = []

    async def handler(self, **event: Any) -> None:
        assert event["event"] == {"type": event["type"], "object": event["body"]}
        assert event["namespace"] == NS
        self.events.append((event["type"], event["name"], event["body"]["metadata"]["resourceVersion"]))

    def of(self, name: str) -> list[str | None]:
        return [kind for kind, n, _ in self.events if n == name]


class Pauses:
    """The follower's sleep between failures: records each delay, returns when let go."""

    def __init__(self) -> None:
        self.delays: list[float] = []
        self.go = asyncio.Event()
        self.go.set()

    async def sleep(self, delay: float) -> None:
        self.delays.append(delay)
        await self.go.wait()
        await asyncio.sleep(0)  # as a real pause, it lets the loop run


async def until(condition: Callable[[], bool], what: str) -> None:
    for _ in range(2000):
        if condition():
            return
        await asyncio.sleep(0.001)
    raise AssertionError(f"never: {what}")


@pytest.fixture
def kube() -> FakeKube:
    return FakeKube(keep_history=True)


async def started(
    kube: FakeKube, handler: Seen | Handler, pauses: Pauses | None = None
) -> tuple[Follower, asyncio.Task[None]]:
    """A follower of the namespace's DagRuns, running and watching (`handler`: a `Seen`'s or any)."""
    call = handler.handler if isinstance(handler, Seen) else handler
    follower = Follower(kube, DAGRUNS, NS, call, sleep=(pauses or Pauses()).sleep)
    task = asyncio.create_task(follower.run())
    await until(lambda: len(kube._watchers) == 1, "watching")
    return follower, task


async def stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_stream_ended_or_dropped_is_watched_again_from_the_last_event_not_listed_again(
    kube: FakeKube,
) -> None:
    await kube.create_custom(DAGRUNS, NS, run_body("r1"))
    seen = Seen()
    follower, task = await started(kube, seen)
    assert seen.events == [(None, "r1", "1")]  # listed, as kopf delivers a listed object

    kube.end_watches()  # the server's timeout
    await until(lambda: kube.watches_opened[DAGRUNS] == 2, "watching again")
    await kube.create_custom(DAGRUNS, NS, run_body("r2"))
    await until(lambda: seen.of("r2") == ["ADDED"], "r2 added")

    kube.break_watches()  # a dropped connection
    await until(lambda: kube.watches_opened[DAGRUNS] == 3, "watching again")
    await kube.patch_custom_status(DAGRUNS, NS, "r1", {"state": "running"})
    await kube.delete_custom(DAGRUNS, NS, "r2")
    await until(lambda: seen.of("r2") == ["ADDED", "DELETED"], "r2 deleted")

    assert seen.of("r1") == [None, "MODIFIED"]  # each change once, in order: nothing replayed
    assert kube.watches_opened[f"list {DAGRUNS}"] == 1
    assert follower.version == str(kube.history[-1][0])
    await stop(task)


async def test_a_watch_too_old_to_resume_lists_again_and_delivers_the_deletions_it_missed(
    kube: FakeKube,
) -> None:
    for name in ("r1", "r2"):
        await kube.create_custom(DAGRUNS, NS, run_body(name))
    seen, pauses = Seen(), Pauses()
    _, task = await started(kube, seen, pauses)
    pauses.go.clear()
    kube.break_watches()
    await until(lambda: pauses.delays == [BACKOFF[0]], "backing off")
    # while it is away: r1 deleted, r3 created, r2 changed, and etcd compacts those versions away
    await kube.delete_custom(DAGRUNS, NS, "r1")
    await kube.create_custom(DAGRUNS, NS, run_body("r3"))
    await kube.patch_custom_status(DAGRUNS, NS, "r2", {"state": "running"})
    kube.compact()
    pauses.go.set()

    await until(
        lambda: kube.watches_opened[f"list {DAGRUNS}"] == 2 and len(kube._watchers) == 1, "listed again"
    )
    assert seen.of("r1") == [None, "DELETED"]  # the deletion the watch never saw
    assert seen.of("r2") == [None, None]
    assert seen.of("r3") == [None]
    await kube.create_custom(DAGRUNS, NS, run_body("r4"))  # and it watches on from the new list
    await until(lambda: seen.of("r4") == ["ADDED"], "r4 added")
    await stop(task)


async def test_a_bookmark_moves_the_version_on_so_a_quiet_watch_resumes_after_a_compaction(
    kube: FakeKube,
) -> None:
    await kube.create_custom(DAGRUNS, NS, run_body("r1"))
    seen = Seen()
    follower, task = await started(kube, seen)
    await kube.create_pod(NS, {"metadata": {"name": "elsewhere"}})  # versions move, no DagRun event
    bookmark = kube.bookmark()
    await until(lambda: follower.version == str(bookmark), "bookmark seen")
    kube.compact(bookmark)  # everything before the bookmark compacted away
    kube.break_watches()
    await until(lambda: kube.watches_opened[DAGRUNS] == 2 and len(kube._watchers) == 1, "watching again")
    await kube.create_custom(DAGRUNS, NS, run_body("r2"))
    await until(lambda: seen.of("r2") == ["ADDED"], "r2 added")

    assert kube.watches_opened[f"list {DAGRUNS}"] == 1  # resumed from the bookmark, not listed again
    assert [kind for kind, _, _ in seen.events] == [None, "ADDED"]  # a bookmark is no event
    await stop(task)


async def test_failures_in_a_row_back_off_longer_and_an_event_starts_the_back_off_over(
    kube: FakeKube,
) -> None:
    seen, pauses = Seen(), Pauses()
    _, task = await started(kube, seen, pauses)
    for opened in (2, 3, 4):
        kube.break_watches()
        await until(lambda opened=opened: kube.watches_opened[DAGRUNS] == opened, "watching again")
    assert pauses.delays == list(BACKOFF[:3])
    await kube.create_custom(DAGRUNS, NS, run_body("r1"))
    await until(lambda: seen.of("r1") == ["ADDED"], "r1 added")
    kube.break_watches(TimeoutError("stalled"))
    await until(lambda: kube.watches_opened[DAGRUNS] == 5, "watching again")
    assert pauses.delays == [*BACKOFF[:3], BACKOFF[0]]
    await stop(task)


async def test_a_handler_that_waits_holds_up_neither_the_stream_nor_its_own_objects_order(
    kube: FakeKube,
) -> None:
    release = asyncio.Event()
    calls: list[tuple[str, str | None, str]] = []

    async def handler(**event: Any) -> None:
        calls.append(("start", event["type"], event["name"]))
        if event["name"] == "r1" and event["type"] == "ADDED":
            await release.wait()  # a pod patched, an API call retried
        calls.append(("end", event["type"], event["name"]))

    follower, task = await started(kube, handler)
    await kube.create_custom(DAGRUNS, NS, run_body("r1"))
    await kube.patch_custom_status(DAGRUNS, NS, "r1", {"state": "running"})
    await kube.create_custom(DAGRUNS, NS, run_body("r2"))
    await until(lambda: ("end", "ADDED", "r2") in calls, "r2 handled while r1 waits")
    assert ("start", "MODIFIED", "r1") not in calls  # r1's next event waits for its first

    release.set()
    await until(lambda: ("end", "MODIFIED", "r1") in calls, "r1 handled")
    r1 = [call for call in calls if call[2] == "r1"]
    assert r1 == [
        ("start", "ADDED", "r1"),
        ("end", "ADDED", "r1"),
        ("start", "MODIFIED", "r1"),
        ("end", "MODIFIED", "r1"),
    ]
    await until(lambda: not follower.running, "nothing left running")
    await stop(task)


async def test_a_handler_that_fails_is_logged_and_the_stream_goes_on(
    kube: FakeKube, caplog: pytest.LogCaptureFixture
) -> None:
    seen = Seen()

    async def handler(**event: Any) -> None:
        if event["name"] == "bad":
            raise ValueError("a bug")
        await seen.handler(**event)

    _, task = await started(kube, handler)
    await kube.create_custom(DAGRUNS, NS, run_body("bad"))
    await kube.create_custom(DAGRUNS, NS, run_body("good"))
    await until(lambda: seen.of("good") == ["ADDED"], "good added")
    assert "handling dagruns ns/bad failed" in caplog.text
    assert kube.watches_opened[DAGRUNS] == 1
    await stop(task)


async def test_a_handler_runs_in_a_task_of_its_own_so_its_timeout_cancels_it_not_the_follower(
    kube: FakeKube,
) -> None:
    """aiohttp's request timeout (and `asyncio.timeout`) cancel the task current when it was
    entered: a handler started in the follower's own task would cancel the follower, and the
    resource would go unwatched for the rest of the process."""
    tasks: list[asyncio.Task[Any] | None] = []
    seen = Seen()

    async def handler(**event: Any) -> None:
        tasks.append(asyncio.current_task())
        if event["name"] == "slow":
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(0.01):  # entered before the handler's first suspension
                    await asyncio.Event().wait()  # an API call that stalls
        await seen.handler(**event)

    _, task = await started(kube, handler)
    await kube.create_custom(DAGRUNS, NS, run_body("slow"))
    await until(lambda: seen.of("slow") == ["ADDED"], "the slow handler timed out and ended")
    await kube.create_custom(DAGRUNS, NS, run_body("after"))
    await until(lambda: seen.of("after") == ["ADDED"], "the follower still follows")
    assert task not in tasks and not task.done()
    await stop(task)
