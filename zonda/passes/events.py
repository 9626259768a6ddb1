"""Which of a pass's `RunEvent`s become Kubernetes Events: one per change a user needs, the rest folded.

`decide` explains every state change with a `RunEvent`; posting each as an Event cost about 3.6 API
writes per task instance, more than the work itself. What `kubectl describe dagrun` must still tell:

- the run's own story: RunStarted, RunSucceeded, RunFailed, RunTimedOut — each its own Event;
- what went wrong: every warning (TaskFailed, TaskUpForRetry, TaskUpstreamFailed) — each its own;
- what finished or waits: one Event per pass for all other task changes, its reason the weightiest
  (TaskDeferred before TaskSucceeded...), its note every change of the pass in order, progress
  (scheduled, queued, running) included;
- progress alone (a pod seen running, a retry queued) posts nothing: the status already says it.

Across passes (`foldable`, `fits`, `fold`, `close`): on a chain each pass has one outcome, so the
per-pass aggregate was still one Event per task instance. The controller keeps a run's outcomes until
the run's next Event of its own kind (a warning, the run's end) or at most `--event-fold-seconds`
(30 s) after the first, and posts them as one Event (client-go's EventCorrelator folds similar Events
the same way): a window of 2 s folded nothing with 100 runs at once, where one run's outcomes are
seconds apart. A warning posts what was kept first, so the order `kubectl describe` shows is the
order things happened, and no outcome is left out of a note (a full note starts the next Event). A
run's successful end carries what was kept in its own note (one Event, not two), and a run whose whole
life is one pass (EmptyOperators) posts one `RunSucceeded` telling it all. Outcomes that leave a task
waiting (`TaskDeferred`, `TaskUpForReschedule`) are never kept: a user looks for them while it waits.

Purely computational; the reconciler posts the result in order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from zonda.resources.dagrun_models import DagRunStatus
from zonda.resources.models import TaskInstanceState
from zonda.resources.run_events import RunEvent

#: Progress a user reads in the status; an Event only as part of a pass's aggregate.
PROGRESS_REASONS = frozenset({"TaskScheduled", "TaskQueued", "TaskRunning"})
#: The aggregate's reason: the first of these present in the pass.
_WEIGHT = (
    "TaskDeferred",
    "TaskUpForReschedule",
    "TaskRestarting",
    "TaskRemoved",
    "TaskReset",
    "TaskSkipped",
    "TaskSucceeded",
)
_MAX_NOTE = 1024  # what the Events API keeps of a note


def events_to_post(events: Sequence[RunEvent]) -> list[RunEvent]:
    """The Events to post for one pass, in the order a user should read them."""
    run_events = [event for event in events if event.reason.startswith("Run")]
    task_events = [event for event in events if not event.reason.startswith("Run")]
    starts = [event for event in run_events if event.reason == "RunStarted"]
    ends = [event for event in run_events if event.reason != "RunStarted"]
    warnings = [event for event in task_events if event.warning]
    normal = [event for event in task_events if not event.warning]
    outcomes = [event for event in normal if event.reason not in PROGRESS_REASONS]
    aggregate: list[RunEvent] = []
    if len(normal) == 1 and outcomes:
        aggregate = outcomes
    elif outcomes:
        reasons = {event.reason for event in outcomes}
        reason = next((name for name in _WEIGHT if name in reasons), outcomes[0].reason)
        note = "; ".join(event.message for event in normal)
        if len(note) > _MAX_NOTE:
            note = note[: _MAX_NOTE - 20] + f" ... ({len(normal)} changes)"
        aggregate = [RunEvent(reason, note)]
    if starts and ends and not warnings and not any(event.warning for event in ends):
        whole = [*starts, *aggregate, *ends]  # the run's whole life in one pass: one Event tells it
        if len(_note(whole)) <= _MAX_NOTE:
            return [RunEvent(ends[-1].reason, _note(whole))]
    return [*starts, *warnings, *aggregate, *ends]


#: Outcomes after which the task waits (for a trigger, for its next poke): posted at once.
_WAITING = frozenset({"TaskDeferred", "TaskUpForReschedule"})


def foldable(event: RunEvent) -> bool:
    """A task outcome that may share an Event with the next passes' (not a warning, not the run's,
    not one that leaves its task waiting)."""
    return event.reason.startswith("Task") and not event.warning and event.reason not in _WAITING


def closes(event: RunEvent) -> bool:
    """A run's end that may carry the outcomes kept before it in its own note (not a warning)."""
    return event.reason.startswith("Run") and event.reason != "RunStarted" and not event.warning


def close(kept: Sequence[RunEvent], end: RunEvent) -> list[RunEvent]:
    """The Events for outcomes `kept` (foldable, in order) then the run's end `end` (`closes`): one,
    the end's reason with every message, if its note fits; else the fold, then the end."""
    if not kept:
        return [end]
    if len(note := _note([*kept, end])) <= _MAX_NOTE:
        return [RunEvent(end.reason, note)]
    return [fold(kept), end]


def fits(kept: Sequence[RunEvent], event: RunEvent) -> bool:
    """Whether `event`'s message still fits whole in the note of `kept` folded."""
    return len(_note([*kept, event])) <= _MAX_NOTE


def fold(kept: Sequence[RunEvent]) -> RunEvent:
    """One Event for foldable Events kept in order: the weightiest reason, every message."""
    if len(kept) == 1:
        return kept[0]
    reasons = {event.reason for event in kept}
    reason = next((name for name in _WEIGHT if name in reasons), kept[0].reason)
    note = _note(kept)
    if len(note) > _MAX_NOTE:  # one pass's own aggregate may be full already
        note = note[: _MAX_NOTE - 20] + f" ... ({len(kept)} Events)"
    return RunEvent(reason, note)


def _note(events: Sequence[RunEvent]) -> str:
    return "; ".join(event.message for event in events)


@dataclass(frozen=True)
class StateChange:
    """One state change of a run (`task` None) or of one of its task instances, for the log."""

    task: str | None
    try_number: int | None
    old: str
    new: str
    reason: str | None


def state_changes(old: DagRunStatus, new: DagRunStatus) -> list[StateChange]:
    """Every state change from `old` to `new`: the run's first, then its task instances' in DAG order."""
    changes: list[StateChange] = []
    if old.state != new.state:
        changes.append(StateChange(None, None, _name(old.state), _name(new.state), new.message))
    for task_id, ti in new.task_instances.items():
        before = old.task_instances.get(task_id)
        if before is None and ti.state is TaskInstanceState.NONE:
            continue  # created, nothing happened yet
        if before is None or before.state is not ti.state:
            old_state = before.state.value if before is not None else "none"
            changes.append(StateChange(task_id, ti.try_number, old_state, ti.state.value, ti.reason))
    return changes


def _name(state: object) -> str:
    return str(getattr(state, "value", state)) if state is not None else "none"


__all__ = [
    "PROGRESS_REASONS",
    "StateChange",
    "close",
    "closes",
    "events_to_post",
    "fits",
    "fold",
    "foldable",
    "state_changes",
]
