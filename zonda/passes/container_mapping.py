"""A mapped KubernetesPodOperator's arguments, picked by the controller: its pod is built by the
controller, not by the task runner, so the controller picks each instance's items.

They come from the XComs the run's status holds inline, and from values in the XCom backend that the
controller read for this pass (`Observation.stored_xcoms`, by URL: `stored_urls` says which). A
`.map()` function is never run by the controller (it is user code: it runs in a task's own try), so
such an instance fails, as does one whose stored value could not be read (`Observation.unreadable_xcoms`):
`zonda.passes.run_pass` fails the task instance with `arguments_problem`'s sentence instead of launching it,
and the run goes on by trigger rules.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from zonda.passes.decisions import Observation
from zonda.resources.dagrun_models import DagRunStatus, TaskInstanceStatus
from zonda.resources.models import FINISHED_TI_STATES
from zonda.specs import mapped_groups, mapping
from zonda.specs.dags import ResolvedDag, ResolvedTask
from zonda.specs.operator_registry import CONTAINER_OPERATORS
from zonda.tries import xcoms


def is_mapped_container_task(task: ResolvedTask) -> bool:
    """A mapped task whose pod the controller builds (a KubernetesPodOperator, or a bare container)."""
    return mapping.is_mapped(task.expand) and (task.operator is None or task.operator in CONTAINER_OPERATORS)


def mapped_container_args(
    task: ResolvedTask,
    map_index: int,
    status: DagRunStatus,
    stored: Mapping[str, Any] | None = None,
    unreadable: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Instance `map_index`'s arguments; `mapping.MappingError` for a `.map()` function, or a value in
    the XCom backend that is not in `stored` (with `unreadable`'s reason when the controller said why)."""
    assert task.expand is not None
    tis = status.task_instances
    counts = mapping.instance_counts(tis)

    def inline(value: Any) -> Any:
        if not xcoms.is_stored(value):
            return value
        url = xcoms.stored_url(value)
        if stored is not None and url in stored:
            return stored[url]
        why = (unreadable or {}).get(url, "the controller did not read it")
        raise mapping.MappingError(f"the XCom to map over, in the XCom backend at {url}, unreadable: {why}")

    def pull(task_id: str, key: str) -> Any:
        if task_id in counts:
            found = (tis.get(mapping.ti_key(task_id, index)) for index in range(counts[task_id]))
            return [inline(ti.xcom) for ti in found if ti is not None and ti.xcom is not None]
        ti = tis.get(task_id)
        return None if ti is None else inline(_value(ti, key))

    def no_functions(path: str) -> Any:
        raise mapping.MappingError(
            f"a KubernetesPodOperator cannot .map() ({path}): its pod is built by the controller, which "
            "runs no DAG code; map over the function's results made by a task instead"
        )

    chosen = mapping.expanded_arguments(task.expand, map_index, pull, no_functions)
    if mapped_groups.is_group_expansion(task.expand):
        substituted: dict[str, Any] = mapped_groups.substitute(dict(task.args), chosen)
        return substituted
    return {**task.args, **chosen}


def arguments_problem(
    task: ResolvedTask,
    map_index: int,
    status: DagRunStatus,
    stored: Mapping[str, Any],
    unreadable: Mapping[str, str],
) -> str | None:
    """Why instance `map_index` of a mapped container task cannot be launched (its failure's reason)."""
    if map_index < 0 or not is_mapped_container_task(task):
        return None
    try:
        mapped_container_args(task, map_index, status, stored, unreadable)
    except mapping.MappingError as error:
        return f"Cannot pick this mapped KubernetesPodOperator instance's arguments: {error}"
    return None


def stored_urls(
    dag: ResolvedDag, status: DagRunStatus, observed: Observation | None = None
) -> dict[str, int | None]:
    """The values in the XCom backend (URL: size) that mapped container tasks with an instance still to
    launch map over, in the status or in the results `observed` reports (the pass may expand on them):
    the controller reads these before the pass."""
    tis = status.task_instances
    wanted: dict[str, int | None] = {}
    for task in dag.tasks.values():
        if not is_mapped_container_task(task):
            continue
        keys = [key for key in tis if mapping.split_key(key)[0] == task.task_id]
        if keys and all(tis[key].state in FINISHED_TI_STATES for key in keys):
            continue
        sources = mapping.source_task_ids(task.expand)
        values = [
            value
            for key, ti in tis.items()
            if mapping.split_key(key)[0] in sources
            for value in (ti.xcom, *(ti.xcoms or {}).values())
        ]
        for attempt in observed.attempts.values() if observed is not None else ():
            if mapping.split_key(attempt.task_id)[0] in sources and attempt.result is not None:
                values.extend((attempt.result.xcom, *attempt.result.xcoms.values()))
        wanted.update((xcoms.stored_url(v), xcoms.stored_size(v)) for v in values if xcoms.is_stored(v))
    return wanted


def _value(ti: TaskInstanceStatus, key: str) -> Any:
    return ti.xcom if key == xcoms.RETURN_KEY else (ti.xcoms or {}).get(key)
