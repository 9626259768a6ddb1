"""A task instance's tries and their logs, wherever the executor wrote them: read by `zonda logs` and the
web UI alike.

The Kubernetes executor's log is its pod's; the local executor's is a file in the controller's state
dir, `<state dir>/<run uid>/<attempt>/log`. The state dir is looked for, in order, in an explicit
`--state-dir`, `$ZONDA_STATE_DIR`, the current kubeconfig context (`zonda up` records its own there),
and the default. A task that never ran is reported as such, not as a missing log.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from controller.kube import Kube, KubeError
from zonda.passes import history
from zonda.resources.models import DagRunState, DagSpec
from zonda.resources.wire import (
    ANNOTATION_TASK_ID,
    KUBECONFIG_STATE_DIR_EXTENSION,
    LABEL_DAGRUN_UID,
    LABEL_MAP_INDEX,
    LABEL_TRY,
)
from zonda.specs import mapping

STATE_DIR_EXTENSION = KUBECONFIG_STATE_DIR_EXTENSION
_RUN_STATES = frozenset(s.value for s in DagRunState)
NEVER_RAN = frozenset({"none", "scheduled", "skipped", "upstream_failed", "removed"})


@dataclass
class TryLogs:
    """The log parts of one try, oldest first (a deferred or rescheduled try has several attempts)."""

    parts: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)


def kubeconfig_state_dir(kubeconfig: str | None) -> Path | None:
    """The state dir the current kubeconfig context names, if any."""
    paths = (kubeconfig or os.environ.get("KUBECONFIG") or str(Path.home() / ".kube" / "config")).split(
        os.pathsep
    )
    for path in paths:
        try:
            config = yaml.safe_load(Path(path).read_text()) or {}
        except (OSError, yaml.YAMLError):
            continue
        current = config.get("current-context")
        for context in config.get("contexts") or []:
            if context.get("name") != current:
                continue
            for extension in (context.get("context") or {}).get("extensions") or []:
                if extension.get("name") == STATE_DIR_EXTENSION:
                    return Path((extension.get("extension") or {}).get("path", ""))
    return None


def state_dir_candidates(state_dir: Path | None, kubeconfig: str | None, default: Path) -> list[Path]:
    """Where the local executor's state dir may be, in the order they are tried, without repeats:
    `state_dir`, `$ZONDA_STATE_DIR`, the kubeconfig context's record, `default`."""
    found: list[Path] = []
    for candidate in (
        state_dir,
        Path(os.environ["ZONDA_STATE_DIR"]) if os.environ.get("ZONDA_STATE_DIR") else None,
        kubeconfig_state_dir(kubeconfig),
        default,
    ):
        if candidate is not None and candidate not in found:
            found.append(candidate)
    return found


def local_tries(run_dir: Path, key: str) -> dict[int, TryLogs]:
    """The local executor's logs of a task instance (`key`: its task id, ``task[i]`` when mapped) in
    one run's directory, by try number."""
    task_id, map_index = mapping.split_key(key)
    tries: dict[int, TryLogs] = {}
    for record in sorted(run_dir.glob("*/attempt.json"), key=lambda p: p.stat().st_mtime):
        attempt = json.loads(record.read_text())
        if attempt["task_id"] != task_id or attempt.get("map_index", -1) != map_index:
            continue
        log_file = record.parent / "log"
        found = tries.setdefault(int(attempt["try_number"]), TryLogs())
        found.parts.append(log_file.read_text(errors="replace") if log_file.exists() else "")
        found.sources.append(str(log_file))
    return tries


async def pod_tries(kube: Kube, namespace: str, run_uid: str, key: str) -> dict[int, TryLogs]:
    """The Kubernetes executor's logs of a task instance (`key`, as for `local_tries`): its pods'
    `base` containers, by try number."""
    task_id, map_index = mapping.split_key(key)
    tries: dict[int, TryLogs] = {}
    pods = [
        p
        for p in await kube.list_pods(namespace, f"{LABEL_DAGRUN_UID}={run_uid}")
        if (p["metadata"].get("annotations") or {}).get(ANNOTATION_TASK_ID) == task_id
        and (p["metadata"].get("labels") or {}).get(LABEL_MAP_INDEX, "-1") == str(map_index)
    ]
    for pod in sorted(pods, key=lambda p: p["metadata"]["creationTimestamp"]):
        name = pod["metadata"]["name"]
        found = tries.setdefault(int(pod["metadata"]["labels"].get(LABEL_TRY, "0")), TryLogs())
        try:
            found.parts.append(await kube.pod_logs(namespace, name, container="base"))
        except KubeError as exc:
            found.parts.append(f"(no log for pod {name}: {exc.reason})\n")
        found.sources.append(f"pod/{name}")
    return tries


def deleted_pods_note(run: Mapping[str, Any]) -> str | None:
    """Why a try of this run may have no pod left (its DAG's `deleteWorkerPods`), else None."""
    status = run.get("status") or {}
    try:
        spec = DagSpec.model_validate(status.get("dagSpec") or {})
    except ValidationError:  # not started (no snapshot): nothing was deleted
        return None
    state = status.get("state")
    return history.deleted_pod_note(spec, DagRunState(state) if state in _RUN_STATES else None)


def never_ran_message(run_name: str, task_id: str, ti: dict[str, Any] | None) -> str | None:
    """Why a task instance has no log at all because it never ran (None when it did run)."""
    if ti is None:
        return (
            f"task {task_id!r} of {run_name} has not run yet (no task instance: the run has not reached it)"
        )
    state = ti.get("state") or "none"
    if (ti.get("tryNumber") or 0) == 0 and state in NEVER_RAN:
        reason = f": {ti['reason']}" if ti.get("reason") else ""
        return f"task {task_id!r} of {run_name} never ran (state {state}{reason})"
    return None
