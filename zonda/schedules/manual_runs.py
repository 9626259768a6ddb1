"""The manual DagRun a user triggers (`zonda dags trigger`, the UI's trigger button), in each dialect.

An Airflow 2 DAG's manual run is at a logical date: the one given, else the moment of the request (2.10's
`dags trigger`). An Airflow 3 DAG's has none unless given (3.1's `TriggerDAGRunPostBody` and
`trigger_dag._trigger_dag`) and is due at the request's moment, its `run_after`. Either way the object's
name is computed once per request from that moment (`scheduling.dagrun_name`), so a retried create of
the same request is an AlreadyExists, never a second run; the controller then starts it
(`zonda.passes.plans.run_dates`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from zonda.resources.dagrun_models import manual_dagrun
from zonda.resources.models import JsonObject
from zonda.resources.run_types import RunType
from zonda.schedules.scheduling import dagrun_name


@dataclass(frozen=True)
class ManualRun:
    """The run to create: its name, body, and the logical date it has (None: an Airflow 3 run without)."""

    name: str
    body: JsonObject
    logical_date: datetime | None
    run_after: datetime

    def describe(self) -> str:
        """How the CLI names it in a refusal: `at <logical date>`, or `due <run_after>` without one."""
        if self.logical_date is not None:
            return f"at {self.logical_date.isoformat()}"
        return f"due {self.run_after.isoformat()} (no logical date)"


def manual_run(
    dag_name: str,
    dag_spec: Mapping[str, Any],
    namespace: str,
    *,
    logical_date: datetime | None,
    conf: JsonObject,
    now: datetime,
) -> ManualRun:
    """The manual run of `dag_name` (its stored `spec`) requested at `now`, at `logical_date` if given."""
    airflow3 = dag_spec.get("airflowVersion") == "3"
    when = logical_date if logical_date is not None else (None if airflow3 else now)
    name = dagrun_name(dag_name, when or now, RunType.MANUAL)
    body = manual_dagrun(name, namespace, dag_name, when, conf, run_after=now if airflow3 else None)
    return ManualRun(name=name, body=body, logical_date=when, run_after=now)
