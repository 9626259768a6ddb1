"""The asset events a pass's successes produce: Airflow's `TaskInstance._register_asset_changes`.

A task instance this pass saw succeed, with outlets, produces one event per outlet asset and one per
asset its try added to an alias outlet (`zonda.schedules.assets.outlet_events`), each named from the
run, task, map index, try and asset (`asset_event_name`), so recording one twice is a 409, never a
second event. The pass decides them (`compose_pass`'s `PassPlan.asset_events`); the controller creates
them before the status that records the success (`controller.reconcilers.assets.record_events`), and
`zonda dags test` prints them, as Airflow's `dag.test()` records them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from zonda.resources.asset_models import AssetEventSpec, asset_event_name
from zonda.resources.dagrun_models import DagRunStatus
from zonda.resources.models import TaskInstanceState
from zonda.schedules import assets
from zonda.specs.dags import ResolvedDag
from zonda.specs.mapping import split_key


@dataclass(frozen=True)
class ProducedAssetEvent:
    name: str
    spec: AssetEventSpec


def produced_asset_events(
    dag: ResolvedDag,
    run_name: str,
    before: DagRunStatus,
    after: DagRunStatus,
    now: datetime,
    partition_key: str | None = None,
) -> list[ProducedAssetEvent]:
    """The events of the task instances that succeeded between `before` and `after`; each carries the
    run's `partition_key`, or one its task added (`add_partitions`)."""
    produced: list[ProducedAssetEvent] = []
    for key, ti in after.task_instances.items():
        old = before.task_instances.get(key)
        if ti.state is not TaskInstanceState.SUCCESS or (old and old.state is TaskInstanceState.SUCCESS):
            continue
        task_id, map_index = split_key(key)
        task = dag.tasks.get(task_id)
        if task is None or not task.outlets:
            continue
        reported = (ti.xcoms or {}).get(assets.OUTLET_EVENTS_KEY)
        for event in assets.outlet_events(list(task.outlets), reported, partition_key):
            spec = AssetEventSpec(
                uri=event.uri,
                extra=dict(event.extra),
                timestamp=ti.end_date or now,
                source_dag=dag.name,
                source_run=run_name,
                source_task=task_id,
                source_map_index=map_index,
                source_try=ti.try_number,
                aliases=list(event.aliases),
                partition_key=event.partition_key,
            )
            added = event.partition_key if event.added_partition else None
            name = asset_event_name(run_name, task_id, map_index, ti.try_number, event.uri, added)
            produced.append(ProducedAssetEvent(name, spec))
    return produced
