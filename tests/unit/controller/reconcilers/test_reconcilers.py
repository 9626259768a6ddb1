"""The reconcilers against `FakeKube`: gather -> decide -> act, without a cluster.

Real: the reconcilers, the pure core, the status writes with resourceVersion checks (the fake
refuses stale writes with Conflict as the apiserver does). Fake: the API (`controller.kube.fake`)
and the executor (attempts are what the test says they are). tests/cluster proves the real thing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest

from controller.kube import DAGRUNS, DAGS
from controller.kube.fake import FakeKube, matches
from controller.reconcilers.reconcilers import Reconcilers
from tests.unit.fake_world import NS, FakeExecutor, dag_body, run_body, settle


def test_a_manual_run_goes_from_start_to_success(world: tuple[FakeKube, FakeExecutor, Reconcilers]) -> None:
    kube, executor, reconcilers = world

    async def scenario() -> None:
        await kube.create_custom(DAGS, NS, dag_body("etl"))
        await kube.create_custom(DAGRUNS, NS, run_body("etl-1", "etl"))
        await reconcilers.reconcile("run", NS, "etl-1")
        assert len(executor.launched) == 1 and "extract" in executor.launched[0]
        executor.finish(executor.launched[0])
        await reconcilers.reconcile("run", NS, "etl-1")
        executor.finish(executor.launched[1])
        await reconcilers.reconcile("run", NS, "etl-1")
        await settle()

    asyncio.run(scenario())
    run = kube.objects[(DAGRUNS, NS, "etl-1")]
    assert run["status"]["state"] == "success"
    assert {t: ti["state"] for t, ti in run["status"]["taskInstances"].items()} == {
        "extract": "success",
        "load": "success",
    }
    assert [e.reason for e in kube.events] == ["RunStarted", "TaskSucceeded", "TaskSucceeded", "RunSucceeded"]
    # three passes, three status writes, nothing else but launches and Events
    assert kube.writes.get("replace-status dagruns") == 3


def test_a_run_made_without_the_dag_label_is_warned_about_once_as_it_starts(
    world: tuple[FakeKube, FakeExecutor, Reconcilers],
) -> None:
    """include_prior_dates lists a DAG's runs by label: a run without it would be silently unseen."""
    kube, executor, reconcilers = world

    async def scenario() -> None:
        await kube.create_custom(DAGS, NS, dag_body("etl"))
        await kube.create_custom(DAGRUNS, NS, run_body("etl-1", "etl", labelled=False))
        await reconcilers.reconcile("run", NS, "etl-1")
        executor.finish(executor.launched[0])
        await reconcilers.reconcile("run", NS, "etl-1")
        await settle()

    asyncio.run(scenario())
    missing = [e for e in kube.events if e.reason == "MissingDagLabel"]
    assert len(missing) == 1 and missing[0].warning, kube.events
    assert "zonda.dev/dag=etl" in missing[0].message and "include_prior_dates" in missing[0].message
    assert kube.objects[(DAGRUNS, NS, "etl-1")]["metadata"]["labels"] == {}, "the user's object is left as is"


def test_a_finished_run_deletes_its_succeeded_pods_once_when_its_dag_says_so(
    world: tuple[FakeKube, FakeExecutor, Reconcilers],
) -> None:
    kube, executor, reconcilers = world

    async def scenario() -> None:
        await kube.create_custom(DAGS, NS, dag_body("etl", deleteWorkerPods=True))
        await kube.create_custom(DAGRUNS, NS, run_body("etl-1", "etl"))
        await reconcilers.reconcile("run", NS, "etl-1")
        executor.finish(executor.launched[0])
        await reconcilers.reconcile("run", NS, "etl-1")
        assert executor.deleted == []  # the run still runs: every pod stays
        executor.finish(executor.launched[1])
        await reconcilers.reconcile("run", NS, "etl-1")
        await reconcilers.reconcile("run", NS, "etl-1")  # gone: nothing more to delete, no second Event
        await settle()

    asyncio.run(scenario())
    assert kube.objects[(DAGRUNS, NS, "etl-1")]["status"]["state"] == "success"
    assert sorted(executor.deleted) == sorted(executor.launched) and executor.attempts == {}
    deleted = [e for e in kube.events if e.reason == "WorkerPodsDeleted"]
    assert len(deleted) == 1 and "deleted 2 finished pod(s)" in deleted[0].message


def test_a_run_of_a_missing_dag_says_so_once_and_waits(
    world: tuple[FakeKube, FakeExecutor, Reconcilers],
) -> None:
    kube, executor, reconcilers = world

    async def scenario() -> Any:
        await kube.create_custom(DAGRUNS, NS, run_body("orphan-1", "nope"))
        first = await reconcilers.reconcile("run", NS, "orphan-1")
        second = await reconcilers.reconcile("run", NS, "orphan-1")
        return first, second

    first, second = asyncio.run(scenario())
    assert first is not None and second is not None  # looks again later
    ready = kube.objects[(DAGRUNS, NS, "orphan-1")]["status"]["conditions"][0]
    assert (ready["type"], ready["status"], ready["reason"]) == ("Ready", "False", "DagNotFound")
    assert [e.reason for e in kube.events] == ["DagNotFound"]
    assert executor.launched == []


def test_a_user_write_between_read_and_write_wins_and_the_pass_is_retried(
    world: tuple[FakeKube, FakeExecutor, Reconcilers],
) -> None:
    kube, _, reconcilers = world

    async def scenario() -> Any:
        await kube.create_custom(DAGS, NS, dag_body("etl"))
        await kube.create_custom(DAGRUNS, NS, run_body("etl-1", "etl"))
        original = kube.get_custom

        async def get_then_user_writes(plural: str, namespace: str, name: str) -> Any:
            body = await original(plural, namespace, name)
            if plural == DAGRUNS and body is not None:  # a user's clear lands right after our read
                await kube.patch_custom_status(DAGRUNS, namespace, name, {"message": "user"})
            return body

        kube.get_custom = get_then_user_writes  # type: ignore[method-assign]
        again = await reconcilers.reconcile("run", NS, "etl-1")
        kube.get_custom = original  # type: ignore[method-assign]
        return again

    again = asyncio.run(scenario())
    assert again is not None  # decide again at once on the fresh object
    assert kube.objects[(DAGRUNS, NS, "etl-1")]["status"] == {"message": "user"}


def test_a_scheduled_dag_creates_its_backlog_once(world: tuple[FakeKube, FakeExecutor, Reconcilers]) -> None:
    kube, _, reconcilers = world

    async def scenario() -> None:
        await kube.create_custom(
            DAGS, NS, dag_body("daily", schedule="@daily", startDate="2026-01-01T00:00:00Z", maxActiveRuns=3)
        )
        await reconcilers.reconcile("dag", NS, "daily")
        await reconcilers.reconcile("dag", NS, "daily")  # a second pass (or controller) creates nothing more

    asyncio.run(scenario())
    runs = sorted(name for kind, _, name in kube.objects if kind == DAGRUNS)
    assert runs == [
        "daily-scheduled-20260101t000000z",
        "daily-scheduled-20260102t000000z",
        "daily-scheduled-20260103t000000z",
    ]
    status = kube.objects[(DAGS, NS, "daily")]["status"]
    assert status["activeRuns"] == 3
    assert [c["reason"] for c in status["conditions"]] == ["Valid", "MaxActiveRuns"]
    assert kube.writes["create dagruns"] == 3


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("a=1", True),
        ("a=2", False),
        ("a in (1,2),b=x", True),
        ("b in (y)", False),
        ("c", False),
        (None, True),
    ],
)
def test_the_fake_understands_label_selectors(selector: str | None, expected: bool) -> None:
    assert matches({"a": "1", "b": "x"}, selector) is expected


class SlowFirstEventKube(FakeKube):
    """Posting an Event takes a while the first time (a slow apiserver), at once afterwards."""

    def __init__(self) -> None:
        super().__init__()
        self.slow = True

    async def emit_event(self, involved: Mapping[str, Any], **kwargs: Any) -> None:
        if self.slow:
            self.slow = False
            await asyncio.sleep(0.05)
        await super().emit_event(involved, **kwargs)


async def test_a_passs_events_are_posted_after_those_of_the_previous_pass_still_posting() -> None:
    """`kubectl describe` orders Events by when they were posted: a second pass's must not overtake."""
    from controller.reconcilers.common import StatusWriter
    from zonda.resources.run_events import RunEvent

    kube = SlowFirstEventKube()
    writer = StatusWriter(kube)
    run = {"kind": "DagRun", "metadata": {"name": "r", "namespace": NS}}
    other = {"kind": "DagRun", "metadata": {"name": "other", "namespace": NS}}
    writer.post_events(run, [RunEvent("RunStarted", "started"), RunEvent("TaskSucceeded", "a done")])
    writer.post_events(run, [RunEvent("RunSucceeded", "succeeded")])
    writer.post_events(other, [RunEvent("RunStarted", "started")])
    await settle()
    posted = [(event.name, event.reason) for event in kube.events]
    in_order = ["RunStarted", "TaskSucceeded", "RunSucceeded"]
    assert [reason for name, reason in posted if name == "r"] == in_order
    assert posted[0] == ("other", "RunStarted"), "another object's Events do not wait"
    assert not writer._last_post, "nothing kept once posted"


async def test_flush_events_waits_for_the_events_still_posting_so_a_stopping_controller_keeps_them() -> None:
    from controller.reconcilers.common import StatusWriter
    from zonda.resources.run_events import RunEvent

    kube = SlowFirstEventKube()
    writer = StatusWriter(kube)
    assert await writer.flush_events(within=1) == 0, "nothing posting: nothing to wait for"
    run = {"kind": "DagRun", "metadata": {"name": "r", "namespace": NS}}
    writer.post_events(run, [RunEvent("TaskSucceeded", "a done"), RunEvent("RunSucceeded", "succeeded")])
    assert not kube.events, "posted in the background"
    assert await writer.flush_events(within=5) == 0
    assert [event.reason for event in kube.events] == ["TaskSucceeded", "RunSucceeded"]


async def test_flush_events_gives_up_after_its_time_and_says_how_many_are_left() -> None:
    from controller.reconcilers.common import StatusWriter
    from zonda.resources.run_events import RunEvent

    class HangingKube(FakeKube):
        async def emit_event(self, involved: Mapping[str, Any], **kwargs: Any) -> None:
            await asyncio.sleep(60)

    writer = StatusWriter(HangingKube())
    writer.post_events({"kind": "DagRun", "metadata": {"name": "r", "namespace": NS}}, [RunEvent("X", "x")])
    assert await writer.flush_events(within=0.05) == 1
    for task in asyncio.all_tasks() - {asyncio.current_task()}:
        task.cancel()


async def test_task_outcomes_share_one_event_until_a_warning_or_the_run_speaks_and_none_is_lost() -> None:
    """`fold_seconds`: a chain's outcomes over several passes are one Event, in the order they happened."""
    from controller.reconcilers.common import StatusWriter
    from zonda.resources.run_events import RunEvent

    kube = FakeKube()
    writer = StatusWriter(kube, fold_seconds=3600.0)  # posted only by what follows them, not by time
    run = {"kind": "DagRun", "metadata": {"name": "r", "namespace": NS}}
    writer.post_events(run, [RunEvent("RunStarted", "started")])
    writer.post_events(run, [RunEvent("TaskSucceeded", "a done")])
    writer.post_events(run, [RunEvent("TaskSucceeded", "b done")])
    writer.post_events(
        run, [RunEvent("TaskFailed", "c failed", warning=True), RunEvent("TaskSucceeded", "d")]
    )
    writer.post_events(run, [RunEvent("TaskSkipped", "e skipped")])
    await asyncio.wait(set(writer._last_post.values()))  # what was posted (the kept ones wait an hour)
    assert [(e.reason, e.message) for e in kube.events] == [
        ("RunStarted", "started"),
        ("TaskSucceeded", "a done; b done"),
        ("TaskFailed", "c failed"),
    ]
    assert await writer.flush_events(within=5) == 0, "a stopping controller posts what it kept"
    assert [(e.reason, e.message) for e in kube.events][3:] == [("TaskSkipped", "d; e skipped")]

    timed = StatusWriter(kube, fold_seconds=0.01)
    timed.post_events(run, [RunEvent("TaskSucceeded", "f done")])
    assert kube.events[-1].message != "f done", "kept for its window"
    await settle()
    assert kube.events[-1].message == "f done", "posted when its window ends, with nothing following"


async def test_a_runs_outcomes_seconds_apart_share_events_with_the_default_fold_and_its_end() -> None:
    """With 100 runs at once one run's outcomes are seconds apart: a 2 s window folded none of them
    (1.01 Events per task instance). With the default window they share an Event until the window's
    end, the run's successful end carries the rest, and a deferral is told at once."""
    from controller.manager.settings import ControllerSettings
    from controller.reconcilers.common import StatusWriter
    from zonda.resources.run_events import RunEvent

    loop = asyncio.get_running_loop()
    real_time, ahead = loop.time, [0.0]
    loop.time = lambda: real_time() + ahead[0]  # type: ignore[method-assign]  # the loop's clock, moved on
    try:
        kube = FakeKube()
        writer = StatusWriter(kube, fold_seconds=ControllerSettings().event_fold_seconds)
        run = {"kind": "DagRun", "metadata": {"name": "r", "namespace": NS}}
        writer.post_events(run, [RunEvent("RunStarted", "started")])
        for task in range(20):
            if task:  # each outcome 3 s after the one before
                ahead[0] += 3.0
                for _ in range(5):  # a timer that is due runs, and its post with it
                    await asyncio.sleep(0)
            writer.post_events(run, [RunEvent("TaskSucceeded", f"t{task} done")])
            for _ in range(2):  # a new timer starts
                await asyncio.sleep(0)
        writer.post_events(run, [RunEvent("RunSucceeded", "succeeded")])  # with the last outcome
        await asyncio.wait(set(writer._last_post.values()))
        assert len(kube.events) == 3, [(e.reason, e.message) for e in kube.events]
        assert [e.reason for e in kube.events] == ["RunStarted", "TaskSucceeded", "RunSucceeded"]
        told = "; ".join(e.message for e in kube.events)
        assert told == "; ".join(["started", *(f"t{task} done" for task in range(20)), "succeeded"])

        deferred = {"kind": "DagRun", "metadata": {"name": "d", "namespace": NS}}
        writer.post_events(deferred, [RunEvent("TaskSucceeded", "a done")])
        writer.post_events(deferred, [RunEvent("TaskDeferred", "b deferred")])
        await asyncio.wait(set(writer._last_post.values()))
        assert [(e.reason, e.message) for e in kube.events[3:]] == [
            ("TaskSucceeded", "a done"),
            ("TaskDeferred", "b deferred"),
        ], "a task left waiting is told at once, after what was kept"
    finally:
        loop.time = real_time  # type: ignore[method-assign]


def test_the_watch_event_of_our_write_or_of_any_older_version_is_ours_a_newer_one_is_news(
    world: tuple[FakeKube, FakeExecutor, Reconcilers],
) -> None:
    """Two passes may write before the watch delivers the first write: its event is not news."""
    kube, executor, reconcilers = world

    async def scenario() -> tuple[str, str]:
        await kube.create_custom(DAGS, NS, dag_body("etl"))
        await kube.create_custom(DAGRUNS, NS, run_body("etl-1", "etl"))
        await reconcilers.reconcile("run", NS, "etl-1")
        first = kube.objects[(DAGRUNS, NS, "etl-1")]["metadata"]["resourceVersion"]
        executor.finish(executor.launched[0])
        await reconcilers.reconcile("run", NS, "etl-1")
        await settle()
        return first, kube.objects[(DAGRUNS, NS, "etl-1")]["metadata"]["resourceVersion"]

    first, second = asyncio.run(scenario())
    assert int(first) < int(second)
    own = reconcilers.is_own_write
    assert own(DAGRUNS, NS, "etl-1", second)
    assert own(DAGRUNS, NS, "etl-1", first), "our first write, delivered after the second"
    assert not own(DAGRUNS, NS, "etl-1", str(int(second) + 1)), "a write after ours is news"
    assert not own(DAGRUNS, NS, "other", first), "nothing written to it: every event is news"
    assert not own(DAGRUNS, NS, "etl-1", None)
