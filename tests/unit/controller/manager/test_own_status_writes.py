"""A DagRun watch event of our own status write, delivered before the write's answer.

The watch and the write's answer come on two connections; on a busy event loop the event is often
handled first. Judged then, it looked like someone else's write and woke the run for a pass of its
own after the one that wrote: 2-14 extra passes per 20-task chain on kwok (most writing the status
again), and a task's end that came meanwhile waited behind them. Real: the controller process's
DagRun handler, its work queue (not started: what it holds is what would run), the reconcilers and
the status writer. Fake: the API (which delivers the event from inside the write, before answering)
and the executor.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from controller.kube import DAGRUNS, DAGS
from controller.kube.fake import FakeKube
from controller.manager.main import ControllerProcess
from tests.unit.controller.manager.test_pool_wakeups import NS, process, queued
from tests.unit.controller.reconcilers.test_pool_reconcilers import SlowExecutor
from tests.unit.fake_world import dag_body, run_body

RUN_KEY = ("run", NS, "d-1")


class EventsBeforeAnswers(FakeKube):
    """Delivers each DagRun status write's watch event to the handler before answering the write, and
    lets it run as far as it goes; `also` is delivered with it (a write of someone else's after ours)."""

    def __init__(self) -> None:
        super().__init__()
        self.proc: ControllerProcess | None = None
        self.handlers: list[asyncio.Task[None]] = []
        self.also: dict[str, Any] | None = None

    async def replace_custom_status(
        self, plural: str, namespace: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        written = await super().replace_custom_status(plural, namespace, body)
        if plural == DAGRUNS and self.proc is not None:
            for sent in [written, *([self.also] if self.also is not None else [])]:
                event = copy.deepcopy(sent)
                self.handlers.append(
                    asyncio.create_task(
                        self.proc.on_dagrun(
                            type="MODIFIED",
                            body=event,
                            name=event["metadata"]["name"],
                            namespace=namespace,
                            event={"type": "MODIFIED", "object": event},
                        )
                    )
                )
            for _ in range(5):  # the handler runs as far as it can before the answer is read
                await asyncio.sleep(0)
        return written


def _pass_and_events(kube: EventsBeforeAnswers, proc: ControllerProcess, *, someone_else: bool) -> set[Any]:
    async def scenario() -> set[Any]:
        assert proc.services is not None
        await kube.create_custom(DAGS, NS, dag_body("d"))
        await kube.create_custom(DAGRUNS, NS, run_body("d-1", "d"))
        if someone_else:  # a write after ours (a user's clear), delivered with our write's event
            later = copy.deepcopy(kube.objects[(DAGRUNS, NS, "d-1")])
            later["metadata"]["resourceVersion"] = "999999"
            kube.also = later
        kube.proc = proc
        await proc.services.reconcilers.reconcile("run", NS, "d-1")  # launches extract, writes
        await asyncio.gather(*kube.handlers)
        assert kube.handlers, "the write's event was delivered"
        return queued(proc)

    return asyncio.run(scenario())


def test_our_status_writes_event_delivered_before_its_answer_wakes_no_pass() -> None:
    kube = EventsBeforeAnswers()
    proc, _ = process(kube, SlowExecutor())
    assert RUN_KEY not in _pass_and_events(kube, proc, someone_else=False)


def test_someone_elses_write_delivered_meanwhile_still_wakes_the_run() -> None:
    """Positive control: the wait does not swallow news."""
    kube = EventsBeforeAnswers()
    proc, _ = process(kube, SlowExecutor())
    assert RUN_KEY in _pass_and_events(kube, proc, someone_else=True)
