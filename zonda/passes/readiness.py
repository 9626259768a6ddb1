"""How one scheduler pass (`zonda.passes.run_pass.RunPass`) decides which task instances may run.

Steps 5 and 6 of the pass: retries and reschedules whose time came are scheduled again; then, in
topological order, each task instance's trigger rule is evaluated against its upstreams (skip and
upstream_failed cascades), with Airflow's other dependencies: a branch or short-circuit that did
not follow it, `depends_on_past`, EmptyOperator (succeeds without a try) and LatestOnlyOperator
(skips what is downstream outside the latest interval). They act on the pass's working
state (`zonda.passes.pass_state.PassState`, ``self.state``).

Its own module because readiness (Airflow's `TaskInstance.are_dependencies_met`) is one subject,
apart from a try's outcomes and launches.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from zonda.passes import skips
from zonda.passes.decisions import Unanswered
from zonda.passes.graphs import descendants
from zonda.passes.pass_state import PassState
from zonda.passes.trigger_rules import TriggerRuleOutcome, evaluate_trigger_rule
from zonda.resources.models import TaskInstanceState
from zonda.resources.run_types import RunType
from zonda.specs import operator_registry
from zonda.specs.dags import ResolvedTask

S = TaskInstanceState
_PAST_OK_STATES = frozenset({S.SUCCESS, S.SKIPPED})


def waiting_is_over(
    state: TaskInstanceState, next_try_at: datetime | None, now: datetime, launched: str | None
) -> str | None:
    """Why a task instance up for retry or reschedule is scheduled again now, or None while it waits.

    Its time came; or its next try's attempt exists already (`launched`, unrecorded): a pass whose
    clock said the time had come launched it, then its status write was refused or lost, and this
    pass's clock says otherwise (stepped back, or another replica's). That try runs: it is adopted
    as Airflow's scheduler adopts a running task, not stopped as an orphan, which would fail it (its
    pod held by try tracking) and charge the task instance a try no fault ended.
    """
    what = "retry" if state is S.UP_FOR_RETRY else "reschedule"
    if next_try_at is None or now >= next_try_at:
        return f"Its {what} time came"
    if launched is not None:
        return f"Its {what} was launched already (attempt {launched} exists), before its time by this clock"
    return None


class Readiness:
    """The pass's readiness checks: trigger rules, branches, depends_on_past, LatestOnly."""

    def __init__(self, state: PassState) -> None:
        self.state = state

    def wake_waiting(self) -> None:
        """Retries and reschedules whose time came are scheduled again; so is one whose next try an
        earlier pass launched already (`waiting_is_over`)."""
        for task_id, ti in list(self.state.tis.items()):
            if ti.state not in (S.UP_FOR_RETRY, S.UP_FOR_RESCHEDULE):
                continue
            existing = self.state.existing_attempt(task_id)
            reason = waiting_is_over(
                ti.state, ti.next_try_at, self.state.now, existing.name if existing is not None else None
            )
            if reason is not None:
                self.state.set(task_id, S.SCHEDULED, reason)

    def evaluate_readiness(self) -> None:
        """Trigger rules over direct upstreams, in topological order so cascades settle in one pass."""
        for task_id, task in self.state.dag.tasks.items():
            waiting = [key for key in self.state.mapped.keys(task_id) if self.state.tis[key].state is S.NONE]
            if waiting and self.state.mapped.awaits_expansion(task):
                in_group = self.state.mapped.expand_in_group(task)
                if in_group is None:
                    self._evaluate_task_instance(task, task_id, expanding=True)
                    continue
                waiting = in_group
            for key in waiting:
                self._evaluate_task_instance(task, key)

    def _evaluate_task_instance(self, task: ResolvedTask, key: str, *, expanding: bool = False) -> None:
        """One task instance's trigger rule; a mapped task still to expand is decided as a whole (its
        instances waiting for the expansion get the same state)."""
        keys = [key]
        if expanding:
            keys = [k for k in self.state.mapped.keys(task.task_id) if self.state.tis[k].state is S.NONE]
        if self.skip_if_not_followed(task, key, keys):
            return
        upstream_states = self.state.mapped.upstream_states(task, None if expanding else key)
        setups = [
            k
            for up in task.upstream
            if up in self.state.dag.tasks and self.state.dag.tasks[up].is_setup
            for k in self.state.mapped.keys(up)
        ]
        decision = evaluate_trigger_rule(task.trigger_rule, upstream_states, setups)
        past_problem = self.past_problem(task, key)
        if decision.outcome is TriggerRuleOutcome.UPSTREAM_FAILED:
            for each in keys:
                self.state.set(each, S.UPSTREAM_FAILED, decision.reason, end_date=self.state.now)
        elif decision.outcome is TriggerRuleOutcome.SKIP and (
            past_problem is None or not task.wait_for_past_depends_before_skipping
        ):  # Airflow skips at once unless told to wait for the past first
            for each in keys:
                self.state.set(each, S.SKIPPED, decision.reason, end_date=self.state.now)
        elif decision.outcome is TriggerRuleOutcome.WAIT or past_problem is not None:
            for each in keys:
                waiting = decision.reason if decision.outcome is TriggerRuleOutcome.WAIT else past_problem
                self.state.update(each, reason=waiting)
        elif expanding:
            self.state.mapped.expand(task, decision.reason)
        elif task.operator in operator_registry.EMPTY_OPERATORS:
            # Airflow's `schedule_tis` counts the try it did not need to launch: try_number + 1.
            self.state.set(
                key,
                S.SUCCESS,
                "EmptyOperator: succeeded without running",
                start_date=self.state.now,
                end_date=self.state.now,
                duration_seconds=0.0,
                try_number=self.state.tis[key].try_number + 1,
            )
        elif task.operator in operator_registry.LATEST_ONLY_OPERATORS:
            self._run_latest_only(task, key)
        else:
            self.state.set(key, S.SCHEDULED, decision.reason)

    def skip_if_not_followed(self, task: ResolvedTask, key: str, keys: list[str]) -> bool:
        """Airflow's NotPreviouslySkippedDep: a task instance a standing branch decision did not follow
        is skipped (a cleared one, or one a mapped task's expansion adds after its branch decided).
        `keys`: the instances `key` decides for. Whether the decision held them back."""
        parent = self._skipping_parent(task, key)
        if parent is None:
            return False
        if task.wait_for_past_depends_before_skipping and self.past_problem(task, key) is not None:
            for each in keys:
                self.state.update(each, reason="Task should be skipped but the past depends are not met")
            return True
        for each in keys:
            self.state.set(
                each,
                S.SKIPPED,
                f"Skipping because of previous XCom result from parent task "
                f"{parent}: it did not follow this task",
                end_date=self.state.now,
            )
        return True

    def _skipping_parent(self, task: ResolvedTask, key: str) -> str | None:
        """The instance of a direct upstream branch (or LatestOnly) that succeeded without following
        this task: the upstream's instance of the same map index, or its unmapped one
        (`zonda.passes.skips`)."""
        for up in sorted(task.upstream):
            decider = skips.deciding_instance(up, key, self.state.tis)
            parent = None if decider is None else self.state.tis[decider]
            if parent is None or parent.state is not S.SUCCESS or parent.follow_task_ids is None:
                continue
            if task.task_id not in self._on_followed_paths(parent.follow_task_ids):
                return decider
        return None

    def past_problem(self, task: ResolvedTask, key: str) -> str | None:
        """Airflow's PrevDagrunDep: depends_on_past needs the previous run's task instance succeeded
        (a mapped instance: the one with its map index)."""
        previous = self.state.observed.previous_run_states
        if not task.depends_on_past or previous is None:
            return None
        state = previous.get(key)
        if state is None or state in _PAST_OK_STATES:
            return None
        return (
            f"depends_on_past is true for this task, but the previous task instance is in the state "
            f"'{state.value}' which is not a successful state."
        )

    def _run_latest_only(self, task: ResolvedTask, key: str) -> None:
        """Airflow's LatestOnlyOperator, without a launch: skip direct downstreams unless the latest run
        (`key`: the instance deciding, inside a mapped group for its own index). A manual run proceeds:
        in Airflow 3 every one, in Airflow 2 one externally triggered (not `dag.test()`'s)."""
        downstream = sorted(task.downstream)
        window, latest = self.state.observed.latest_window, False
        manual = self.state.run_type is RunType.MANUAL
        if manual and self.state.dag.spec.airflow_version == "3":
            reason, latest = "Manually triggered DAG_Run: allowing execution to proceed.", True
        elif manual and self.state.observed.externally_triggered:
            reason, latest = "Externally triggered DAG_Run: allowing execution to proceed.", True
        elif isinstance(window, Unanswered):
            return  # the custom timetable did not answer: decided once it does (the run says: Timetable)
        elif window is None:
            reason, latest = "Last scheduled execution: allowing execution to proceed.", True
        elif window[0] < self.state.now <= window[1]:
            reason, latest = "Latest, allowing execution to proceed.", True
        else:
            reason = (
                f"Not latest execution, skipping downstream (now {self.state.now.isoformat()} is not in "
                f"the latest window ({window[0].isoformat()}, {window[1].isoformat()}])."
            )
        follow = downstream if latest else []
        self.state.set(
            key,
            S.SUCCESS,
            f"LatestOnlyOperator: {reason}",
            follow_task_ids=follow,
            start_date=self.state.now,
            end_date=self.state.now,
            duration_seconds=0.0,
            try_number=self.state.tis[key].try_number + 1,
        )
        self.skip_all_except(key, follow)

    def skip_all_except(self, branch_key: str, follow: Iterable[str]) -> None:
        """Airflow's `SkipMixin.skip_all_except`: skip direct downstreams not on a followed path, at the
        branch instance's own map index (`zonda.passes.skips`).

        A direct downstream that is also downstream of a followed task (the join of an empty
        branch) is not skipped: its trigger rule decides.
        """
        followed = set(follow)
        to_skip = sorted(set(self.state.task(branch_key).downstream) - self._on_followed_paths(followed))
        reason = f"Branch {branch_key} followed {sorted(followed)}: this task is not on a followed path"
        self.skip_downstream(branch_key, to_skip, reason)

    def _on_followed_paths(self, follow: Iterable[str]) -> set[str]:
        """The followed tasks and everything downstream of them: what a branch does not skip."""
        followed = {task_id for task_id in follow if task_id in self.state.dag.tasks}
        return followed.union(*(descendants(self.state.dag, task_id) for task_id in followed))

    def skip_downstream(self, decider_key: str, to_skip: list[str], reason: str) -> None:
        """Skip the instances of `to_skip` the decision of task instance `decider_key` binds."""
        for key in skips.instances_to_skip(decider_key, to_skip, self.state.mapped.keys):
            if self.state.tis[key].state in (S.NONE, S.SCHEDULED):
                self.state.set(key, S.SKIPPED, reason, start_date=self.state.now, end_date=self.state.now)
