"""What the task runner gets for one try (its `TaskInvocation`): the task, the run's context and its
upstream XComs, built from the resolved DAG and the run's status. One builder for the controller's
executors, `zonda dags test`, a clear across DAGs and the UI's rendered fields, so all see a try alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from zonda.resources.dagrun_models import DagRunSpec, DagRunStatus
from zonda.resources.invocations import MappedExpansion, TaskInvocation
from zonda.resources.models import DagSpec
from zonda.specs import mapped_groups, mapping
from zonda.specs.dags import ResolvedTask
from zonda.tries import xcoms


@dataclass(frozen=True)
class RunXComs:
    """What every try of one run's status may pull, and its mapped tasks' instance counts.

    Each a walk over all the run's task instances: a pass builds it once for all its launches
    (`RunXComs.of`), instead of once per try (100 launches of a 3,000-task run: 0.85 s a pass)."""

    returned: dict[str, Any]
    keyed: dict[str, dict[str, Any]]
    counts: dict[str, int]

    @classmethod
    def of(cls, status: DagRunStatus) -> RunXComs:
        returned, keyed = xcoms.upstream_xcoms(status.task_instances)
        return cls(returned, keyed, mapping.instance_counts(status.task_instances))


def task_invocation(
    *,
    run_name: str,
    spec: DagRunSpec,
    status: DagRunStatus,
    dag_spec: DagSpec,
    task: ResolvedTask,
    try_number: int,
    previous_success: tuple[datetime, datetime] | None = None,
    namespace: str | None = None,
    map_index: int = -1,
    run_uid: str | None = None,
    run_xcoms: RunXComs | None = None,
) -> TaskInvocation:
    """What the task runner gets for one try: the task, the run's context and its upstream XComs.

    One builder for the controller's executors and `zonda dags test`, so both run a task alike.
    `run_xcoms`: `RunXComs.of(status)`, when the caller builds several tries of one status.
    """
    ti = status.task_instances[mapping.ti_key(task.task_id, map_index)]
    shared = run_xcoms if run_xcoms is not None else RunXComs.of(status)
    returned, keyed, counts = dict(shared.returned), dict(shared.keyed), dict(shared.counts)
    if task.map_peers and map_index >= 0:  # a mapped group's task pulls its peers' same index
        returned, keyed = mapped_groups.per_index_xcoms(returned, keyed, task.map_peers, map_index)
        counts = {task_id: count for task_id, count in counts.items() if task_id not in task.map_peers}
    return TaskInvocation(
        dag_name=spec.dag_name,
        run_name=run_name,
        run_id=status.run_id,
        run_uid=run_uid,
        namespace=namespace,
        run_type=spec.run_type,
        task_id=task.task_id,
        map_index=map_index,
        expand=MappedExpansion.of(task.expand) if map_index >= 0 and task.expand is not None else None,
        mapped_counts=counts,
        try_number=try_number,
        max_tries=ti.max_tries or 0,
        operator=task.operator,
        args=dict(task.args),
        logical_date=status.logical_date,
        data_interval_start=status.data_interval_start,
        data_interval_end=status.data_interval_end,
        run_after=status.run_after,
        partition_key=spec.partition_key,
        partition_date=spec.partition_date,
        timezone=dag_spec.timezone,
        conf=dict(spec.conf),
        outlets=[o.model_dump(mode="json", by_alias=True, exclude_none=True) for o in task.outlets],
        triggering_asset_events=[e.to_wire() for e in spec.triggering_asset_events or ()],
        params=dict(dag_spec.params),
        user_defined_macros=dict(dag_spec.user_defined_macros),
        user_defined_filters=dict(dag_spec.user_defined_filters),
        render_template_as_native_obj=dag_spec.render_template_as_native_obj,
        template_files=dict(dag_spec.template_files),
        airflow_version=dag_spec.airflow_version,
        xcoms=returned,
        keyed_xcoms=keyed,
        prev_data_interval_start_success=previous_success[0] if previous_success else None,
        prev_data_interval_end_success=previous_success[1] if previous_success else None,
        first_try_start=ti.first_try_start,
        next_method=ti.next_method,
        next_kwargs=ti.next_kwargs,
        callbacks={kind: list(paths) for kind, paths in task.callbacks.items()},
        retry_policy=(
            task.retry_policy.model_dump(mode="json", by_alias=True)
            if task.retry_policy is not None
            else None
        ),
    )
