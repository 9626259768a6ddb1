"""Run history: which finished runs a DAG deletes (Kubernetes CronJob's history limits) and which
finished task pods a run deletes (Airflow's `delete_worker_pods`), pure.

Airflow keeps every run until `airflow db clean`; on Kubernetes each run is an object in etcd with
pods owned by it, so a DAG may bound them. As for a CronJob's Jobs, runs are ordered by creation: the
newest `limit` runs in each finished state are kept, unfinished runs always.

Airflow's KubernetesExecutor deletes a worker pod when its task ends (`delete_worker_pods`, on by
default) and keeps failed ones for debugging (`delete_worker_pods_on_failure`, off). Zonda has no
log store beyond the pod, so it keeps every pod unless the DAG asks, and deletes only once the whole
run has finished: while it runs, `zonda logs` and the UI still read every try.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from zonda.passes.decisions import AttemptPhase, ObservedAttempt
from zonda.resources.models import DagRunState, DagSpec
from zonda.resources.states import FINISHED_RUN_STATES
from zonda.schedules.dag_plans import RunRef


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


def worker_pods_to_delete(
    spec: DagSpec, run_state: DagRunState | None, attempts: Mapping[str, ObservedAttempt]
) -> list[str]:
    """Attempt names of a run's finished pods to delete: none until the run has finished; then the
    succeeded ones when `deleteWorkerPods`, and the failed ones too with `deleteWorkerPodsOnFailure`.
    Pods still pending or running are left to `decide`, which stops strays of a finished run."""
    if not spec.delete_worker_pods or run_state not in FINISHED_RUN_STATES:
        return []
    phases = {AttemptPhase.SUCCEEDED}
    if spec.delete_worker_pods_on_failure:
        phases.add(AttemptPhase.FAILED)
    return sorted(name for name, attempt in attempts.items() if attempt.phase in phases)


def deleted_pod_note(spec: DagSpec, run_state: DagRunState | None) -> str | None:
    """Why a try of a finished run may have no pod (and so no log) left, for `zonda logs` and the UI."""
    if not spec.delete_worker_pods or run_state not in FINISHED_RUN_STATES:
        return None
    which = "its pods" if spec.delete_worker_pods_on_failure else "its succeeded pods (failed ones are kept)"
    return f"the run has finished and its DAG deletes {which} with their logs (deleteWorkerPods)"
