"""Mapped task instances within one scheduler pass (`zonda.passes.run_pass.RunPass`).

Airflow's `DagRun._expand_mapped_task_if_needed` and `TaskMap` in a pure form: a mapped task has one
task instance under its own id (Airflow's ``map_index=-1``) until its trigger rule lets it run; then
the XCom lengths its upstreams reported decide how many instances it gets (``task_id[i]``, see
`zonda.specs.mapping.ti_key`). Zero items skip it, more than `max_map_length` fail it. A mapped task whose
instances were all cleared expands again (Airflow's `_revise_map_indexes_if_mapped`): indexes beyond
the new length become ``removed``, new ones are added, the others keep their try numbers.

Downstream tasks count every instance of a mapped upstream (Airflow's trigger rule counts task
instances); `max_active_tis_per_dagrun` is counted per instance by `zonda.passes.pools.admit`.
"""

from __future__ import annotations

from zonda.passes import status_budget
from zonda.passes.pass_state import PassState
from zonda.resources.dagrun_models import TaskInstanceStatus
from zonda.resources.models import TaskInstanceState
from zonda.resources.run_events import RunEvent
from zonda.specs import mapping
from zonda.specs.dags import ResolvedTask
from zonda.tries import xcoms

S = TaskInstanceState
_FAILED = frozenset({S.FAILED, S.UPSTREAM_FAILED})


class MappedInstances:
    """The pass's view of task instances by task: one key, or a mapped task's ``task_id[i]`` keys."""

    def __init__(self, state: PassState) -> None:
        self.state = state
        self.indexed: dict[str, list[str]] = {}
        for key in state.tis:
            task_id, index = mapping.split_key(key)
            if index >= 0:
                self.indexed.setdefault(task_id, []).append(key)
        for keys in self.indexed.values():
            keys.sort(key=lambda key: mapping.split_key(key)[1])

    def keys(self, task_id: str, *, removed: bool = False) -> list[str]:
        """The task's instance keys in map-index order; ``removed`` mapped instances only if asked."""
        tis = self.state.tis
        own = [task_id] if task_id in tis else []
        mapped = self.indexed.get(task_id, ())
        return own + [key for key in mapped if removed or tis[key].state is not S.REMOVED]

    def awaits_expansion(self, task: ResolvedTask) -> bool:
        """A mapped task none of whose instances has started: its count is (re)decided when it may run."""
        keys = self.keys(task.task_id)
        return (
            mapping.is_mapped(task.expand)
            and bool(keys)
            and all(self.state.tis[key].state is S.NONE for key in keys)
        )

    def upstream_states(self, task: ResolvedTask, key: str | None = None) -> dict[str, TaskInstanceState]:
        """Every direct upstream task instance's state, each mapped instance apart (as Airflow counts);
        instance ``i`` of a mapped task group's task counts only instance ``i`` of the group's others."""
        index = -1 if key is None else mapping.split_key(key)[1]
        states: dict[str, TaskInstanceState] = {}
        for up in task.upstream:
            same = mapping.ti_key(up, index)
            keys = [same] if index >= 0 and up in task.map_peers and same in self.state.tis else self.keys(up)
            states.update((each, self.state.tis[each].state) for each in keys)
        return states

    def expand_in_group(self, task: ResolvedTask) -> list[str] | None:
        """A mapped task group's task expands as soon as the group's sources succeeded, before its
        trigger rule (Airflow's `_expand_mapped_task_if_needed`), so each index waits for its own
        upstream index. Its instances waiting to be decided, or None: not yet (or it cannot expand,
        which the whole-task path decides and explains once its trigger rule lets it run)."""
        if task.mapped_group is None or task.expand is None:
            return None
        for source in mapping.source_task_ids(task.expand):
            keys = self.keys(source)
            if not keys or any(self.state.tis[key].state is not S.SUCCESS for key in keys):
                return None
        try:
            length = mapping.expansion_length(task.expand, self.xcom_length)
        except mapping.MappingError:
            return None
        if length == 0 or self._length_problem(task, length) is not None:
            return None
        if self._revise(task, length):
            self.state.events.append(
                RunEvent("TaskExpanded", f"Task {task.task_id} expanded to {length} mapped task instance(s)")
            )
        return [key for key in self.keys(task.task_id) if self.state.tis[key].state is S.NONE]

    def xcom_length(self, task_id: str, key: str) -> int | None:
        """What Airflow's `TaskMap` holds: the length of a list or dict XCom; for a mapped upstream, how
        many of its instances returned a value (mapping over a mapped task's results)."""
        tis, keys = self.state.tis, self.keys(task_id)
        if keys and keys != [task_id]:
            if key != xcoms.RETURN_KEY:
                return None
            return sum(1 for each in keys if tis[each].state is S.SUCCESS and tis[each].xcom is not None)
        ti = tis.get(task_id)
        if ti is None:
            return None
        if ti.xcom_lengths and key in ti.xcom_lengths:
            return ti.xcom_lengths[key]
        value = ti.xcom if key == xcoms.RETURN_KEY else (ti.xcoms or {}).get(key)
        if isinstance(value, list | dict) and not xcoms.is_stored(value):
            return len(value)
        return None

    # ------------------------------------------------------------------------------ the expansion

    def expand(self, task: ResolvedTask, reason: str) -> None:
        """The task may run: give it one instance per item, or settle it when it cannot expand."""
        assert task.expand is not None
        waiting = [key for key in self.keys(task.task_id) if self.state.tis[key].state is S.NONE]
        problem = self._source_problem(task)
        if problem is not None:
            state, why = problem
            for key in waiting:
                self.state.set(key, state, why, end_date=self.state.now)
            return
        try:
            length = mapping.expansion_length(task.expand, self.xcom_length)
        except mapping.MappingError as error:
            self._fail(waiting, f"Cannot expand the mapped task: {error}")
            return
        if (too_many := self._length_problem(task, length)) is not None:
            self._fail(waiting, too_many)
            return
        if length == 0:
            self._expand_to_nothing(task)
            return
        if self._revise(task, length):
            self.state.events.append(
                RunEvent("TaskExpanded", f"Task {task.task_id} expanded to {length} mapped task instance(s)")
            )
        for key in self.keys(task.task_id):
            if self.state.tis[key].state is not S.NONE or self.state.readiness.skip_if_not_followed(
                task, key, [key]
            ):
                continue  # a mapped branch's instance i did not follow this task: instance i is skipped
            if (past_problem := self.state.readiness.past_problem(task, key)) is not None:
                self.state.update(key, reason=past_problem)  # waits: the previous run's same index
            else:
                self.state.set(key, S.SCHEDULED, reason)

    def _length_problem(self, task: ResolvedTask, length: int) -> str | None:
        """Too many instances for `max_map_length`, or for the run's status budget."""
        if (too_many := mapping.check_length(length, self.state.limits.max_map_length)) is not None:
            return too_many
        # A mapped group's tasks expand to the same length: counted together, all or none fit.
        group = [
            t
            for t in self.state.dag.tasks.values()
            if task.mapped_group and t.mapped_group == task.mapped_group
        ]
        new = sum(max(0, length - len(self.indexed.get(t.task_id, ()))) for t in group or [task])
        if new == 0:
            return None  # expanding again within the instances it had: the status grows no further
        status = self.state.status.model_copy(update={"task_instances": self.state.tis}).to_wire()
        return status_budget.expansion_problem(
            length,
            new,
            status,
            self.state.limits.status_budget_bytes,
            task.mapped_group,
            inline_limit=self.state.limits.inline_task_instances,
        )

    def _source_problem(self, task: ResolvedTask) -> tuple[TaskInstanceState, str] | None:
        """An upstream to map over that did not succeed (a rule such as all_done let the task run)."""
        for source in sorted(mapping.source_task_ids(task.expand)):
            states = {self.state.tis[key].state for key in self.keys(source)}
            if S.SUCCESS in states:
                continue
            why = f"Upstream task {source} did not succeed, so there is nothing to map over"
            return (S.UPSTREAM_FAILED if states & _FAILED else S.SKIPPED), why
        return None

    def _fail(self, keys: list[str], reason: str) -> None:
        for key in keys:
            self.state.set(key, S.FAILED, reason, end_date=self.state.now)

    def _expand_to_nothing(self, task: ResolvedTask) -> None:
        """Airflow skips a mapped task with nothing to map over (its ``map_index=-1`` instance)."""
        task_id = task.task_id
        for key in self.keys(task_id):
            if key != task_id:
                self.state.set(
                    key, S.REMOVED, "The mapped task now expands to nothing", end_date=self.state.now
                )
        if task_id not in self.state.tis:
            self.state.tis[task_id] = TaskInstanceStatus(max_tries=task.retries)
        self.state.set(
            task_id, S.SKIPPED, "Mapped over zero items: the mapped task is skipped", end_date=self.state.now
        )

    def _revise(self, task: ResolvedTask, length: int) -> bool:
        """Instances 0..length-1 (kept, revived or added); any beyond become ``removed``. Whether the
        expansion changed (a task whose instances all wait on the past is expanded again, unchanged)."""
        task_id, tis = task.task_id, self.state.tis
        changed = tis.pop(task_id, None) is not None  # Airflow turns map_index=-1 into the mapped ones
        known = self.indexed.setdefault(task_id, [])
        for key in known:
            if mapping.split_key(key)[1] >= length and tis[key].state is not S.REMOVED:
                changed = True
                self.state.set(
                    key,
                    S.REMOVED,
                    f"The mapped task now expands to {length} instance(s)",
                    end_date=self.state.now,
                )
            elif mapping.split_key(key)[1] < length and tis[key].state is S.REMOVED:
                changed = True
                self.state.set(key, S.NONE, "The mapped task expands to this index again")
        for index in range(len(known), length):
            key = mapping.ti_key(task_id, index)
            tis[key] = TaskInstanceStatus(max_tries=task.retries)
            known.append(key)
            changed = True
        return changed
