"""Act on `zonda.passes.callbacks.plan_callbacks`: launch callback tries through the run's executor.

A callback try is a try of the task whose context it carries, run by the same executor (a pod or a
local process) under the callback's deterministic name, so launching it again is a no-op. A
container task's callback runs in the runner (Zonda's image), since the task's own image may not
have Python nor Zonda (`zonda.passes.callbacks.callback_task`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller.executors.base import Executor
from controller.reconcilers import metrics
from zonda.passes.callbacks import CallbackLaunch, callback_task
from zonda.passes.decisions import ObservedAttempt
from zonda.resources.dagrun_models import DagRunSpec, DagRunStatus
from zonda.resources.models import DagSpec
from zonda.resources.names import is_callback_name
from zonda.specs.dags import ResolvedDag
from zonda.tries import invocation_builder


def split_attempts(
    attempts: Mapping[str, ObservedAttempt],
) -> tuple[dict[str, ObservedAttempt], dict[str, ObservedAttempt]]:
    """The executor's report as (task tries, callback tries): a callback try is never a stray to kill."""
    tries = {name: attempt for name, attempt in attempts.items() if not is_callback_name(name)}
    callback_tries = {name: attempt for name, attempt in attempts.items() if is_callback_name(name)}
    return tries, callback_tries


async def launch_callbacks(
    executor: Executor,
    run: Mapping[str, Any],
    *,
    spec: DagRunSpec,
    status: DagRunStatus,
    dag: ResolvedDag,
    dag_spec: DagSpec,
    launches: list[CallbackLaunch],
) -> None:
    meta = run["metadata"]
    for launch in launches:
        task = callback_task(dag.tasks[launch.task_id])
        invocation = invocation_builder.task_invocation(
            run_name=meta["name"],
            spec=spec,
            status=status,
            dag_spec=dag_spec,
            task=task,
            try_number=launch.try_number,
            namespace=meta["namespace"],
            map_index=launch.map_index,
            run_uid=meta.get("uid"),
        ).replace(callback=launch.request, callbacks={})
        await executor.launch(run, task=task, invocation=invocation, attempt_name=launch.name)
        metrics.CALLBACKS_LAUNCHED.labels(launch.request.kind).inc()
