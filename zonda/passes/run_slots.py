"""What one run holds and waits for in pools and concurrency limits (`zonda.passes.pools`), from its status.

The run reconciler feeds `zonda.passes.pools.admit` with these for every run it serves: the run being
decided from its fresh working copy, the others from the controller's index of their statuses.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from zonda.passes.pools import Candidate, SlotHolder
from zonda.resources.models import TaskInstanceState
from zonda.resources.pool_models import pool_resource_name
from zonda.specs import mapping
from zonda.specs.dags import ResolvedDag, effective_priority_weights, task_instance_weight

S = TaskInstanceState
#: A deferred task instance holds its slot only in a pool with `includeDeferred`.
_HOLDING_STATES = frozenset({S.QUEUED, S.RUNNING, S.DEFERRED})


def holders(dag: ResolvedDag, run: str, states: Mapping[str, TaskInstanceState]) -> tuple[SlotHolder, ...]:
    """The run's task instances (by key: ``task`` or a mapped ``task[i]``) queued, running or deferred."""
    return tuple(
        SlotHolder(
            run=run,
            dag=dag.name,
            task_id=key,
            pool=pool_resource_name(task.pool),
            slots=task.pool_slots,
            state=state,
        )
        for key, state in states.items()
        if state in _HOLDING_STATES and (task := dag.tasks.get(mapping.split_key(key)[0])) is not None
    )


def candidates(
    dag: ResolvedDag,
    run: str,
    states: Mapping[str, TaskInstanceState],
    logical_date: datetime | None,
    weights: Mapping[str, int] | None = None,
    max_tries: Mapping[str, int | None] | None = None,
) -> tuple[Candidate, ...]:
    """The run's scheduled task instances: ready, waiting to be queued (`max_tries` by key: what a
    custom weight strategy's try number comes from)."""
    ready = [
        key
        for key, state in states.items()
        if state is S.SCHEDULED and mapping.split_key(key)[0] in dag.tasks
    ]
    if not ready:
        return ()
    weights = weights if weights is not None else effective_priority_weights(dag)
    tries = max_tries or {}
    return tuple(candidate(dag, run, key, logical_date, weights, tries.get(key)) for key in ready)


def candidate(
    dag: ResolvedDag,
    run: str,
    key: str,
    logical_date: datetime | None,
    weights: Mapping[str, int],
    max_tries: int | None = None,
) -> Candidate:
    """The scheduled task instance `key` (``task`` or a mapped ``task[i]``) as admission sees it."""
    task_id = mapping.split_key(key)[0]
    task = dag.tasks[task_id]
    return Candidate(
        run=run,
        dag=dag.name,
        task_id=key,
        pool=pool_resource_name(task.pool),
        slots=task.pool_slots,
        weight=task_instance_weight(dag, key, run, weights, max_tries),
        logical_date=logical_date,
        max_active_tasks=dag.spec.max_active_tasks,
        max_active_tis_per_dag=task.max_active_tis_per_dag,
        max_active_tis_per_dagrun=task.max_active_tis_per_dagrun,
    )
