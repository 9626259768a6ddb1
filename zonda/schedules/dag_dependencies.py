"""Dependencies between DAGs (the seed's "DAG Dependencies"): the pure half.

Airflow has two ways for one DAG to depend on another, and Zonda keeps both names and semantics:

- triggering (`TriggerDagRunOperator`): the task creates a DagRun of another DAG. `triggered_dagrun`
  builds that run: a name that a retry of the task computes again
  (`zonda.resources.names.triggered_run_name`),
  and labels and annotations that link it to the run and task that made it.
- waiting (`ExternalTaskSensor`): the task waits for task instances (or the whole run) of another
  DAG's run at a logical date. `external_verdict` is Airflow's `ExternalTaskSensor.poke` counting,
  over the runs as read from the API (`ExternalRun.from_body`).

The operators that read and write the API live in `controller.providers.kubernetes.trigger_dagrun`
and `controller.providers.kubernetes.external_task`; `ExternalTaskMarker` and the clear that follows
it into other DAGs are in `zonda.sensors.external_task` and `zonda.actions.across_dags`.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from zonda.resources import names, wire
from zonda.resources.dagrun_models import DagRunSpec
from zonda.resources.models import API_VERSION, DagRunState, JsonObject, TaskInstanceState
from zonda.resources.run_types import RunType

#: ExternalTaskMarker's defaults (Airflow's), shared by the operator and a clear that follows markers.
#: Airflow's default: an `ExternalTaskMarker` points at the same logical date in the other DAG.
DEFAULT_EXECUTION_DATE = "{{ logical_date.isoformat() }}"
#: Airflow's default limit on how many markers one clear may follow in a chain.
DEFAULT_RECURSION_DEPTH = 10

#: Airflow's defaults: wait for success; a failed child run fails a waiting TriggerDagRunOperator.
DEFAULT_ALLOWED_STATES = (DagRunState.SUCCESS.value,)
DEFAULT_FAILED_STATES = (DagRunState.FAILED.value,)
#: What an ExternalTaskSensor waiting on task instances may name, and on whole runs.
TASK_STATES = frozenset(s.value for s in TaskInstanceState)
RUN_STATES = frozenset(s.value for s in DagRunState)


class DagDependencyError(ValueError):
    """Arguments that cannot describe a dependency (Airflow raises these when the DAG is parsed)."""


def external_dag_name(dag_id: str) -> str:
    """The DAG resource that an Airflow `external_dag_id`/`trigger_dag_id` means.

    A DAG rendered from Python is named after its dag_id (``my_dag`` -> ``my-dag``); a hand-written
    DAG's name is its dag_id already, and maps to itself.
    """
    try:
        return names.dag_resource_name(dag_id)
    except ValueError as exc:
        raise DagDependencyError(str(exc)) from exc


# ------------------------------------------------------------------------------------- triggering


@dataclass(frozen=True)
class Parent:
    """The run and task that triggered a DagRun."""

    dag_name: str
    run_name: str
    task_id: str


def triggered_dagrun(
    *,
    name: str,
    namespace: str,
    dag_name: str,
    logical_date: datetime | None,
    conf: JsonObject,
    parent: Parent,
    run_after: datetime | None = None,
) -> JsonObject:
    """The DagRun a `TriggerDagRunOperator` creates: a manual run (Airflow's run type), linked to `parent`
    (no `logical_date`: an Airflow 3 DAG's run without one, due at `run_after`).

    The labels let ``kubectl get dagruns -l zonda.dev/triggered-by-run=RUN`` list a run's children; the
    annotations hold the full names, which a label value may have had to shorten.
    """
    spec = DagRunSpec(
        dag_name=dag_name, run_type=RunType.MANUAL, logical_date=logical_date, run_after=run_after, conf=conf
    )
    return {
        "apiVersion": API_VERSION,
        "kind": "DagRun",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {
                wire.LABEL_DAG: wire.label_value(dag_name),
                wire.LABEL_RUN_TYPE: RunType.MANUAL.value,
                wire.LABEL_TRIGGERED_BY_DAG: wire.label_value(parent.dag_name),
                wire.LABEL_TRIGGERED_BY_RUN: wire.label_value(parent.run_name),
            },
            "annotations": {
                wire.ANNOTATION_TRIGGERED_BY_RUN: parent.run_name,
                wire.ANNOTATION_TRIGGERED_BY_TASK: parent.task_id,
            },
        },
        "spec": spec.to_wire(),
    }


def parent_of(body: Mapping[str, Any]) -> Parent | None:
    """Who triggered this DagRun, from its labels and annotations; None for a run nobody's task made."""
    metadata = body.get("metadata") or {}
    labels = metadata.get("labels") or {}
    annotations = metadata.get("annotations") or {}
    run = annotations.get(wire.ANNOTATION_TRIGGERED_BY_RUN)
    task = annotations.get(wire.ANNOTATION_TRIGGERED_BY_TASK)
    if run is None or task is None:
        return None
    return Parent(dag_name=labels.get(wire.LABEL_TRIGGERED_BY_DAG, ""), run_name=run, task_id=task)


def check_states(
    allowed: Collection[str],
    failed: Collection[str],
    *,
    valid: Collection[str],
    skipped: Collection[str] = (),
    exclusive: bool = True,
) -> None:
    """Airflow's checks: only known states, and (`exclusive`, ExternalTaskSensor's) no state in two of
    allowed/skipped/failed. TriggerDagRunOperator does not check that: a state in both fails the task,
    failed states being looked at first."""
    unknown = sorted({*allowed, *failed, *skipped} - set(valid))
    if unknown:
        raise DagDependencyError(f"Valid values for states are: {sorted(valid)}, got {unknown}")
    if not exclusive:
        return
    if set(allowed) & set(failed) or set(allowed) & set(skipped) or set(failed) & set(skipped):
        raise DagDependencyError(
            "Duplicate values provided across allowed_states, skipped_states and failed_states."
        )


# ---------------------------------------------------------------------------------------- waiting


@dataclass(frozen=True)
class ExternalRun:
    """One run of the external DAG, as much of it as a sensor's verdict needs."""

    name: str
    dag_name: str
    logical_date: datetime | None
    state: str | None
    task_states: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> ExternalRun:
        """From a DagRun as the API returns it (a run not started yet has no logical date in status)."""
        spec = body.get("spec") or {}
        status = body.get("status") or {}
        logical = wire.parse_time(status.get("logicalDate") or spec.get("logicalDate"))
        return cls(
            name=(body.get("metadata") or {}).get("name", ""),
            dag_name=spec.get("dagName", ""),
            logical_date=logical,
            state=status.get("state"),
            task_states={
                task_id: (ti or {}).get("state", TaskInstanceState.NONE.value)
                for task_id, ti in (status.get("taskInstances") or {}).items()
            },
        )


class Verdict(enum.StrEnum):
    """Airflow's outcomes of one poke: keep waiting, done, skip the sensor, fail it."""

    WAITING = "waiting"
    SUCCESS = "success"
    SKIPPED = "skipped"
    FAILED = "failed"


@dataclass(frozen=True)
class ExternalWait:
    """What an ExternalTaskSensor waits for: task ids (or a task group, or None: the whole run)."""

    dag_name: str
    logical_dates: tuple[datetime, ...]
    task_ids: tuple[str, ...] | None = None
    task_group_id: str | None = None
    allowed_states: tuple[str, ...] = DEFAULT_ALLOWED_STATES
    skipped_states: tuple[str, ...] = ()
    failed_states: tuple[str, ...] = ()

    def describe(self) -> str:
        dates = ", ".join(d.isoformat() for d in self.logical_dates)
        if self.task_ids:
            what = f"task(s) {', '.join(self.task_ids)} of DAG {self.dag_name}"
        elif self.task_group_id:
            what = f"task group {self.task_group_id} of DAG {self.dag_name}"
        else:
            what = f"DAG {self.dag_name}"
        return f"{what} at {dates}"


def _task_ids_in(wait: ExternalWait, run: ExternalRun) -> tuple[str, ...]:
    if wait.task_ids:
        return wait.task_ids
    assert wait.task_group_id is not None
    prefix = f"{wait.task_group_id}."
    return tuple(t for t in run.task_states if t.startswith(prefix))


def _count(wait: ExternalWait, runs: Sequence[ExternalRun], states: Collection[str]) -> float:
    """Airflow's `get_count`: matching runs, or matching task instances per run (so a fraction)."""
    if not states:
        return 0
    if wait.task_ids is None and wait.task_group_id is None:
        return sum(1 for run in runs if run.state in states)
    total = 0.0
    for run in runs:
        task_ids = _task_ids_in(wait, run)
        if task_ids:
            matching = sum(
                1 for t in task_ids if run.task_states.get(t, TaskInstanceState.NONE.value) in states
            )
            total += matching / len(task_ids)
    return total


def external_verdict(wait: ExternalWait, runs: Iterable[ExternalRun]) -> tuple[Verdict, str]:
    """Airflow's `ExternalTaskSensor.poke` over the external DAG's runs. Purely computational.

    Only runs of `wait.dag_name` at one of `wait.logical_dates` count. Failed states are checked
    first, then skipped ones (so a failure anywhere fails the sensor before a skip skips it), then
    done when every (date, task) pair is in an allowed state.
    """
    wanted = {d.timestamp() for d in wait.logical_dates}
    matching = [
        run
        for run in runs
        if run.dag_name == wait.dag_name and run.logical_date and run.logical_date.timestamp() in wanted
    ]
    described = wait.describe()
    if _count(wait, matching, wait.failed_states) > 0:
        return Verdict.FAILED, f"The external {described} failed (states {', '.join(wait.failed_states)})."
    if _count(wait, matching, wait.skipped_states) > 0:
        return (
            Verdict.SKIPPED,
            f"The external {described} was skipped (states {', '.join(wait.skipped_states)}).",
        )
    # `>=`: two runs of one logical date (Airflow's database forbids it, the API does not) still count.
    if _count(wait, matching, wait.allowed_states) >= len(wait.logical_dates):
        return Verdict.SUCCESS, f"The external {described} reached {', '.join(wait.allowed_states)}."
    seen = ", ".join(f"{run.name} ({run.state or 'not started'})" for run in matching) or "no run yet"
    return Verdict.WAITING, f"Waiting for {described}: {seen}."


__all__ = [
    "DEFAULT_ALLOWED_STATES",
    "DEFAULT_FAILED_STATES",
    "RUN_STATES",
    "TASK_STATES",
    "DagDependencyError",
    "ExternalRun",
    "ExternalWait",
    "Parent",
    "Verdict",
    "check_states",
    "external_dag_name",
    "external_verdict",
    "parent_of",
    "triggered_dagrun",
]
