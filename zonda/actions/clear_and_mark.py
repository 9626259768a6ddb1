"""A user's actions on a DagRun — clear and mark — as pure functions over its status.

Airflow's ``tasks clear`` (`clear_task_instances`) and "mark success/failed/skipped"
(`DAG.set_task_instance_state`), without a database: each takes the run's status, the DAG the run
started with and `now`, and returns the new status plus one `RunEvent` per task instance it moved.
Every move goes through `zonda.resources.states.check_transition(..., manual=True)`, so a user's edit is as
legal and as explained as the scheduler's. The caller (the CLI, the UI) reads the run, calls one of
these, and writes the status back with the resourceVersion it read (retrying on a conflict); the
controller's next pass stops attempts that are no longer expected and carries on.

- clear: a finished (or never started) task instance goes to ``none`` with `max_tries` raised to
  ``try_number + retries`` (so it gets its retries again); an unfinished one (queued, running,
  deferred, up_for_retry...) goes to ``restarting``: the controller stops its attempt, then runs it
  again. A finished run goes back to ``queued`` with its start and end dates reset (its
  dagrun_timeout counts anew), as Airflow's ``dag_run_state=QUEUED`` does.
- mark: the chosen task instances take the state; then, as Airflow does, failed and
  upstream_failed task instances downstream of them are cleared so they resume. A finished run whose
  task instances changed goes back to ``running`` (nothing cleared) or ``queued`` (something cleared)
  and the controller settles it again from its leaves.

Clearing across DAGs through `ExternalTaskMarker`s builds on `clear` in `zonda.actions.across_dags`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from zonda.passes.graphs import ancestors, descendants
from zonda.passes.run_pass import TRY_RESET
from zonda.resources.dagrun_models import DagRunStatus, TaskInstanceStatus
from zonda.resources.models import FINISHED_TI_STATES, DagRunState, DagSpec, TaskInstanceState
from zonda.resources.run_events import RunEvent
from zonda.resources.states import FINISHED_RUN_STATES, check_transition
from zonda.specs import mapping
from zonda.specs.dags import DagInvalid, ResolvedDag, resolve_dag

S = TaskInstanceState

#: The states a user may mark (Airflow's "mark success/failed/skipped").
MARKABLE_STATES = frozenset({S.SUCCESS, S.FAILED, S.SKIPPED})
#: What Airflow's `only_failed` clear selects.
_FAILED_STATES = frozenset({S.FAILED, S.UPSTREAM_FAILED})


class ActionError(ValueError):
    """The action cannot be applied to this run (not started, unknown task ids, a state not markable)."""


@dataclass(frozen=True)
class ActionResult:
    """The run's new status, the task ids whose state changed, and one event per change."""

    status: DagRunStatus
    changed: tuple[str, ...]
    events: tuple[RunEvent, ...]


def dag_of_run(dag_name: str, status: DagRunStatus) -> ResolvedDag:
    """The DAG a run started with (its status's snapshot): the graph clear and mark work on."""
    if status.dag_spec is None:
        raise ActionError("the run has not started yet: it has no task instances")
    try:
        return resolve_dag(dag_name, DagSpec.model_validate(status.dag_spec))
    except DagInvalid as exc:  # only if Zonda's own rules changed since the run started
        raise ActionError(f"the DAG this run started with no longer resolves: {exc}") from exc


def select_tasks(
    dag: ResolvedDag, task_ids: Collection[str] | None, *, upstream: bool = False, downstream: bool = False
) -> list[str]:
    """`task_ids` (every task when None) with their upstream and/or downstream closures, in DAG order."""
    unknown = sorted(set(task_ids or ()) - set(dag.tasks))
    if unknown:
        raise ActionError(f"no such task(s) in DAG {dag.name}: {', '.join(unknown)}")
    chosen = set(dag.tasks) if task_ids is None else set(task_ids)
    for task_id in list(chosen):
        if upstream:
            chosen |= ancestors(dag, task_id)
        if downstream:
            chosen |= descendants(dag, task_id)
    return [task_id for task_id in dag.tasks if task_id in chosen]


def with_setups_and_teardowns(dag: ResolvedDag, chosen: list[str]) -> list[str]:
    """`chosen` plus the setups its work tasks need and those setups' teardowns (Airflow 2.7's clear).

    Work cannot run again without its resources: clearing a task clears the setups upstream of it and
    the teardowns of those setups; clearing a setup clears its teardowns.
    """
    added = set(chosen)
    for task_id in chosen:
        task = dag.tasks[task_id]
        setups = {task_id} if task.is_setup else set()
        if not task.is_setup and not task.is_teardown:
            setups |= {up for up in ancestors(dag, task_id) if dag.tasks[up].is_setup}
        for setup in setups:
            added.add(setup)
            added |= {down for down in dag.tasks[setup].downstream if dag.tasks[down].is_teardown}
    return [task_id for task_id in dag.tasks if task_id in added]


def clear(
    dag: ResolvedDag,
    status: DagRunStatus,
    *,
    task_ids: Collection[str] | None = None,
    upstream: bool = False,
    downstream: bool = False,
    only_failed: bool = False,
    now: datetime,
    who: str = "a user",
) -> ActionResult:
    """Airflow's `clear_task_instances`: the chosen task instances run again (see the module doc)."""
    chosen = with_setups_and_teardowns(
        dag, select_tasks(dag, task_ids, upstream=upstream, downstream=downstream)
    )
    return _Edit(dag, status, now=now, who=who).clear(chosen, only_failed=only_failed).result()


def mark(
    dag: ResolvedDag,
    status: DagRunStatus,
    *,
    task_ids: Collection[str],
    state: TaskInstanceState,
    upstream: bool = False,
    downstream: bool = False,
    now: datetime,
    who: str = "a user",
) -> ActionResult:
    """Airflow's `set_task_instance_state`: set the state, then clear failed task instances downstream."""
    if state not in MARKABLE_STATES:
        allowed = ", ".join(sorted(s.value for s in MARKABLE_STATES))
        raise ActionError(f"cannot mark a task instance {state.value}: only {allowed}")
    if not task_ids:
        raise ActionError("name at least one task to mark")
    chosen = select_tasks(dag, task_ids, upstream=upstream, downstream=downstream)
    edit = _Edit(dag, status, now=now, who=who).mark(chosen, state)
    after = set().union(*(descendants(dag, task_id) for task_id in chosen)) - set(chosen)
    return edit.clear([t for t in dag.tasks if t in after], only_failed=True).result()


class _Edit:
    """A working copy of one run's status that clear and mark move task instances in."""

    def __init__(self, dag: ResolvedDag, status: DagRunStatus, *, now: datetime, who: str) -> None:
        self.dag = dag
        self.status = status
        self.now = now
        self.who = who
        self.tis: dict[str, TaskInstanceStatus] = dict(status.task_instances)
        self.changed: list[str] = []
        self.cleared = False
        self.events: list[RunEvent] = []

    def _move(
        self, task_id: str, state: TaskInstanceState, reason: str, event: str, *, warning: bool, **fields: Any
    ) -> None:
        ti = self.tis[task_id]
        check_transition(ti.state, state, task_id=task_id, manual=True)
        self.tis[task_id] = ti.model_copy(update={"state": state, "reason": reason, **fields})
        self.changed.append(task_id)
        self.events.append(
            RunEvent(event, f"Task {task_id} ({ti.state.value} -> {state.value}): {reason}", warning=warning)
        )

    def _instances(self, task_id: str) -> list[str]:
        """The task's instance keys: its id, or a mapped task's ``task[i]`` (removed ones left alone)."""
        return [
            key for key, ti in self.tis.items()
            if key == task_id or (mapping.split_key(key)[0] == task_id and ti.state is not S.REMOVED)
        ]  # fmt: skip

    def clear(self, task_ids: list[str], *, only_failed: bool) -> _Edit:
        for task_id in [key for chosen in task_ids for key in self._instances(chosen)]:
            ti = self.tis[task_id]
            if only_failed and ti.state not in _FAILED_STATES:
                continue  # not what an only-failed clear selects
            self.cleared = True
            retries = self.dag.tasks[mapping.split_key(task_id)[0]].retries
            fields = {**TRY_RESET, "max_tries": ti.try_number + retries}
            if ti.state in FINISHED_TI_STATES or ti.state is S.NONE:
                self._move(task_id, S.NONE, f"Cleared by {self.who}", "TaskCleared", warning=False, **fields)
            else:  # its attempt (or trigger) is alive: the controller stops it, then runs it again
                self._move(
                    task_id,
                    S.RESTARTING,
                    f"Cleared by {self.who} while {ti.state.value}",
                    "TaskCleared",
                    warning=False,
                    max_tries=fields["max_tries"],
                    next_try_at=None,
                )
        return self

    def mark(self, task_ids: list[str], state: TaskInstanceState) -> _Edit:
        for task_id in [key for chosen in task_ids for key in self._instances(chosen) or [chosen]]:
            ti = self.tis.get(task_id)
            if ti is None:
                ti = self.tis[task_id] = TaskInstanceStatus(max_tries=self.dag.tasks[task_id].retries)
            if ti.state is state:
                continue
            start = ti.start_date or self.now
            end = ti.end_date if ti.state in FINISHED_TI_STATES and ti.end_date else self.now
            self._move(
                task_id,
                state,
                f"Marked {state.value} by {self.who}",
                f"TaskMarked{state.value.capitalize()}",
                warning=state is S.FAILED,
                start_date=start,
                end_date=end,
                duration_seconds=(end - start).total_seconds(),
                next_try_at=None,
            )
        return self

    def result(self) -> ActionResult:
        update: dict[str, Any] = {"task_instances": self.tis}
        if self.changed and self.status.state in FINISHED_RUN_STATES:
            if self.cleared:  # Airflow: a cleared finished run is queued again and starts anew
                update |= {
                    "state": DagRunState.QUEUED,
                    "queued_at": self.now,
                    "start_date": None,
                    "end_date": None,
                    "message": None,
                }
            else:  # only marks: the controller settles the run again from its leaves
                update |= {"state": DagRunState.RUNNING, "end_date": None, "message": None}
        return ActionResult(
            status=self.status.model_copy(update=update),
            changed=tuple(dict.fromkeys(self.changed)),
            events=tuple(self.events),
        )


def describe(result: ActionResult, tis_before: Mapping[str, TaskInstanceStatus]) -> list[str]:
    """One line per changed task instance, `task: old -> new`, for a CLI or UI to print."""
    return [
        f"{task_id}: {tis_before[task_id].state.value if task_id in tis_before else 'none'} -> "
        f"{result.status.task_instances[task_id].state.value}"
        for task_id in result.changed
    ]


__all__ = [
    "MARKABLE_STATES",
    "ActionError",
    "ActionResult",
    "clear",
    "dag_of_run",
    "describe",
    "mark",
    "select_tasks",
]
