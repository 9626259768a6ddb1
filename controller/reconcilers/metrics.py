"""Prometheus metrics the reconcilers record (served by the controller process; the triggerer has its own)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from prometheus_client import Counter, Gauge, Histogram

from zonda.resources.dagrun_models import DagRunStatus

DAG_RUNS = Gauge("zonda_dag_runs", "DagRuns by state, as last reconciled", ["namespace", "state"])
TASK_INSTANCES = Gauge("zonda_task_instances", "Task instances by state", ["namespace", "state"])
SCHEDULING_DELAY = Histogram(
    "zonda_scheduling_delay_seconds",
    "run_after -> DagRun created, and upstream done -> downstream pod created",
    ["kind"],
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60),
)
PODS_CREATED = Counter("zonda_task_attempts_created_total", "Task pods (or local processes) started")
PODS_DELETED = Counter("zonda_task_attempts_deleted_total", "Task pods (or local processes) stopped")
API_ERRORS = Counter("zonda_api_errors_total", "Kubernetes API errors seen by the controller", ["kind"])
RECONCILES = Counter("zonda_reconciles_total", "Reconcile passes", ["kind"])
#: Passes that ended (raised or not): a restarted controller has looked at its objects once this moves,
#: which tests (and an operator after a rollout) wait for instead of sleeping.
RECONCILES_DONE = Counter("zonda_reconciles_done_total", "Reconcile passes that ended", ["kind"])
#: DAG passes that had their plan made ahead (`dag_plans.plan_ahead`): used, or no longer holding.
DAG_PLANS_AHEAD = Counter(
    "zonda_dag_plans_ahead_total", "DAG passes that found their plan made ahead, by outcome", ["outcome"]
)

_run_states: dict[tuple[str, str], tuple[str, dict[str, int]]] = {}


def record_run(run: Mapping[str, Any], status: DagRunStatus) -> None:
    """Keep the per-state gauges equal to the sum over the runs this controller has seen."""
    meta = run["metadata"]
    key = (meta["namespace"], meta["name"])
    counts: dict[str, int] = {}
    for ti in status.task_instances.values():
        counts[ti.state.value] = counts.get(ti.state.value, 0) + 1
    state = status.state.value if status.state else "queued"
    previous = _run_states.get(key)
    if previous is not None:
        DAG_RUNS.labels(meta["namespace"], previous[0]).dec()
        for ti_state, count in previous[1].items():
            TASK_INSTANCES.labels(meta["namespace"], ti_state).dec(count)
    DAG_RUNS.labels(meta["namespace"], state).inc()
    for ti_state, count in counts.items():
        TASK_INSTANCES.labels(meta["namespace"], ti_state).inc(count)
    _run_states[key] = (state, counts)


SLA_MISSES = Counter(
    "zonda_sla_misses_total", "Task SLA misses recorded (each task of a run once)", ["namespace", "dag"]
)
CALLBACKS_LAUNCHED = Counter(
    "zonda_callback_tries_launched_total",
    "Callback tries the controller launched (failures a task could not report, DAG callbacks, SLA misses)",
    ["kind"],
)

#: Airflow's pool gauges (`pool.open_slots`, `pool.running_slots`...), from each Pool's status.
POOL_SLOTS = Gauge(
    "zonda_pool_slots", "Slots of a Pool by kind, as its status last said", ["namespace", "pool", "kind"]
)
_POOL_FIELDS = {
    "total": "totalSlots",
    "open": "openSlots",
    "occupied": "occupiedSlots",
    "running": "runningSlots",
    "queued": "queuedSlots",
    "scheduled": "scheduledSlots",
    "deferred": "deferredSlots",
}


def record_pool(namespace: str, pool: str, status: Mapping[str, Any]) -> None:
    for kind, field in _POOL_FIELDS.items():
        POOL_SLOTS.labels(namespace, pool, kind).set(status.get(field, 0))
