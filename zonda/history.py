"""Run history limits (Kubernetes CronJob's `successfulJobsHistoryLimit`/`failedJobsHistoryLimit`
on a DAG): which finished runs to delete, pure.

Airflow keeps every run until `airflow db clean`; on Kubernetes each run is an object in etcd with
pods owned by it, so a DAG may bound them. As for a CronJob's Jobs, runs are ordered by creation: the
newest `limit` runs in each finished state are kept, unfinished runs always.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from zonda.models import DagRunState, DagSpec
from zonda.plans import RunRef


def _newest_first(run: RunRef) -> tuple[datetime, str]:
    return (run.created_at, run.name)


def runs_beyond_history_limits(spec: DagSpec, runs: Sequence[RunRef]) -> list[str]:
    """Names of the finished runs past the DAG's history limits (none when the limits are unset)."""
    doomed: list[str] = []
    for state, limit in (
        (DagRunState.SUCCESS, spec.successful_runs_history_limit),
        (DagRunState.FAILED, spec.failed_runs_history_limit),
    ):
        if limit is None:
            continue
        finished = sorted((r for r in runs if r.state == state), key=_newest_first, reverse=True)
        doomed.extend(run.name for run in finished[limit:])
    return sorted(doomed)
