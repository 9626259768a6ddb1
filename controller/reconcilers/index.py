"""An in-memory index of DagRuns, fed by kopf's watch: the cross-run questions a reconcile asks.

dependsOnPast needs the previous run's task states, maxActiveTasks the task instances running in the
DAG's other runs, templates the previous successful run's interval: reading every run of the DAG from
the API on every pass would cost a list per task-instance change.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from zonda.models import DagRunState, TaskInstanceState
from zonda.wire import parse_time


@dataclass
class RunSummary:
    """What the controller remembers of each DagRun from its watch."""

    dag_name: str
    logical_date: datetime | None
    state: str | None
    data_interval: tuple[datetime, datetime] | None
    running_tasks: int
    ti_states: dict[str, str]


@dataclass
class RunIndex:
    """DagRuns by (namespace, name)."""

    runs: dict[tuple[str, str], RunSummary] = field(default_factory=dict)

    def update(self, body: Mapping[str, Any]) -> RunSummary | None:
        """Record the run's latest body; returns what was known of it before (None: new)."""
        meta = body["metadata"]
        key = (meta["namespace"], meta["name"])
        status = body.get("status") or {}
        spec = body.get("spec") or {}
        tis = status.get("taskInstances") or {}
        start, end = parse_time(status.get("dataIntervalStart")), parse_time(status.get("dataIntervalEnd"))
        summary = RunSummary(
            dag_name=spec.get("dagName", ""),
            logical_date=parse_time(status.get("logicalDate")),
            state=status.get("state"),
            data_interval=(start, end) if start and end else None,
            running_tasks=sum(1 for ti in tis.values() if ti.get("state") in ("queued", "running")),
            ti_states={tid: ti.get("state", "none") for tid, ti in tis.items()},
        )
        previous = self.runs.get(key)
        self.runs[key] = summary
        return previous

    def remove(self, namespace: str, name: str) -> None:
        self.runs.pop((namespace, name), None)

    def of_dag(self, namespace: str, dag_name: str) -> dict[str, RunSummary]:
        return {name: s for (ns, name), s in self.runs.items() if ns == namespace and s.dag_name == dag_name}

    def siblings(self, namespace: str, dag_name: str, run_name: str) -> dict[str, RunSummary]:
        """The DAG's other runs."""
        runs = self.of_dag(namespace, dag_name)
        runs.pop(run_name, None)
        return runs


def previous_states(
    siblings: Mapping[str, RunSummary], logical_date: datetime | None
) -> dict[str, TaskInstanceState] | None:
    """The task states of the run just before `logical_date` (dependsOnPast); None for the first run."""
    earlier = [s for s in siblings.values() if _before(s, logical_date)]
    if not earlier:
        return None
    previous = max(earlier, key=_logical_date)
    return {tid: TaskInstanceState(state) for tid, state in previous.ti_states.items()}


def previous_success(
    siblings: Mapping[str, RunSummary], logical_date: datetime | None
) -> tuple[datetime, datetime] | None:
    """The data interval of the latest successful run before `logical_date` (`prev_*_success` templates)."""
    done = [
        s
        for s in siblings.values()
        if s.state == DagRunState.SUCCESS.value and s.data_interval and _before(s, logical_date)
    ]
    return max(done, key=_logical_date).data_interval if done else None


def _before(summary: RunSummary, logical_date: datetime | None) -> bool:
    return (
        logical_date is not None and summary.logical_date is not None and summary.logical_date < logical_date
    )


def _logical_date(summary: RunSummary) -> datetime:
    assert summary.logical_date is not None
    return summary.logical_date
