"""Backfills (Airflow's `airflow backfill create` / `dags backfill`): which runs to create now (pure).

A Backfill names a DAG and a range of logical dates. `plan_backfill` lists the DAG timetable's data
intervals whose logical date falls in the range (and is due by `now`), leaves out the dates that
`reprocessBehavior` says to skip, and returns the next runs to create, in order (newest first with
`runBackwards`), so that no more than `maxActiveRuns` of the backfill's runs are unfinished.

Run names are deterministic (`<backfill>-backfill-<logical date>`): a restarted controller finds the
runs it created and creates none twice. A date is decided once its turn comes, from the DAG's runs
then: skipped when another run for it is unfinished, or has one under `reprocessBehavior: none`, or
one that did not fail under `failed`. Pausing or deleting the backfill cancels what has not started
by never creating it; runs already created go on (as Airflow lets running backfill runs finish).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from zonda.resources import conditions
from zonda.resources.backfill_models import BackfillSpec, BackfillState, BackfillStatus, ReprocessBehavior
from zonda.resources.models import DagRunState, DagSpec
from zonda.resources.run_types import RunType
from zonda.resources.states import FINISHED_RUN_STATES
from zonda.schedules import scheduling
from zonda.schedules.dag_plans import TIMETABLE_RETRY, RunRef, TimetableFailure, timetable_for
from zonda.timetables.base import DataInterval, coerce_utc

#: At most this many logical dates per backfill (a typo in a range should not make a million runs).
MAX_DATES = 10_000


@dataclass(frozen=True)
class BackfillRun:
    """A run the backfill creates: its name, logical date and data interval."""

    name: str
    logical_date: datetime
    data_interval_start: datetime
    data_interval_end: datetime


@dataclass(frozen=True)
class BackfillPlan:
    status: BackfillStatus
    to_create: tuple[BackfillRun, ...] = ()
    events: tuple[tuple[str, str], ...] = field(default=())  # (reason, message)
    #: Warning Events to post whatever the state did (a condition that turned False).
    warnings: tuple[tuple[str, str], ...] = field(default=())
    #: When to look again (None: when one of the DAG's runs changes).
    wake_at: datetime | None = None


def timetable_failed(
    status: BackfillStatus, failure: TimetableFailure, *, generation: int | None, now: datetime
) -> BackfillPlan:
    """The DAG's custom timetable did not list the backfill's dates within the controller's limit, or
    raised: nothing is created (no run from a guess), the status keeps its counts, `Ready=False` names
    the class and the limit or the exception (a Warning Event when it turns False), and the dates are
    asked again after `TIMETABLE_RETRY`; the other backfills and DAGs go on."""
    message = failure.says("no run of this backfill is created until it lists the dates")
    conds = conditions.set_condition(
        status.conditions,
        type="Ready",
        status=False,
        reason=failure.reason,
        message=message,
        now=now,
        generation=generation,
    )
    warnings: tuple[tuple[str, str], ...] = ()
    if conditions.condition_turned(status.conditions, conds, "Ready"):
        warnings = ((failure.reason, message),)
    new = status.model_copy(update={"conditions": conds, "observed_generation": generation})
    return BackfillPlan(status=new, warnings=warnings, wake_at=now + TIMETABLE_RETRY)


def listed_again(plan: BackfillPlan, previous: BackfillStatus, now: datetime) -> BackfillPlan:
    """The plan's status with the conditions kept, and `Ready` True again (`DatesListed`) once the
    timetable that failed to list the dates has listed them."""
    ready = next((c for c in previous.conditions if c.type == "Ready"), None)
    if ready is None:
        return plan
    conds = previous.conditions
    if ready.status != "True":
        conds = conditions.set_condition(
            conds, type="Ready", status=True, reason="DatesListed", message="", now=now
        )
    return dataclasses.replace(plan, status=plan.status.model_copy(update={"conditions": conds}))


def run_name(backfill_name: str, logical_date: datetime) -> str:
    """The deterministic name of the backfill's run for `logical_date`."""
    return scheduling.dagrun_name(backfill_name, logical_date, RunType.BACKFILL.value)


def _skip_reason(others: Sequence[RunRef], behavior: ReprocessBehavior) -> str | None:
    """Why a date with these (not the backfill's own) runs is left alone; None to run it."""
    if not others:
        return None
    if any(run.state not in FINISHED_RUN_STATES for run in others):
        return "a run for it is not finished"
    if behavior is ReprocessBehavior.NONE:
        return "it has a run (reprocessBehavior: none)"
    if behavior is ReprocessBehavior.FAILED and any(run.state != DagRunState.FAILED for run in others):
        return "its run did not fail (reprocessBehavior: failed)"
    return None


@dataclass(frozen=True)
class BackfillDates:
    """The range's due data intervals, oldest first, and the first one past `MAX_DATES` if any."""

    due: tuple[scheduling.DueRun, ...]
    beyond_limit: datetime | None = None


def backfill_dates(spec: BackfillSpec, dag_spec: DagSpec, *, now: datetime) -> BackfillDates:
    """The timetable's work for a backfill, apart from the plan: 10,000 daily dates take seconds of
    CPU, so the controller keeps them once they no longer depend on `now` (`dates_are_final`) rather
    than listing them again on every change of the DAG's runs."""
    due, decision = scheduling.catchup_backlog(
        timetable_for(dag_spec),
        last_automated_data_interval=None,
        start_date=coerce_utc(spec.from_date),
        end_date=coerce_utc(spec.to_date),
        catchup=True,
        now=now,
        limit=MAX_DATES,
    )
    beyond = decision.due.logical_date if decision.due is not None and len(due) >= MAX_DATES else None
    return BackfillDates(tuple(due), beyond)


def dates_are_final(dates: BackfillDates, spec: BackfillSpec, *, now: datetime) -> bool:
    """Whether listing the range again later gives the same dates, so they can be kept: the range is
    wholly in the past, or it is already past `MAX_DATES` (its first 10,001 dates from a fixed start are
    all due, and a later `now` only adds dates after them: the range fails the same way)."""
    return coerce_utc(spec.to_date) <= now or dates.beyond_limit is not None


def plan_backfill(
    name: str,
    spec: BackfillSpec,
    dag_spec: DagSpec | None,
    *,
    runs: Sequence[RunRef],
    generation: int | None,
    now: datetime,
    dates: BackfillDates | None = None,
) -> BackfillPlan:
    """The backfill's status and the runs to create now. `runs` are the DAG's runs (any type);
    `dates`, `backfill_dates` for this spec and DAG when the caller kept them.

    A range of more than `MAX_DATES` logical dates fails, naming the first date past the limit,
    rather than quietly running only the first ones."""

    def failed(message: str) -> BackfillPlan:
        status = BackfillStatus(observed_generation=generation, state=BackfillState.FAILED, message=message)
        return BackfillPlan(status=status, events=(("BackfillFailed", message),))

    if dag_spec is None:
        return failed(f"DAG {spec.dag_name!r} does not exist")
    start, end = coerce_utc(spec.from_date), coerce_utc(spec.to_date)
    if start > end:
        return failed(f"fromDate {start.isoformat()} is after toDate {end.isoformat()}")
    dates = dates or backfill_dates(spec, dag_spec, now=now)
    if dates.beyond_limit is not None:
        return failed(
            f"the range holds more than {MAX_DATES:,} logical dates (the next after the "
            f"{MAX_DATES:,}th is {dates.beyond_limit.isoformat()}): split it into smaller backfills"
        )
    intervals = list(reversed(dates.due)) if spec.run_backwards else list(dates.due)
    by_name = {run.name: run for run in runs}
    by_interval: dict[DataInterval, list[RunRef]] = {}
    for run in runs:
        if run.data_interval is not None:
            by_interval.setdefault(run.data_interval, []).append(run)
    counts = {"created": 0, "running": 0, "succeeded": 0, "failed": 0, "skipped": 0}
    pending: list[BackfillRun] = []
    planned: list[datetime] = []
    for due in intervals:
        own_name = run_name(name, due.logical_date)
        own = by_name.get(own_name)
        if own is None:
            others = by_interval.get(due.data_interval, [])
            if _skip_reason(others, spec.reprocess_behavior) is not None:
                counts["skipped"] += 1
                continue
            pending.append(
                BackfillRun(own_name, due.logical_date, due.data_interval.start, due.data_interval.end)
            )
        else:
            counts["created"] += 1
            if own.state == DagRunState.SUCCESS:
                counts["succeeded"] += 1
            elif own.state == DagRunState.FAILED:
                counts["failed"] += 1
            else:
                counts["running"] += 1
        planned.append(due.logical_date)
    total = len(planned)
    room = max(spec.max_active_runs - counts["running"], 0)
    creating: tuple[BackfillRun, ...] = ()
    if spec.dry_run:
        state = BackfillState.DRY_RUN
    elif spec.paused:
        state = BackfillState.PAUSED
    else:
        creating = tuple(pending[:room])
        counts["created"] += len(creating)
        counts["running"] += len(creating)
        done = not pending and counts["running"] == 0
        state = BackfillState.COMPLETED if done else BackfillState.RUNNING
    remaining = pending[len(creating) :]
    finished = counts["succeeded"] + counts["failed"]
    status = BackfillStatus(
        observed_generation=generation,
        state=state,
        total=total,
        progress=f"{finished}/{total}",
        next_logical_date=remaining[0].logical_date if remaining else None,
        planned=planned if spec.dry_run else [],
        message=_message(state, total, counts, spec),
        **counts,
    )
    events = tuple(
        ("DagRunCreated", f"created {run.name} for logical date {run.logical_date.isoformat()}")
        for run in creating
    )
    return BackfillPlan(status=status, to_create=creating, events=events)


def _message(state: BackfillState, total: int, counts: dict[str, int], spec: BackfillSpec) -> str:
    skipped = f", {counts['skipped']} skipped (reprocessBehavior: {spec.reprocess_behavior})"
    if state is BackfillState.DRY_RUN:
        return f"dry run: {total} runs would be created{skipped}"
    if state is BackfillState.COMPLETED:
        return f"{counts['succeeded']} succeeded, {counts['failed']} failed of {total}{skipped}"
    if state is BackfillState.PAUSED:
        return f"paused: {counts['created']} of {total} runs created{skipped}"
    active = f"{counts['running']} running (maxActiveRuns {spec.max_active_runs})"
    return f"{active}, {counts['created']} of {total} created{skipped}"
