"""Graph questions the scheduling decision asks of a resolved DAG: relatives and leaves.

Priority weights are `zonda.dags.effective_priority_weights` (one definition).
"""

from __future__ import annotations

from zonda.dags import ResolvedDag


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
