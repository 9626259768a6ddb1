"""The log stream's wire format and bookkeeping (pure parts of `controller.ui.log_stream`); the
browser test (tests/ui) streams a running task's log for real."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from controller.ui.log_stream import LogStream, no_log_note, sse, try_is_live


def parse_events(payload: bytes) -> list[tuple[str, str]]:
    """What a browser's EventSource makes of the bytes: (event type, data) per event."""
    events = []
    for block in payload.decode().split("\n\n")[:-1]:
        kind, data = "message", []
        for line in block.split("\n"):
            if line.startswith("event: "):
                kind = line.removeprefix("event: ")
            elif line.startswith("data: "):
                data.append(line.removeprefix("data: "))
        events.append((kind, "\n".join(data)))
    return events


@pytest.mark.parametrize(
    "text", ["one line", "two\nlines\n", "\n", "", "ends without newline", "a\r\nwindows\rline"]
)
def test_an_event_carries_its_text_exactly(text: str) -> None:
    expected = text.replace("\r\n", "\n").replace("\r", "\n")
    assert parse_events(sse(text)) == [("message", expected)]
    assert parse_events(sse(text, event="end")) == [("end", expected)]


@pytest.mark.parametrize(
    ("ti", "live"),
    [
        ({"state": "running", "tryNumber": 2}, True),
        ({"state": "deferred", "tryNumber": 2}, True),
        ({"state": "up_for_reschedule", "tryNumber": 2}, True),
        ({"state": "running", "tryNumber": 3}, False),  # a later try runs: try 2 is over
        ({"state": "up_for_retry", "tryNumber": 2}, False),
        ({"state": "success", "tryNumber": 2}, False),
    ],
)
def test_a_try_is_live_while_its_task_instance_may_still_write(ti: dict[str, Any], live: bool) -> None:
    assert try_is_live({"status": {"taskInstances": {"t": ti}}}, "t", 2) is live


class Recorder:
    def __init__(self) -> None:
        self.payload = b""

    async def write(self, data: bytes) -> None:
        self.payload += data


def test_text_is_sent_once_whether_read_whole_or_followed_from_the_start() -> None:
    """A follow restarts from the log's start (and a finished pod is read whole): only what was not
    sent goes out."""

    async def scenario() -> bytes:
        recorder = Recorder()
        stream = LogStream(recorder, kube=None, namespace="ns")  # type: ignore[arg-type]
        await stream.send_from("pod/p", "hello ", 0)
        await stream.send_from("pod/p", "hello ", 0)  # a second follow: the same start again
        await stream.send_from("pod/p", "world\n", 6)
        await stream.send_from("pod/p", "hello world\nbye\n", 0)  # read whole once finished
        return recorder.payload

    events = parse_events(asyncio.run(scenario()))
    assert "".join(data for _, data in events) == "hello world\nbye\n"


def test_a_finished_try_with_no_attempt_left_says_why_when_its_dag_deletes_pods() -> None:
    def run(**dag: Any) -> dict[str, Any]:
        spec = {"tasks": [{"id": "t", "operator": "EmptyOperator"}], **dag}
        return {"status": {"state": "success", "dagSpec": spec}}

    assert no_log_note(run(), "t", 1) == "no log for try 1 of t"
    assert no_log_note(run(deleteWorkerPods=True), "t", 1) == (
        "no log for try 1 of t: the run has finished and its DAG deletes its succeeded pods "
        "(failed ones are kept) with their logs (deleteWorkerPods)"
    )
