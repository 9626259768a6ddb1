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

from controller.cli import logs as task_logs
from controller.kube import Kube, KubeError
from zonda.wire import ANNOTATION_TASK_ID, LABEL_DAGRUN_UID, LABEL_TRY


@dataclass(frozen=True)
class Attempt:
    try_number: int
    where: str  # "pod NAME" or "process in DIR"
    phase: str
    started: str | None
    finished: str | None
    exit_reason: str


def local_attempt_dirs(state_dir: Path | None, run_uid: str, task_id: str) -> list[tuple[int, Path]]:
    run_dir = state_dir / run_uid if state_dir else None
    if run_dir is None or not run_dir.is_dir():
        return []
    found = []
    for record in sorted(run_dir.glob("*/attempt.json"), key=lambda p: p.stat().st_mtime):
        attempt = json.loads(record.read_text())
        if attempt.get("task_id") == task_id:
            found.append((int(attempt.get("try_number") or 0), record.parent))
    return found


def _read(path: Path) -> str | None:
    return path.read_text().strip() if path.exists() else None


async def _task_pods(kube: Kube, run: Mapping[str, Any], task_id: str) -> list[dict[str, Any]]:
    meta = run["metadata"]
    try:
        pods = await kube.list_pods(meta["namespace"], f"{LABEL_DAGRUN_UID}={meta['uid']}")
    except KubeError:
        return []
    mine = [p for p in pods if (p["metadata"].get("annotations") or {}).get(ANNOTATION_TASK_ID) == task_id]
    return sorted(mine, key=lambda p: p["metadata"].get("creationTimestamp", ""))


async def attempts(
    kube: Kube, run: Mapping[str, Any], task_id: str, state_dir: Path | None, *, pods: bool = True
) -> list[Attempt]:
    """Every attempt of the task instance still on record (pods are gone once the run is deleted).

    `pods=False` leaves the Kubernetes executor's pods out (for a viewer who may not list pods).
    """
    found: list[Attempt] = []
    for number, directory in local_attempt_dirs(state_dir, run["metadata"]["uid"], task_id):
        code = _read(directory / "exit_code")
        found.append(
            Attempt(
                try_number=number,
                where=f"process in {directory}",
                phase="running" if code is None else ("succeeded" if code == "0" else "failed"),
                started=_read(directory / "started_at"),
                finished=_read(directory / "finished_at"),
                exit_reason="" if code is None else f"exit code {code}",
            )
        )
    for pod in await _task_pods(kube, run, task_id) if pods else []:
        status = pod.get("status") or {}
        terminated: dict[str, Any] = {}
        for container in status.get("containerStatuses") or []:
            terminated = (container.get("state") or {}).get("terminated") or terminated
        reason = terminated.get("reason") or ""
        if terminated.get("exitCode") is not None:
            reason = f"{reason} (exit code {terminated['exitCode']})".strip()
        found.append(
            Attempt(
                try_number=int(pod["metadata"].get("labels", {}).get(LABEL_TRY, "0")),
                where=f"pod {pod['metadata']['name']}",
                phase=str(status.get("phase") or "Pending"),
                started=terminated.get("startedAt") or status.get("startTime"),
                finished=terminated.get("finishedAt"),
                exit_reason=reason or str(status.get("reason") or ""),
            )
        )
    return sorted(found, key=lambda a: a.try_number)


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
