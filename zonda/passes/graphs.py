"""Graph questions the scheduling decision asks of a resolved DAG: relatives and leaves.

Priority weights are `zonda.specs.dags.effective_priority_weights` (one definition).
"""

from __future__ import annotations

from zonda.specs.dags import ResolvedDag


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
    """The tasks whose states decide the run's: Airflow's effective leaves (`_tis_for_dagrun_state`).

    A leaf has no downstream but teardowns; a teardown is ignored unless `on_failure_fail_dagrun`
    (so a failing cleanup does not fail the work). A DAG of teardowns only falls back to plain leaves.
    """

    def ignorable(task_id: str) -> bool:
        task = dag.tasks[task_id]
        return task.is_teardown and not task.on_failure_fail_dagrun

    effective = [
        task_id
        for task_id, task in dag.tasks.items()
        if all(ignorable(down) for down in task.downstream if down in dag.tasks) and not ignorable(task_id)
    ]
    return effective or [task_id for task_id, task in dag.tasks.items() if not task.downstream]


def group_roots(dag: ResolvedDag, ids: list[str]) -> list[str]:
    """`ids` with each TaskGroup id replaced by the group's root tasks (Airflow's branch expansion).

    A branch callable may return a group's id; Airflow follows the group's roots (its tasks with no
    upstream inside the group, nested groups included). Ids naming neither stay, to be reported.
    """
    expanded: list[str] = []
    for name in ids:
        members = set() if name in dag.tasks else _group_members(dag, name)
        if not members:
            expanded.append(name)
            continue
        expanded += [t for t in dag.tasks if t in members and not dag.tasks[t].upstream & members]
    return list(dict.fromkeys(expanded))


def _group_members(dag: ResolvedDag, group_id: str) -> set[str]:
    return {
        task_id
        for task_id, task in dag.tasks.items()
        if task.group is not None and (task.group == group_id or task.group.startswith(group_id + "."))
    }
