"""`zonda dags test FILE` and `dag.test()`: one DAG run in this process, with nothing started.

The DAG is compiled to its manifest and run through exactly what the controller uses: `plans.start_run`
snapshots it, `zonda.passes.compose.compose_pass` (the controller's pass, with the controller's default
limits) makes every scheduling decision and builds every try's invocation, the task runner (`run_task`)
executes each try and callback try in this process, and a deferred task's trigger runs here until its
first event. The asset events the tries' successes produce are printed and returned, not recorded.
Waits the scheduler asks for (retry delays, sensor reschedules) are slept for real, so keep them short.
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pendulum

from controller.runner.task import run_task
from zonda import triggers
from zonda.authoring import compat, dag_files, manifests
from zonda.authoring.dags import DAG
from zonda.passes import compose, decisions, plans
from zonda.passes.decisions import AttemptPhase, ObservedAttempt, ObservedTrigger
from zonda.passes.produced_assets import ProducedAssetEvent
from zonda.resources.dagrun_models import DagRunSpec, DagRunStatus
from zonda.resources.invocations import TaskOutcome
from zonda.resources.models import DagRunState
from zonda.resources.run_types import RunType
from zonda.specs.dags import parse_dag_spec, resolve_dag

#: Longest a test run may take (the scheduler's passes plus the waits it asks for).
TIMEOUT = timedelta(minutes=10)
#: Longest single wait between passes; a pass with nothing to do sleeps at most this long.
MAX_SLEEP_SECONDS = 5.0


class DagTestError(Exception):
    """The file or DAG cannot be tested (import error, unknown dag id, invalid DAG)."""


@dataclass
class DagTestOutcome:
    dag_id: str
    state: str
    task_states: dict[str, str] = field(default_factory=dict)
    xcoms: dict[str, Any] = field(default_factory=dict)
    status: DagRunStatus | None = None
    #: The asset events its tries' successes produced, as the controller would record them.
    asset_events: list[ProducedAssetEvent] = field(default_factory=list)


def test_file(
    path: Path,
    *,
    dag_id: str | None = None,
    logical_date: str | None = None,
    conf: dict[str, Any] | None = None,
    dags_folder: Path | None = None,
    airflow_compat: bool = False,
    airflow_version: str | None = None,
) -> DagTestOutcome:
    """Load `path` from `dags_folder` (default: its folder) and run its DAG (the only one, or `dag_id`),
    with the semantics of the Airflow the file was written for (or `airflow_version`'s)."""
    folder = (dags_folder or path.parent).resolve()
    dialect = None
    if airflow_compat and path.suffix == ".py":
        dialect = compat.file_dialect(path.read_text(), forced=airflow_version)
    with compat.airflow_imports(enabled=airflow_compat, dialect=dialect):
        results = dag_files.load_file(path.resolve(), folder)
    dags: list[DAG] = []
    for result in results:
        if result.failure is not None:
            raise DagTestError(
                f"{result.failure.file}:{result.failure.line or ''}\n{result.failure.traceback}"
            )
        dags.extend(result.dags)
    chosen = [d for d in dags if dag_id in (None, d.dag_id)]
    if len(chosen) != 1:
        ids = ", ".join(d.dag_id for d in dags) or "none"
        raise DagTestError(
            f"{path} defines DAGs {ids}: pass --dag-id"
            if dag_id is None
            else f"no DAG {dag_id!r} in {path} ({ids})"
        )
    moment = pendulum.parse(logical_date) if logical_date else None
    assert moment is None or isinstance(moment, datetime)
    return run_dag(chosen[0], logical_date=moment, conf=conf, dags_folder=folder)


def run_dag(
    dag: DAG,
    *,
    logical_date: datetime | None = None,
    conf: dict[str, Any] | None = None,
    dags_folder: Path | None = None,
) -> DagTestOutcome:
    """Run one manual DAG run of `dag` to its end, in this process."""
    folder = dags_folder or Path(dag.fileloc).resolve().parent
    try:
        manifest = manifests.dag_manifest(dag, dags_folder=folder)
    except manifests.ManifestError as error:
        raise DagTestError(f"DAG {dag.dag_id!r} is invalid: {error}") from error
    name = manifest["metadata"]["name"]
    dag_spec = parse_dag_spec(manifest["spec"])
    resolved = resolve_dag(name, dag_spec)
    now = pendulum.now("UTC")
    # a logical date, now by default, in both dialects: Airflow 3's `dag.test()` too takes `utcnow()`
    # unless passed one (task-sdk `definitions/dag.py` `DAG.test`)
    run_spec = DagRunSpec(
        dag_name=name,
        run_type=RunType.MANUAL,
        logical_date=logical_date or now,
        run_after=now,
        conf=conf or {},
    )
    start = plans.start_run(
        run_spec,
        DagRunStatus(),
        plans.DagRef(spec=manifest["spec"], generation=1),
        namespace="test",
        created_at=now,
        generation=1,
        now=now,
    )
    if not start.started:
        raise DagTestError("; ".join(event.message for event in start.events) or "the run did not start")
    status = start.status
    run_name = f"{name}-test"
    attempts: dict[str, ObservedAttempt] = {}
    fired: dict[str, ObservedTrigger] = {}
    produced: list[ProducedAssetEvent] = []
    previous = os.environ.get(dag_files.DAGS_FOLDER_ENV)
    os.environ[dag_files.DAGS_FOLDER_ENV] = str(folder)
    deadline = time.monotonic() + TIMEOUT.total_seconds()
    try:
        while time.monotonic() < deadline:
            now = pendulum.now("UTC")
            plan = compose.compose_pass(
                compose.Gathered(
                    dag=resolved,
                    dag_spec=dag_spec,
                    spec=run_spec,
                    status=status,
                    run_name=run_name,
                    now=now,
                    externally_triggered=False,  # as Airflow's dag.test() run (LatestOnly judges it)
                    attempts=attempts,
                    triggers=fired.values(),
                )
            )
            status = plan.status
            for event in plan.happened:
                print(f"{event.reason}: {event.message}")
            for asset_event in plan.asset_events:
                produced.append(asset_event)
                print(f"AssetEventRecorded: {asset_event.spec.uri} by {asset_event.spec.source_task}")
            for callback in plan.callback_tries:  # in process, as the task's own callbacks run
                run_task(callback.invocation)
            if status.state in (DagRunState.SUCCESS, DagRunState.FAILED):
                break
            for request in plan.triggers_to_create:
                fired[request.task_id] = _fire(request)
            for launch in plan.launches:
                attempts[launch.launch.attempt_name] = _execute(launch)
            if not plan.launches and not plan.triggers_to_create:
                wait = (plan.wake_at - pendulum.now("UTC")).total_seconds() if plan.wake_at else 0.05
                time.sleep(min(max(wait, 0.0), MAX_SLEEP_SECONDS))
        else:
            raise DagTestError(f"the run did not finish within {TIMEOUT}")
    finally:
        if previous is None:
            os.environ.pop(dag_files.DAGS_FOLDER_ENV, None)
        else:
            os.environ[dag_files.DAGS_FOLDER_ENV] = previous
    return DagTestOutcome(
        dag_id=dag.dag_id,
        state=status.state.value if status.state else "unknown",
        task_states={task_id: ti.state.value for task_id, ti in status.task_instances.items()},
        xcoms={t: ti.xcom for t, ti in status.task_instances.items() if ti.xcom is not None},
        status=status,
        asset_events=produced,
    )


def _execute(planned: compose.Launch) -> ObservedAttempt:
    """Run one try with the task runner, as the local executor would in a subprocess."""
    launch = planned.launch
    started = pendulum.now("UTC")
    if planned.task.operator is None:  # a container task: nothing to run in-process
        return ObservedAttempt(
            task_id=launch.task_id, try_number=launch.try_number, name=launch.attempt_name,
            phase=AttemptPhase.SUCCEEDED, exit_code=0, started_at=started, finished_at=started,
            message="container task: not run by `dags test`",
        )  # fmt: skip
    result = run_task(planned.invocation)
    failed = result.outcome in (TaskOutcome.FAILED, TaskOutcome.FAILED_NO_RETRY)
    return ObservedAttempt(
        task_id=launch.task_id,
        try_number=launch.try_number,
        name=launch.attempt_name,
        phase=AttemptPhase.FAILED if failed else AttemptPhase.SUCCEEDED,
        result=result,
        exit_code=1 if failed else 0,
        started_at=started,
        finished_at=pendulum.now("UTC"),
    )


def _fire(request: decisions.TriggerRequest) -> ObservedTrigger:
    """Run a deferred task's trigger here until its first event (the triggerer's job)."""
    deferral = request.deferral

    async def first_event() -> Any:
        trigger = triggers.load_trigger(deferral.trigger_classpath, deferral.trigger_kwargs)
        try:
            async for event in trigger.run():
                return event.payload
        finally:
            await trigger.cleanup()
        return None

    try:
        payload = asyncio.run(asyncio.wait_for(first_event(), timeout=deferral.timeout_seconds))
    except Exception as error:  # a failing trigger fails the task, as under the triggerer
        return ObservedTrigger(
            task_id=request.task_id, try_number=request.try_number, deferral_count=request.deferral_count,
            name=request.name, failed=True, message=str(error) or type(error).__name__,
        )  # fmt: skip
    return ObservedTrigger(
        task_id=request.task_id, try_number=request.try_number, deferral_count=request.deferral_count,
        name=request.name, fired=True, event=triggers.to_json_safe(payload),
    )  # fmt: skip


def format_states(outcome: DagTestOutcome) -> str:
    width = max((len(task_id) for task_id in outcome.task_states), default=4)
    lines = [f"{'TASK'.ljust(width)}  STATE"]
    lines += [f"{task_id.ljust(width)}  {state}" for task_id, state in outcome.task_states.items()]
    lines.append(f"DAG run {outcome.dag_id}: {outcome.state}")
    return "\n".join(lines)
