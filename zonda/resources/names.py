"""Deterministic Kubernetes names for the objects the controller creates.

The same inputs always give the same name, so a restarted (or a second) controller that creates an
object again gets 409 AlreadyExists instead of a duplicate: names are how "exactly once" is kept.
"""

from __future__ import annotations

import hashlib
import re

_INVALID = re.compile(r"[^a-z0-9-]+")
_DAG_NAME_INVALID = re.compile(r"[^a-z0-9.-]+")


def _slug(text: str, limit: int) -> str:
    slug = _INVALID.sub("-", text.lower()).strip("-")
    return slug[:limit].strip("-") or "x"


def _digest(*parts: object, length: int = 6) -> str:
    return hashlib.sha256("\x00".join(str(p) for p in parts).encode()).hexdigest()[:length]


_MAPPED = re.compile(r"^(?P<task_id>.+)\[(?P<index>\d+)\]$")


def _task_slug(task_id: str) -> str:
    """20 characters of the task id; a mapped instance's key (``task[12]``) keeps its index: ``task-12``."""
    match = _MAPPED.match(task_id)
    if match is None:
        return _slug(task_id, 20)
    index = match["index"]
    return f"{_slug(match['task_id'], 19 - len(index))}-{index}"


def attempt_name(run_name: str, task_id: str, try_number: int) -> str:
    """Pod (or local process) name of one task-instance try: `run-task-try-hash`, a DNS-1123 label.

    The hash keeps names unique when slugging/truncation makes two task ids look alike.
    """
    digest = _digest(run_name, task_id, try_number)
    return f"{_slug(run_name, 28)}-{_task_slug(task_id)}-{try_number}-{digest}"


def trigger_name(run_name: str, task_id: str, try_number: int, deferral_count: int) -> str:
    """Trigger resource name, one per task-instance try and deferral."""
    digest = _digest(run_name, task_id, try_number, deferral_count)
    return f"{_slug(run_name, 28)}-{_task_slug(task_id)}-{try_number}-d{deferral_count}-{digest}"


#: How a callback try's name ends; an attempt name ends `-<try>-<6 hex>`, so the two never collide.
CALLBACK_NAME_SUFFIX = re.compile(r"-cb[0-9a-f]{8}$")


def callback_name(run_name: str, kind: str, key: str) -> str:
    """Pod (or local process) name of the callback try the controller launches (`zonda.passes.callbacks`)."""
    return f"{_slug(run_name, 28)}-{_slug(kind, 20)}-cb{_digest(run_name, kind, key, length=8)}"


def is_callback_name(name: str) -> bool:
    return CALLBACK_NAME_SUFFIX.search(name) is not None


def dag_resource_name(dag_id: str) -> str:
    """The DAG resource's name for an Airflow dag_id: lower-cased, `_` and other characters as `-`.

    Raises ValueError when nothing usable is left, or the name is longer than the API allows.
    """
    name = _DAG_NAME_INVALID.sub("-", dag_id.lower()).strip("-.")
    if not name or len(name) > 253:
        raise ValueError(f"dag id {dag_id!r} cannot be turned into a Kubernetes name")
    return name


def triggered_run_name(dag_name: str, parent_run: str, task_id: str, map_index: int = -1) -> str:
    """The DagRun a `TriggerDagRunOperator` task instance creates: one per parent run, task and map index.

    A retry (or a clear) of the task computes the same name, so it finds the run it created before
    instead of creating a second one. ≤ 63 characters, so it also fits a label value.
    """
    digest = _digest(dag_name, parent_run, task_id, map_index, length=10)
    return f"{_slug(dag_name, 24)}-triggered-{_slug(parent_run, 16)}-{digest}"
