"""A try's log streamed to the browser as it is written (Server-Sent Events), instead of the page
fetching the whole log again every few seconds.

The Kubernetes executor's pods are followed with the kubelet's log `follow` (what `kubectl logs -f`
does); the local executor's log file is tailed. A try may have several attempts (a deferral or a
reschedule resumes it in a new pod or process): each is sent in order, finished ones whole, the live
one as it grows. The stream ends with an `end` event once the try has finished and every attempt's
log has been sent; a browser that loses the connection reconnects and is sent the log from its start.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

from controller.kube import Kube, KubeError
from controller.operations import try_logs as task_logs
from controller.ui import tries
from controller.ui.app_state import KUBE, SECURITY_HEADERS, SETTINGS, STORE, require
from zonda.resources.wire import LABEL_TRY

#: States in which a try may still write to its log (a sensor between pokes, a deferred task).
LIVE_STATES = frozenset({"queued", "running", "deferred", "up_for_reschedule"})
POLL_SECONDS = 0.5
KEEP_ALIVE_SECONDS = 15.0
#: A follow is restarted this often, so a try's next attempt (after a deferral) is picked up.
FOLLOW_WINDOW_SECONDS = 30.0


def sse(data: str, event: str | None = None) -> bytes:
    """One Server-Sent Event; each line of `data` its own `data:` field, so the browser's joined
    `event.data` is `data` exactly (a CR is a line break to SSE: normalised to LF first)."""
    text = data.replace("\r\n", "\n").replace("\r", "\n")
    fields = "".join(f"data: {line}\n" for line in text.split("\n"))
    return ((f"event: {event}\n" if event else "") + fields + "\n").encode()


def try_is_live(run: Mapping[str, Any], task_id: str, try_number: int) -> bool:
    """Whether try `try_number` of the task instance may still write to its log (pure)."""
    ti = ((run.get("status") or {}).get("taskInstances") or {}).get(task_id) or {}
    return int(ti.get("tryNumber") or 0) == try_number and ti.get("state") in LIVE_STATES


@dataclass(frozen=True)
class Attempt:
    key: str  # "pod/NAME" or the log file's path
    finished: bool
    pod: str | None = None
    path: Path | None = None


async def try_attempts(
    kube: Kube, run: Mapping[str, Any], task_id: str, try_number: int, state_dir: Path | None
) -> list[Attempt]:
    """The attempts of one try on record, oldest first: the local executor's, else its pods."""
    found = [
        Attempt(str(directory / "log"), finished=(directory / "exit_code").exists(), path=directory / "log")
        for number, directory in tries.local_attempt_dirs(state_dir, run["metadata"]["uid"], task_id)
        if number == try_number
    ]
    if found:
        return found
    return [
        Attempt(
            key=f"pod/{pod['metadata']['name']}",
            finished=(pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"),
            pod=pod["metadata"]["name"],
        )
        for pod in await tries.task_pods(kube, run, task_id)
        if int((pod["metadata"].get("labels") or {}).get(LABEL_TRY, "0")) == try_number
    ]


class LogStream:
    """Sends each attempt's text once, in order: `sent` remembers how much of each went out."""

    def __init__(self, response: web.StreamResponse, kube: Kube, namespace: str) -> None:
        self.response, self.kube, self.namespace = response, kube, namespace
        self.sent: dict[str, int] = {}
        self.complete: set[str] = set()  # finished pods read whole
        self.last_write = asyncio.get_running_loop().time()

    async def write(self, payload: bytes) -> None:
        await self.response.write(payload)
        self.last_write = asyncio.get_running_loop().time()

    async def send_from(self, key: str, text: str, position: int) -> None:
        """`text` starts at `position` of the attempt's log: send the part not sent yet."""
        skip = max(self.sent.get(key, 0) - position, 0)
        if skip < len(text):
            await self.write(sse(text[skip:]))
            self.sent[key] = position + len(text)

    async def send(self, attempt: Attempt) -> None:
        if attempt.path is not None:
            with contextlib.suppress(OSError):
                await self.send_from(attempt.key, attempt.path.read_text(errors="replace"), 0)
        elif attempt.pod is not None and attempt.finished:
            if attempt.key not in self.complete:  # what a follow missed at the end, then never again
                with contextlib.suppress(KubeError):
                    text = await self.kube.pod_logs(self.namespace, attempt.pod, container="base")
                    await self.send_from(attempt.key, text, 0)
                    self.complete.add(attempt.key)
        elif attempt.pod is not None:
            await self.follow(attempt)

    async def follow(self, attempt: Attempt) -> None:
        assert attempt.pod is not None
        position = 0
        with contextlib.suppress(KubeError, TimeoutError):  # not started yet, or the window is over
            async with asyncio.timeout(FOLLOW_WINDOW_SECONDS):
                async for chunk in self.kube.follow_pod_log(self.namespace, attempt.pod, container="base"):
                    await self.send_from(attempt.key, chunk, position)
                    position += len(chunk)


async def task_log_stream(request: web.Request) -> web.StreamResponse:
    """`/runs/NS/RUN/tasks/TASK/log/stream?try=N`: the try's log as Server-Sent Events."""
    namespace, name, task_id = (request.match_info[k] for k in ("namespace", "run", "task"))
    await require(request, "get", "dagruns", namespace)
    store, settings, kube = request.app[STORE], request.app[SETTINGS], request.app[KUBE]
    run = store.runs.get((namespace, name))
    if run is None:
        raise web.HTTPNotFound(text=f"DagRun {name} not found in namespace {namespace}")
    try_number = int(request.query.get("try", "1"))
    if not tries.local_attempt_dirs(settings.state_dir, run["metadata"]["uid"], task_id):
        await require(request, "get", "pods", namespace, "log")
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    )
    for key, value in SECURITY_HEADERS.items():
        response.headers[key] = value
    await response.prepare(request)
    stream = LogStream(response, kube, namespace)
    with contextlib.suppress(ConnectionResetError, asyncio.CancelledError):
        await stream.write(b": connected\n\n")
        while True:
            run = store.runs.get((namespace, name))
            if run is None:
                await stream.write(sse("the run was deleted", event="end"))
                break
            live = try_is_live(run, task_id, try_number)  # before reading: a finished try is read whole
            attempts = await try_attempts(kube, run, task_id, try_number, settings.state_dir)
            for attempt in attempts:
                await stream.send(attempt)
            if not live:
                note = "" if attempts else no_log_note(run, task_id, try_number)
                await stream.write(sse(note, event="end"))
                break
            loop = asyncio.get_running_loop()
            if loop.time() - stream.last_write > KEEP_ALIVE_SECONDS:
                await stream.write(b": keep-alive\n\n")
            await asyncio.sleep(POLL_SECONDS)
    return response


def no_log_note(run: Mapping[str, Any], task_id: str, try_number: int) -> str:
    """What the page shows for a finished try with no attempt on record, and why when known."""
    why = task_logs.deleted_pods_note(run)
    return f"no log for try {try_number} of {task_id}" + (f": {why}" if why else "")
