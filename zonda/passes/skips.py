"""Which task instances a branch's decision binds: Airflow's `SkipMixin` and `NotPreviouslySkippedDep`
per map index.

A branch (`@task.branch`, `BranchPythonOperator`, `BaseBranchOperator`), a `ShortCircuitOperator` or a
`LatestOnlyOperator` decides for the task instances with its own map index (Airflow 2's
`skip_all_except` skips ``dag_run.get_task_instance(task_id, map_index=ti.map_index)``). Inside a
mapped task group, index 0 choosing ``a`` and index 1 choosing ``b`` skips ``b[0]`` and ``a[1]``
only. An unmapped decider (``map_index=-1``) decides for every instance of its downstream tasks; a
mapped one never skips an unmapped task (that task has no instance at its index: its trigger rule
decides). A cleared task instance, or one a mapped task's expansion adds after its mapped branch
decided, is skipped while the decision of its parent's same-index instance stands (or of the
unmapped parent).

Purely computational: task instances are given as their keys (`zonda.specs.mapping.ti_key`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable

from zonda.specs import mapping


def instances_to_skip(
    decider_key: str, task_ids: Iterable[str], instances: Callable[[str], list[str]]
) -> list[str]:
    """The instances of `task_ids` the decision of task instance `decider_key` skips.

    `instances` gives a task's instance keys (an unexpanded mapped task: its own id only).
    """
    index = mapping.split_key(decider_key)[1]
    keys = [key for task_id in task_ids for key in instances(task_id)]
    if index < 0:
        return keys
    return [key for key in keys if mapping.split_key(key)[1] == index]


def deciding_instance(upstream_id: str, key: str, known: Collection[str]) -> str | None:
    """The instance of the direct upstream `upstream_id` whose decision binds task instance `key`:
    the one with the same map index, else the upstream's unmapped instance (None: neither exists)."""
    index = mapping.split_key(key)[1]
    if index >= 0 and (same := mapping.ti_key(upstream_id, index)) in known:
        return same
    return upstream_id if upstream_id in known else None
