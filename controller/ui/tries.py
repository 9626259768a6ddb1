"""A task instance's tries and their logs, from where the executor left them.

The Kubernetes executor runs each attempt as a Pod labelled with the run's uid and the try number
(the task id is an annotation: labels cannot hold every id); the local executor writes an attempt
directory per attempt under its state dir (`<run uid>/<attempt>/attempt.json` and `log`). A try that
deferred or rescheduled has several attempts: they are listed, and their logs joined, in order.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from controller.kube import Kube, KubeError
from controller.operations import try_logs as task_logs
from zonda.resources.wire import ANNOTATION_TASK_ID, LABEL_DAGRUN_UID, LABEL_TRY


@dataclass(frozen=True)
class Attempt:
    task_id: str
    try_number: int
    where: str  # "pod NAME" or "process in DIR"
    phase: str
    started: str | None
    finished: str | None
    exit_reason: str


def local_attempt_dirs(state_dir: Path | None, run_uid: str, task_id: str) -> list[tuple[int, Path]]:
    return [
        (number, directory) for t, number, directory in _local_attempts(state_dir, run_uid) if t == task_id
    ]


def _local_attempts(state_dir: Path | None, run_uid: str) -> list[tuple[str, int, Path]]:
    """(task id, try number, directory) of every local attempt of a run, oldest first."""
    run_dir = state_dir / run_uid if state_dir else None
    if run_dir is None or not run_dir.is_dir():
        return []
    found = []
    for record in sorted(run_dir.glob("*/attempt.json"), key=lambda p: p.stat().st_mtime):
        attempt = json.loads(record.read_text())
        found.append((str(attempt.get("task_id")), int(attempt.get("try_number") or 0), record.parent))
    return found


def _read(path: Path) -> str | None:
    return path.read_text().strip() if path.exists() else None


async def _run_pods(kube: Kube, run: Mapping[str, Any]) -> list[dict[str, Any]]:
    meta = run["metadata"]
    try:
        pods = await kube.list_pods(meta["namespace"], f"{LABEL_DAGRUN_UID}={meta['uid']}")
    except KubeError:
        return []
    return sorted(pods, key=lambda p: p["metadata"].get("creationTimestamp", ""))


def _pod_task(pod: Mapping[str, Any]) -> str:
    return str((pod["metadata"].get("annotations") or {}).get(ANNOTATION_TASK_ID, ""))


async def task_pods(kube: Kube, run: Mapping[str, Any], task_id: str) -> list[dict[str, Any]]:
    return [pod for pod in await _run_pods(kube, run) if _pod_task(pod) == task_id]


async def attempts(
    kube: Kube, run: Mapping[str, Any], task_id: str, state_dir: Path | None, *, pods: bool = True
) -> list[Attempt]:
    """Every attempt of the task instance still on record (pods are gone once the run is deleted).

    `pods=False` leaves the Kubernetes executor's pods out (for a viewer who may not list pods).
    """
    return (await run_attempts(kube, run, state_dir, pods=pods)).get(task_id, [])


async def run_attempts(
    kube: Kube, run: Mapping[str, Any], state_dir: Path | None, *, pods: bool = True
) -> dict[str, list[Attempt]]:
    """Every attempt of every task instance of the run on record, by task id, by try number."""
    found: list[Attempt] = []
    for task_id, number, directory in _local_attempts(state_dir, run["metadata"]["uid"]):
        code = _read(directory / "exit_code")
        found.append(
            Attempt(
                task_id=task_id,
                try_number=number,
                where=f"process in {directory}",
                phase="running" if code is None else ("succeeded" if code == "0" else "failed"),
                started=_read(directory / "started_at"),
                finished=_read(directory / "finished_at"),
                exit_reason="" if code is None else f"exit code {code}",
            )
        )
    for pod in await _run_pods(kube, run) if pods else []:
        status = pod.get("status") or {}
        terminated: dict[str, Any] = {}
        for container in status.get("containerStatuses") or []:
            terminated = (container.get("state") or {}).get("terminated") or terminated
        reason = terminated.get("reason") or ""
        if terminated.get("exitCode") is not None:
            reason = f"{reason} (exit code {terminated['exitCode']})".strip()
        found.append(
            Attempt(
                task_id=_pod_task(pod),
                try_number=int(pod["metadata"].get("labels", {}).get(LABEL_TRY, "0")),
                where=f"pod {pod['metadata']['name']}",
                phase=str(status.get("phase") or "Pending"),
                started=terminated.get("startedAt") or status.get("startTime"),
                finished=terminated.get("finishedAt"),
                exit_reason=reason or str(status.get("reason") or ""),
            )
        )
    by_task: dict[str, list[Attempt]] = {}
    for attempt in sorted(found, key=lambda a: a.try_number):
        by_task.setdefault(attempt.task_id, []).append(attempt)
    return by_task


async def try_log(
    kube: Kube, run: Mapping[str, Any], task_id: str, try_number: int, state_dir: Path | None
) -> str | None:
    """The log of one try (every attempt of it, in order); None when no attempt of it is on record.

    Read as `zonda logs` reads it (`controller.cli.logs`): the local executor's files, else the pods'.
    """
    uid = run["metadata"]["uid"]
    if state_dir is not None:
        local = task_logs.local_tries(state_dir / uid, task_id).get(try_number)
        if local is not None:
            return "".join(local.parts)
    try:
        found = (await task_logs.pod_tries(kube, run["metadata"]["namespace"], uid, task_id)).get(try_number)
    except KubeError:
        return None
    return "".join(found.parts) if found is not None else None
