"""Graph questions the scheduling decision asks of a resolved DAG: relatives, leaves, priority weights."""

from __future__ import annotations

from zonda.dags import ResolvedDag
from zonda.models import WeightRule


def descendants(dag: ResolvedDag, task_id: str) -> set[str]:
    """Every task downstream of `task_id`, transitively (Airflow's `get_flat_relative_ids`)."""
    return _relatives(dag, task_id, upstream=False)


def ancestors(dag: ResolvedDag, task_id: str) -> set[str]:
    """Every task upstream of `task_id`, transitively."""
    return _relatives(dag, task_id, upstream=True)


def _relatives(dag: ResolvedDag, task_id: str, *, upstream: bool) -> set[str]:
    found: set[str] = set()
    pending = [task_id]
    while pending:
        task = dag.tasks[pending.pop()]
        for relative in task.upstream if upstream else task.downstream:
            if relative not in found and relative in dag.tasks:
                found.add(relative)
                pending.append(relative)
    return found


def leaves(dag: ResolvedDag) -> list[str]:
    """Tasks without downstream tasks: their states decide the run's (Airflow's `dag.leaves`)."""
    return [task_id for task_id, task in dag.tasks.items() if not task.downstream]


def priority_weights(dag: ResolvedDag) -> dict[str, int]:
    """Each task's effective priority weight, by its `weight_rule` (Airflow's `priority_weight_total`).

    downstream: its own weight plus the weights of every task downstream of it, so the tasks that
    unblock the most work go first; upstream: plus every task upstream; absolute: its own.
    """
    weights: dict[str, int] = {}
    for task_id, task in dag.tasks.items():
        if task.weight_rule is WeightRule.ABSOLUTE:
            relatives: set[str] = set()
        elif task.weight_rule is WeightRule.UPSTREAM:
            relatives = ancestors(dag, task_id)
        else:
            relatives = descendants(dag, task_id)
        weights[task_id] = task.priority_weight + sum(dag.tasks[r].priority_weight for r in relatives)
    return weights
