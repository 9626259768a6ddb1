"""Callbacks of tests/cluster/test_callbacks.py: each call leaves one evidence file the test counts.

The files go to `$ZONDA_CALLBACK_EVIDENCE` (the controller's environment, which the local executor
passes to every try), one per call, so a callback run twice leaves two files.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

EVIDENCE_ENV = "ZONDA_CALLBACK_EVIDENCE"


def _write(kind: str, payload: dict[str, Any]) -> None:
    folder = Path(os.environ[EVIDENCE_ENV])
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{kind}-{uuid.uuid4().hex}.json").write_text(json.dumps(payload, default=str))


def _task(kind: str, context: Any) -> None:
    ti = context["ti"]
    exception = context.get("exception")
    _write(
        kind,
        {
            "task_id": ti.task_id,
            "try_number": ti.try_number,
            "run_id": context["run_id"],
            "exception": None if exception is None else str(exception),
            "pid": os.getpid(),
        },
    )


def on_execute(context: Any) -> None:
    _task("execute", context)


def on_success(context: Any) -> None:
    _task("success", context)


def on_failure(context: Any) -> None:
    _task("failure", context)


def on_retry(context: Any) -> None:
    _task("retry", context)


def on_skipped(context: Any) -> None:
    _task("skipped", context)


def on_dag_failure(context: Any) -> None:
    _write(
        "dag_failure",
        {"reason": context["reason"], "run_id": context["run_id"], "task_id": context["ti"].task_id},
    )


def on_dag_success(context: Any) -> None:
    _write("dag_success", {"reason": context["reason"], "run_id": context["run_id"]})


def on_sla_miss(
    dag: Any, task_list: str, blocking_task_list: str, slas: list[Any], blocking_tis: list[Any]
) -> None:
    _write(
        "sla_miss",
        {
            "dag_id": dag.dag_id,
            "task_list": task_list,
            "blocking_task_list": blocking_task_list,
            "slas": [sla.task_id for sla in slas],
            "blocking_tis": [ti.task_id for ti in blocking_tis],
        },
    )
