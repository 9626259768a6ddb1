"""`zonda.passes.plans`: the DAG scheduling plan, a run's start, sorting reports into current and strays.

The controller used to decide these inline; here each is a table of situations against a pure
function with `now` passed in. The cluster tier (tests/cluster/test_controller.py) proves the
reconcilers carry the plans out.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from zonda.passes import plans
from zonda.passes.decisions import AttemptPhase, ObservedAttempt, ObservedTrigger
from zonda.resources.dagrun_models import DagRunSpec, DagRunStatus, TaskInstanceStatus
from zonda.resources.models import DagRunState, DagSpec, DagStatus, TaskInstanceState
from zonda.resources.run_types import RunType
from zonda.schedules import dag_plans
from zonda.timetables import DataInterval
from zonda.timetables.base import coerce_utc

S = TaskInstanceState
NOW = datetime(2026, 1, 10, 12, 30, tzinfo=UTC)
CREATED = datetime(2026, 1, 1, tzinfo=UTC)


def dag_spec(**fields: Any) -> dict[str, Any]:
    spec = {"tasks": [{"id": "t", "operator": "BashOperator", "args": {"bash_command": "true"}}]}
    return spec | fields


def day(n: int) -> datetime:
    return datetime(2026, 1, n, tzinfo=UTC)


def scheduled_run(n: int, state: DagRunState | None = DagRunState.SUCCESS) -> dag_plans.RunRef:
    return dag_plans.RunRef(
        name=f"d-{n}",
        created_at=day(n + 1),
        run_type=RunType.SCHEDULED,
        state=state,
        data_interval=DataInterval(coerce_utc(day(n)), coerce_utc(day(n + 1))),
    )


def plan(
    spec: dict[str, Any], runs: tuple[dag_plans.RunRef, ...] = (), status: DagStatus | None = None
) -> dag_plans.DagPlan:
    return dag_plans.plan_dag(
        "d", spec, status=status or DagStatus(), generation=3, created_at=CREATED, runs=runs, now=NOW
    )


def condition(status: DagStatus, type: str) -> tuple[str, str]:
    found = next(c for c in status.conditions if c.type == type)
    return found.status, found.reason


# ------------------------------------------------------------------------------------------- DAGs


def test_catchup_creates_the_whole_backlog_oldest_first_and_says_what_comes_next() -> None:
    result = plan(dag_spec(schedule="@daily", startDate="2026-01-07T00:00:00Z"))
    assert [due.logical_date.day for due in result.runs_to_create] == [7, 8, 9]
    assert result.status.next_logical_date == day(10)
    assert result.status.next_run_after == day(11)
    assert result.wake_at == day(11)
    assert result.status.active_runs == 3
    assert result.status.last_automated_data_interval_end == day(10)
    assert condition(result.status, "Ready") == ("True", "Scheduled")
    assert condition(result.status, "Valid") == ("True", "Valid")
    assert result.status.observed_generation == 3


def test_max_active_runs_holds_the_backlog_back_and_shows_the_held_run_as_next() -> None:
    result = plan(dag_spec(schedule="@daily", startDate="2026-01-07T00:00:00Z", maxActiveRuns=2))
    assert [due.logical_date.day for due in result.runs_to_create] == [7, 8]
    assert result.status.next_logical_date == day(9)
    assert result.wake_at is None  # woken when a run finishes
    assert condition(result.status, "Ready") == ("True", "MaxActiveRuns")


def test_the_newest_automated_run_is_where_the_timetable_continues() -> None:
    runs = [scheduled_run(7), scheduled_run(8, DagRunState.RUNNING)]
    manual = dag_plans.RunRef(
        "d-manual", day(9) + timedelta(hours=1), RunType.MANUAL, DagRunState.RUNNING, None
    )
    result = plan(dag_spec(schedule="@daily", startDate="2026-01-01T00:00:00Z"), (*runs, manual))
    assert [due.logical_date.day for due in result.runs_to_create] == [9]
    assert result.status.active_runs == 3
    assert (result.status.last_run, result.status.last_run_state) == ("d-manual", DagRunState.RUNNING)


def test_a_paused_dag_creates_nothing_and_says_so() -> None:
    result = plan(dag_spec(schedule="@daily", paused=True))
    assert result.runs_to_create == ()
    assert condition(result.status, "Ready") == ("False", "Paused")


def test_a_dag_without_schedule_is_manual_only() -> None:
    result = plan(dag_spec())
    assert (result.runs_to_create, result.wake_at) == ((), None)
    assert condition(result.status, "Ready") == ("True", "ManualOnly")


def test_an_invalid_dag_is_not_scheduled_and_says_why_once() -> None:
    spec = dag_spec(schedule="@dayly")
    first = plan(spec)
    assert first.runs_to_create == ()
    assert condition(first.status, "Valid") == ("False", "InvalidSpec")
    assert condition(first.status, "Ready") == ("False", "InvalidSpec")
    assert [e.reason for e in first.events] == ["InvalidSpec"] and "@dayly" in first.events[0].message
    assert plan(spec, status=first.status).events == ()  # the condition did not change: no new Event


def test_the_status_keeps_the_last_interval_when_its_runs_are_deleted() -> None:
    status = plan(dag_spec(schedule="@daily", startDate="2026-01-07T00:00:00Z")).status
    again = plan(dag_spec(schedule="@daily", startDate="2026-01-07T00:00:00Z"), (), status)
    assert again.runs_to_create == ()


# ------------------------------------------------------------------------------------------- runs


def start(spec: DagRunSpec, dag: plans.DagRef | None, status: DagRunStatus | None = None) -> plans.RunStart:
    return plans.start_run(
        spec, status or DagRunStatus(), dag, namespace="ns", created_at=NOW, generation=1, now=NOW
    )


def test_a_manual_run_starts_at_its_creation_time_with_the_timetables_manual_interval() -> None:
    result = start(DagRunSpec(dag_name="d"), plans.DagRef(dag_spec(schedule="@daily"), 4))
    status = result.status
    assert result.started and result.events == ()
    assert status.logical_date == NOW
    assert (status.data_interval_start, status.data_interval_end) == (day(9), day(10))
    assert status.run_id == "manual__2026-01-10T12:30:00+00:00"
    assert (status.state, status.dag_generation, status.queued_at) == (DagRunState.QUEUED, 4, NOW)
    assert status.dag_spec == dag_spec(schedule="@daily")


def test_a_scheduled_run_takes_its_interval_from_its_spec() -> None:
    spec = DagRunSpec(
        dag_name="d", run_type=RunType.SCHEDULED, data_interval={"start": day(3), "end": day(4)}
    )
    status = start(spec, plans.DagRef(dag_spec(schedule="@daily"), 1)).status
    assert (status.logical_date, status.data_interval_end) == (day(3), day(4))
    assert status.run_id == "scheduled__2026-01-03T00:00:00+00:00"


@pytest.mark.parametrize(
    ("dag", "reason"),
    [(None, "DagNotFound"), (plans.DagRef(dag_spec(schedule="nope"), 1), "InvalidDag")],
)
def test_a_run_that_cannot_start_says_why_once(dag: plans.DagRef | None, reason: str) -> None:
    first = start(DagRunSpec(dag_name="d"), dag)
    assert not first.started
    assert [e.reason for e in first.events] == [reason]
    assert first.status.dag_spec is None and first.status.state is DagRunState.QUEUED
    assert start(DagRunSpec(dag_name="d"), dag, first.status).events == ()


def attempt(task_id: str, name: str, phase: AttemptPhase = AttemptPhase.RUNNING) -> ObservedAttempt:
    return ObservedAttempt(task_id=task_id, try_number=1, name=name, phase=phase)


def trigger(task_id: str, name: str) -> ObservedTrigger:
    return ObservedTrigger(task_id=task_id, try_number=1, deferral_count=1, name=name)


def test_observe_sorts_current_attempts_strays_and_zombies() -> None:
    status = DagRunStatus(
        task_instances={
            "run": TaskInstanceStatus(state=S.RUNNING, try_number=2, pod_name="run-2"),
            "done": TaskInstanceStatus(state=S.SUCCESS, pod_name="done-1"),
            "zombie": TaskInstanceStatus(state=S.QUEUED, try_number=1, pod_name="zombie-1"),
            "wait": TaskInstanceStatus(state=S.DEFERRED, trigger_name="wait-t1"),
        }
    )
    attempts = {
        "run-2": attempt("run", "run-2"),
        "run-1": attempt("run", "run-1"),  # an earlier try still alive
        "old-1": attempt("run", "old-1", AttemptPhase.FAILED),  # kept for its logs, not alive
        "done-1": attempt("done", "done-1"),  # marked success by a user while running: undead
    }
    triggers = [trigger("wait", "wait-t1"), trigger("wait", "wait-t0"), trigger("gone", "gone-t1")]
    observed = plans.observe(status, attempts, triggers, running_in_dag=2)
    assert set(observed.attempts) == {"run", "zombie"}
    assert observed.attempts["run"].name == "run-2"
    assert observed.attempts["zombie"].phase is AttemptPhase.MISSING
    assert sorted(observed.stray_attempts) == ["done-1", "run-1"]
    assert list(observed.triggers) == ["wait"]
    assert sorted(observed.stray_triggers) == ["gone-t1", "wait-t0"]
    assert observed.running_in_dag == 2


def _hours(n: float) -> datetime:
    return datetime(2024, 1, 1, tzinfo=UTC) + timedelta(hours=n)


#: name -> (timetable class, its params, the run's data interval), as
#: hack/airflow_reference/latest_only_windows.py gives them to Airflow.
WINDOW_CASES: dict[str, tuple[str, dict[str, Any], tuple[datetime, datetime]]] = {
    "daily intervals": (
        "zonda.timetables.interval.CronDataIntervalTimetable",
        {"expression": "0 0 * * *", "timezone": "UTC"},
        (_hours(48), _hours(72)),
    ),
    "four-hour intervals": ("zonda.timetables.interval.DeltaDataIntervalTimetable", {"delta": 14400.0},
                            (_hours(8), _hours(12))),
    "hourly trigger": (
        "zonda.timetables.trigger.CronTriggerTimetable",
        {"expression": "0 * * * *", "timezone": "UTC"},
        (_hours(5), _hours(5)),
    ),
    "once": ("zonda.timetables.simple.OnceTimetable", {}, (_hours(0), _hours(0))),
}  # fmt: skip


@pytest.mark.parametrize(
    ("airflow_version", "case", "window"),
    [
        # What `hack/airflow_reference/latest_only_windows.py` printed under Airflow 2.10.5 ...
        ("2", "daily intervals", (_hours(72), _hours(96))),
        ("2", "four-hour intervals", (_hours(12), _hours(16))),
        ("2", "hourly trigger", (_hours(6), _hours(6))),  # empty: no run is ever the latest
        ("2", "once", None),
        # ... and under Airflow 3.3.2 with apache-airflow-providers-standard 1.21.0.
        ("3", "daily intervals", (_hours(48), _hours(96))),
        ("3", "four-hour intervals", (_hours(8), _hours(16))),
        ("3", "hourly trigger", (_hours(5), _hours(6))),
        ("3", "once", None),
    ],
)
def test_the_latest_only_window_is_airflows(
    airflow_version: str, case: str, window: tuple[datetime, datetime] | None
) -> None:
    classpath, params, (start, end) = WINDOW_CASES[case]
    spec = DagSpec.model_validate(
        dag_spec(timetable={"class": classpath, "params": params}, airflowVersion=airflow_version)
    )
    status = DagRunStatus(data_interval_start=start, data_interval_end=end)
    assert plans.latest_window(spec, status, NOW) == window


def test_a_run_without_a_data_interval_has_no_latest_only_window() -> None:
    spec = DagSpec.model_validate(dag_spec(schedule="@daily"))
    assert plans.latest_window(spec, DagRunStatus(), NOW) is None


def test_the_run_start_and_plan_read_no_clock() -> None:
    later = NOW + timedelta(days=365)
    spec = dag_spec(schedule="@daily", startDate="2026-01-07T00:00:00Z")
    one = dag_plans.plan_dag(
        "d", spec, status=DagStatus(), generation=1, created_at=CREATED, runs=[], now=later
    )
    two = dag_plans.plan_dag(
        "d", spec, status=DagStatus(), generation=1, created_at=CREATED, runs=[], now=later
    )
    assert one == two and len(one.runs_to_create) == 16  # maxActiveRuns' default


PARAMS = {
    "params": {"count": 3},
    "paramsSchema": {
        "type": "object",
        "properties": {"count": {"type": "integer", "minimum": 1}, "who": {"type": "string"}},
        "required": ["who"],
    },
}


def test_a_conf_that_satisfies_the_params_schema_starts_the_run() -> None:
    result = start(
        DagRunSpec(dag_name="d", conf={"who": "ann", "count": 5}), plans.DagRef(dag_spec(**PARAMS), 1)
    )
    assert result.started and result.status.state is DagRunState.QUEUED


def test_a_conf_that_violates_the_params_schema_fails_the_run_naming_the_param_once() -> None:
    spec = DagRunSpec(dag_name="d", conf={"count": 0})
    first = start(spec, plans.DagRef(dag_spec(**PARAMS), 1))
    message = (
        "conf does not match the DAG's params: param 'count': 0 is less than the minimum of 1; "
        "param 'who': no value given and it has no default"
    )
    assert not first.started and first.status.dag_spec is None
    assert (first.status.state, first.status.end_date, first.status.message) == (
        DagRunState.FAILED,
        NOW,
        message,
    )
    assert [(e.reason, e.message, e.warning) for e in first.events] == [("InvalidConf", message, True)]
    ready = [c for c in first.status.conditions if c.type == "Ready"]
    assert [(c.status, c.reason, c.message) for c in ready] == [("False", "InvalidConf", message)]
    again = start(spec, plans.DagRef(dag_spec(**PARAMS), 1), first.status)
    assert not again.started and again.events == () and again.status == first.status


def test_a_conf_that_violates_a_tasks_params_schema_fails_the_run_naming_the_task() -> None:
    """Airflow validates a task's Params with the run's conf merged over them when the task runs;
    Zonda checks them with the DAG's, before anything runs."""
    schema = {"type": "object", "properties": {"size": {"type": "integer", "maximum": 10}}}
    task = {"id": "t", "operator": "EmptyOperator", "args": {"params": {"size": 3}}, "paramsSchema": schema}
    dag = plans.DagRef({"schedule": None, "tasks": [task]}, 1)
    assert start(DagRunSpec(dag_name="d", conf={"size": 10}), dag).started
    refused = start(DagRunSpec(dag_name="d", conf={"size": 11}), dag)
    assert not refused.started and refused.status.message == (
        "conf does not match the DAG's params: task 't': param 'size': 11 is greater than the maximum of 10"
    )


def test_a_logical_date_whose_interval_leaves_the_calendar_fails_the_run_at_start_with_a_reason() -> None:
    """Year 1 on a daily cron: aligning it to the schedule needs a time before 0001-01-01 (found by
    tests/cluster/test_fuzz_runs.py: the run's reconcile raised OverflowError forever)."""
    spec = DagRunSpec(dag_name="d", logical_date=datetime(1, 1, 1, tzinfo=UTC))
    result = start(spec, plans.DagRef(dag_spec(schedule="@daily"), 1))
    assert not result.started and result.status.state is DagRunState.FAILED
    assert result.status.message is not None
    assert result.status.message.startswith(
        "the run's dates are out of range (logicalDate 0001-01-01T00:00:00+00:00)"
    )
    assert [e.reason for e in result.events] == ["InvalidDates"]
    fine = start(
        DagRunSpec(dag_name="d", logical_date=datetime(2, 1, 1, tzinfo=UTC)),
        plans.DagRef(dag_spec(schedule="@daily"), 1),
    )
    assert fine.started  # the positive control: a date a day later in the calendar starts
