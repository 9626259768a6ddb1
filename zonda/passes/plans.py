"""What the run reconciler decides, as pure functions with `now` passed in.

- `start_run`: snapshot the DAG into a new run and work out its logical date, data interval and run
  id (or say why it cannot start: DAG missing or invalid).
- `observe` / `observe_run`: sort what the executor and the triggerer report into the current attempt
  of each task instance and the strays to stop or delete (the only place that decides what is a
  stray); `zonda.passes.compose.compose_pass` then decides the pass over them.
- `latest_window`: LatestOnlyOperator's window, from the run's timetable, as the DAG's Airflow computes it.
- `task_invocation` / `mapped_container_args`: what a launched try gets.

The controller gathers (API reads), calls these, and acts (creates, writes, posts Events). The DAG
reconciler's decisions are in `zonda.schedules.dag_plans`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from zonda.passes.container_mapping import mapped_container_args
from zonda.passes.decisions import AttemptPhase, Observation, ObservedAttempt, ObservedTrigger, Unanswered
from zonda.resources import conditions
from zonda.resources.dagrun_models import DagRunSpec, DagRunStatus
from zonda.resources.models import DagRunState, DagSpec, TaskInstanceState
from zonda.resources.run_events import RunEvent
from zonda.resources.run_types import RunType
from zonda.resources.states import FINISHED_RUN_STATES
from zonda.schedules import scheduling
from zonda.schedules.dag_plans import TimetableFailure, timetable_class, timetable_for, utc_interval
from zonda.specs import params
from zonda.specs.dags import DagInvalid, ResolvedDag, parse_dag_spec, resolve_dag
from zonda.specs.operator_registry import LATEST_ONLY_OPERATORS
from zonda.timetables import DataInterval, TimeRestriction, Timetable
from zonda.timetables.base import coerce_utc, pinned_clock

S = TaskInstanceState
#: Attempts the executor still runs: a stray in one of these phases is stopped.
_ALIVE = frozenset({AttemptPhase.PENDING, AttemptPhase.RUNNING})


LatestWindow = tuple[datetime, datetime] | None


@dataclass(frozen=True)
class DagRef:
    """The DAG a run is started from: its spec as stored, and its generation."""

    spec: Mapping[str, Any]
    generation: int | None


@dataclass(frozen=True)
class RunStart:
    """A run's status after `start_run`; `started` is False when it waits for its DAG (see `Ready`)."""

    status: DagRunStatus
    started: bool
    events: tuple[RunEvent, ...] = ()

    @property
    def timetable_failed(self) -> bool:
        """Not started because the DAG's custom timetable did not answer in time or raised."""
        ready = next((c for c in self.status.conditions if c.type == "Ready"), None)
        return ready is not None and ready.reason in ("TimetableTimeout", "TimetableError")


def start_run(
    spec: DagRunSpec,
    status: DagRunStatus,
    dag: DagRef | None,
    *,
    namespace: str,
    created_at: datetime,
    generation: int | None,
    now: datetime,
) -> RunStart:
    """Snapshot the DAG into a new run (editing the DAG later never changes this run).

    Its dates are `run_dates`'.
    A conf that, merged over the DAG's params, violates `paramsSchema` fails the run without starting
    it (Airflow refuses to create such a run; a DagRun created with kubectl cannot be refused), and so
    do dates whose interval leaves the calendar (a logical date at year 1 on a daily schedule).
    """
    if status.state in FINISHED_RUN_STATES:
        return RunStart(status=status, started=False)
    if dag is None:
        return _not_started(
            status, "DagNotFound", f"DAG {spec.dag_name!r} does not exist in namespace {namespace}", now
        )
    try:
        dag_spec = parse_dag_spec(dag.spec)
        resolve_dag(spec.dag_name, dag_spec)
    except (DagInvalid, ValueError, ImportError) as exc:
        return _not_started(status, "InvalidDag", f"DAG {spec.dag_name!r} is invalid: {exc}", now)
    class_path = timetable_class(dag.spec)
    try:
        timetable = timetable_for(dag_spec)
    except (DagInvalid, ValueError, ImportError) as exc:
        return _not_started(status, "InvalidDag", f"DAG {spec.dag_name!r} is invalid: {exc}", now)
    except Exception as exc:  # a custom timetable's constructor raised: the run waits, said on it
        if class_path is None:
            raise
        return timetable_not_answered(status, TimetableFailure.raised(class_path, exc), now)
    conf_errors = params.run_conf_errors(dag_spec.to_wire(), spec.conf)
    if conf_errors:
        return _failed_to_start(
            status, "InvalidConf", "conf does not match the DAG's params: " + "; ".join(conf_errors), now
        )
    try:
        dates = run_dates(spec, dag_spec, timetable, created_at=created_at)
    except OverflowError as exc:  # a date at year 1 or 9999 whose interval leaves the calendar
        given = spec.logical_date or (spec.data_interval.start if spec.data_interval else None)
        message = (
            f"the run's dates are out of range (logicalDate {given.isoformat() if given else None}): {exc}"
        )
        return _failed_to_start(status, "InvalidDates", message, now)
    except Exception as exc:  # a custom timetable's infer_manual_data_interval raised
        if class_path is None:
            raise
        return timetable_not_answered(status, TimetableFailure.raised(class_path, exc), now)
    conds = conditions.set_condition(
        status.conditions,
        type="Ready",
        status=True,
        reason="Started",
        message=f"DAG generation {dag.generation}",
        now=now,
    )
    started = status.model_copy(
        update={
            "dag_spec": dict(dag.spec),
            "dag_generation": dag.generation,
            "run_id": dates.run_id,
            "logical_date": dates.logical_date,
            "data_interval_start": dates.interval.start if dates.interval else None,
            "data_interval_end": dates.interval.end if dates.interval else None,
            "run_after": dates.run_after,
            "queued_at": status.queued_at or now,
            "state": status.state or DagRunState.QUEUED,
            "conditions": conds,
            "observed_generation": generation,
        }
    )
    return RunStart(status=started, started=True)


@dataclass(frozen=True)
class RunDates:
    """A run's dates as it starts: no logical date (and no interval) for an Airflow 3 manual run given
    none."""

    run_id: str
    logical_date: datetime | None
    interval: DataInterval | None
    run_after: datetime


def run_dates(spec: DagRunSpec, dag_spec: DagSpec, timetable: Timetable, *, created_at: datetime) -> RunDates:
    """The logical date, data interval, run_after and run id a run starts with.

    A spec's data interval (a scheduled or backfill run's) is kept. A manual run of an Airflow 3 DAG
    without a logical date has none, no data interval and its `run_after` (the trigger's time, else its
    creation), as Airflow 3.1's `TriggerDAGRunPostBody.validate_context` and `trigger_dag._trigger_dag`
    make it, with the run id of `Timetable.generate_run_id`: ``manual__<run_after>``; so has an Airflow 3
    DAG's asset-triggered run (``asset_triggered__<run_after>``, the newest event's time). Any other manual
    run gets the timetable's manual interval for its logical date or its creation time (Airflow 2's
    `dags trigger`), due then.
    """
    airflow3 = dag_spec.airflow_version == "3"
    if spec.data_interval is not None:
        interval = utc_interval(spec.data_interval.start, spec.data_interval.end)
        logical_date = coerce_utc(spec.logical_date or interval.start)
        manual = spec.run_type is RunType.MANUAL
        run_after = coerce_utc(spec.run_after or (logical_date if manual else interval.end))
        dated = run_id(spec.run_type, logical_date, run_after, airflow3)
        return RunDates(dated, logical_date, interval, run_after)
    undated = (RunType.MANUAL, RunType.ASSET_TRIGGERED)
    if spec.logical_date is None and spec.run_type in undated and airflow3:
        run_after = coerce_utc(spec.run_after or created_at)
        return RunDates(run_id(spec.run_type, None, run_after, airflow3), None, None, run_after)
    due = scheduling.manual_run(timetable, run_after=spec.logical_date or created_at)
    run_after = coerce_utc(spec.run_after or due.run_after)
    dated = run_id(spec.run_type, due.logical_date, run_after, airflow3)
    return RunDates(dated, due.logical_date, due.data_interval, run_after)


def run_id(run_type: RunType, logical_date: datetime | None, run_after: datetime, airflow3: bool) -> str:
    """Airflow's run id, which a try sees as `run_id`: ``<run type>__<moment in ISO 8601>``.

    Airflow 2.10 (`DagRun.generate_run_id`) takes the logical date; Airflow 3.3 takes `run_after`
    (`Timetable.generate_run_id`, `DagRun.generate_run_id`): a scheduled interval run's end, a
    trigger's time, `dag.test()`'s now. Airflow 3 adds a random ``_<8 letters>`` to a run without a
    logical date that the scheduler or `dag.test()` makes (an asset-triggered one); Zonda does not, the
    DagRun's name being unique already (hack/airflow_reference/run_ids.py).
    """
    moment = run_after if airflow3 or logical_date is None else logical_date
    return f"{run_type.value}__{moment.isoformat()}"


def timetable_not_answered(status: DagRunStatus, failure: TimetableFailure, now: datetime) -> RunStart:
    """A run whose start needs its DAG's custom timetable (its manual data interval), which did not
    answer within the controller's limit or raised: it waits, queued (`Ready=False`, the failure's
    reason, a Warning Event when it starts); the controller asks again after `TIMETABLE_RETRY`."""
    message = failure.says("the run starts once it answers" + ("" if failure.error else " in time"))
    conds = conditions.set_condition(
        status.conditions, type="Ready", status=False, reason=failure.reason, message=message, now=now
    )
    events: tuple[RunEvent, ...] = ()
    if conditions.condition_turned(status.conditions, conds, "Ready"):
        events = (RunEvent(failure.reason, message, warning=True),)
    new = status.model_copy(update={"conditions": conds, "state": DagRunState.QUEUED})
    return RunStart(status=new, started=False, events=events)


def timetable_condition(
    status: DagRunStatus, failure: TimetableFailure | None, now: datetime
) -> tuple[DagRunStatus, tuple[RunEvent, ...]]:
    """A started run's `Timetable` condition: False with the failure (a Warning Event when it starts)
    while the custom timetable its pass needs (LatestOnlyOperator's window) does not answer in time
    or raises; True again (`Answered`) once it does. A run that never needed it has none."""
    old = next((c for c in status.conditions if c.type == "Timetable"), None)
    if failure is None:
        if old is None or old.status == "True":
            return status, ()
        conds = conditions.set_condition(
            status.conditions, type="Timetable", status=True, reason="Answered", message="", now=now
        )
        return status.model_copy(update={"conditions": conds}), ()
    message = failure.says(
        "this run's pass waits until it answers (LatestOnlyOperator needs the run after this one)"
    )
    conds = conditions.set_condition(
        status.conditions, type="Timetable", status=False, reason=failure.reason, message=message, now=now
    )
    events: tuple[RunEvent, ...] = ()
    if conditions.condition_turned(status.conditions, conds, "Timetable"):
        events = (RunEvent(failure.reason, message, warning=True),)
    return status.model_copy(update={"conditions": conds}), events


def _not_started(status: DagRunStatus, reason: str, message: str, now: datetime) -> RunStart:
    conds = conditions.set_condition(
        status.conditions, type="Ready", status=False, reason=reason, message=message, now=now
    )
    events: tuple[RunEvent, ...] = ()
    if conditions.condition_changed(status.conditions, conds, "Ready"):
        events = (RunEvent(reason, message, warning=True),)
    new = status.model_copy(update={"conditions": conds, "state": DagRunState.QUEUED})
    return RunStart(status=new, started=False, events=events)


def _failed_to_start(status: DagRunStatus, reason: str, message: str, now: datetime) -> RunStart:
    """A run that can never start (its conf is invalid): failed, the reason on a condition and an Event."""
    conds = conditions.set_condition(
        status.conditions, type="Ready", status=False, reason=reason, message=message, now=now
    )
    new = status.model_copy(
        update={
            "conditions": conds,
            "state": DagRunState.FAILED,
            "end_date": status.end_date or now,
            "message": message,
        }
    )
    return RunStart(status=new, started=False, events=(RunEvent(reason, message, warning=True),))


def observe(
    status: DagRunStatus,
    attempts: Mapping[str, ObservedAttempt],
    triggers: Iterable[ObservedTrigger],
    **context: Any,
) -> Observation:
    """Sort the executor's attempts (by name) and the run's triggers into current ones and strays.

    An attempt is current when it is the `podName` of a queued or running task instance; any other
    attempt still alive is a stray (an earlier try, one cleared or marked by a user, or one an
    earlier pass created and never recorded) to stop, unless the pass launches that very try, which
    it then adopts (`zonda.passes.run_pass`); every non-current attempt is kept by name for that. A
    queued or running task instance whose attempt is not reported gets a `missing` one (a zombie).
    A trigger is current when it is the `triggerName` of a deferred task instance, else a stray to
    delete. `context` fills the rest of the `Observation` (previous run, LatestOnly window...).
    """
    expected = {ti.pod_name: task_id for task_id, ti in status.task_instances.items() if ti.pod_name}
    current: dict[str, ObservedAttempt] = {}
    stray_attempts: list[str] = []
    others: dict[str, ObservedAttempt] = {}
    for name, attempt in attempts.items():
        task_id = expected.get(name)
        ti = status.task_instances.get(task_id) if task_id is not None else None
        if task_id is not None and ti is not None and ti.state in (S.QUEUED, S.RUNNING):
            current[task_id] = attempt
            continue
        others[name] = attempt
        if attempt.phase in _ALIVE:
            stray_attempts.append(name)
    for task_id, ti in status.task_instances.items():
        if ti.state in (S.QUEUED, S.RUNNING) and task_id not in current:
            current[task_id] = ObservedAttempt(
                task_id=task_id,
                try_number=ti.try_number,
                name=ti.pod_name or "",
                phase=AttemptPhase.MISSING,
                message="its pod (or process) no longer exists",
            )
    current_triggers: dict[str, ObservedTrigger] = {}
    stray_triggers: list[str] = []
    for trigger in triggers:
        ti = status.task_instances.get(trigger.task_id)
        if ti is None or ti.state is not S.DEFERRED or ti.trigger_name != trigger.name:
            stray_triggers.append(trigger.name)
        else:
            current_triggers[trigger.task_id] = trigger
    return Observation(
        attempts=current,
        stray_attempts=tuple(stray_attempts),
        other_attempts=others,
        triggers=current_triggers,
        stray_triggers=tuple(stray_triggers),
        **context,
    )


def observe_run(
    dag_spec: DagSpec,
    status: DagRunStatus,
    attempts: Mapping[str, ObservedAttempt],
    triggers: Iterable[ObservedTrigger],
    *,
    now: datetime,
    window: LatestWindow | Unanswered = Unanswered.ASK,
    **context: Any,
) -> Observation:
    """What a pass over a run observes, as the controller and `DAG.test()` both gather it: `observe`,
    with the LatestOnly window (`window`, or worked out for `now` when not given); `context` as
    `observe`'s (previous runs...)."""
    if window is Unanswered.ASK:
        window = latest_window(dag_spec, status, now)
    return observe(status, attempts, triggers, latest_window=window, **context)


def needs_latest_window(dag: ResolvedDag) -> bool:
    """Whether a pass over the DAG's runs needs the timetable's next run: only a LatestOnlyOperator
    does (a custom timetable is not asked on every pass of every run for nothing)."""
    return any(task.operator in LATEST_ONLY_OPERATORS for task in dag.tasks.values())


def latest_window(dag_spec: DagSpec, status: DagRunStatus, now: datetime) -> LatestWindow:
    """`ask_latest_window`, None when the timetable raises (`DAG.test()`: the run proceeds as the last
    scheduled one; the controller asks `ask_latest_window` itself and reports a custom timetable that
    raises or hangs)."""
    try:
        return ask_latest_window(dag_spec, status, now)
    except Exception:  # a custom timetable that cannot answer: LatestOnly then treats the run as latest
        return None


def ask_latest_window(dag_spec: DagSpec, status: DagRunStatus, now: datetime) -> LatestWindow:
    """LatestOnlyOperator's "is this the latest run" window `(left, right]` for the run's interval, as the
    Airflow the DAG was written for computes it; None when the timetable has no run after this one
    (the run then proceeds as the last scheduled one).

    Airflow 2.10 (`LatestOnlyOperator.choose_branch`): the interval of the run after this one,
    `dag.next_dagrun_info(interval, restricted=False)`. Airflow 3 (the standard provider's
    `LatestOnlyOperator._get_compare_dates`): from the end of a run inside this interval (else this
    interval's start) to the end of the first run at or after this interval's end, so a zero-length
    interval (`CronTriggerTimetable`, Airflow 3's cron default) has the window up to the next run."""
    if status.data_interval_start is None or status.data_interval_end is None:
        return None
    interval = utc_interval(status.data_interval_start, status.data_interval_end)
    timetable = timetable_for(dag_spec)
    with pinned_clock(coerce_utc(now)):
        if dag_spec.airflow_version != "3":
            info = timetable.next_dagrun_info(
                last_automated_data_interval=interval,
                restriction=TimeRestriction(earliest=None, latest=None, catchup=True),
            )
            return (info.data_interval.start, info.data_interval.end) if info else None
        before = timetable.next_dagrun_info(
            last_automated_data_interval=interval,
            restriction=TimeRestriction(
                earliest=None, latest=interval.end - timedelta(microseconds=1), catchup=True
            ),
        )
        after = timetable.next_dagrun_info(
            last_automated_data_interval=interval,
            restriction=TimeRestriction(earliest=interval.end, latest=None, catchup=True),
        )
    if after is None:
        return None
    return (before.data_interval.end if before else interval.start, after.data_interval.end)


__all__ = [
    "DagRef",
    "LatestWindow",
    "RunStart",
    "Unanswered",
    "ask_latest_window",
    "latest_window",
    "mapped_container_args",
    "needs_latest_window",
    "observe",
    "observe_run",
    "start_run",
    "timetable_condition",
    "timetable_not_answered",
]
