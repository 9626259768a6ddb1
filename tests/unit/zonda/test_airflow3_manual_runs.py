"""Airflow 3 manual runs without a logical date: how they start, and what their tries see.

Expected values come from Airflow 3.1.8's code (apache-airflow-core 3.1.8, apache-airflow-task-sdk
1.1.8), cited per test; an Airflow 2 DAG (or Zonda's own) keeps a manual run at its creation time.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from zonda.operators.datetime import BranchDateTimeOperator
from zonda.operators.weekday import BranchDayOfWeekOperator
from zonda.passes import plans
from zonda.resources.dagrun_models import DagRunSpec, DagRunStatus, TaskInstanceStatus
from zonda.resources.invocations import TaskInvocation
from zonda.resources.models import DagStatus
from zonda.resources.run_types import RunType
from zonda.schedules import dag_plans
from zonda.sensors.weekday import DayOfWeekSensor
from zonda.specs.dags import parse_dag_spec, resolve_dag
from zonda.tries import xcoms
from zonda.tries.invocation_builder import task_invocation
from zonda.tries.task_context import build_context
from zonda.tries.templating import TemplateError, render

CREATED = datetime(2026, 3, 4, 5, 6, 7, 890000, tzinfo=UTC)
TRIGGERED = datetime(2026, 3, 4, 5, 6, 7, 123456, tzinfo=UTC)

#: The keys Airflow 3 sets only when the run has a logical date (task-sdk 1.1.8
#: `execution_time/task_runner.py`, `RuntimeTaskInstance.get_template_context`).
LOGICAL_DATE_KEYS = {
    "logical_date", "ds", "ds_nodash", "ts", "ts_nodash", "ts_nodash_with_tz",
    "data_interval_start", "data_interval_end",
    "prev_data_interval_start_success", "prev_data_interval_end_success",
}  # fmt: skip


def dag_spec(version: str | None, **fields: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedule": "@daily",
        "tasks": [{"id": "t", "operator": "BashOperator", "args": {"bash_command": "echo {{ run_id }}"}}],
    }
    if version is not None:
        spec["airflowVersion"] = version
    return spec | fields


def start(spec: DagRunSpec, version: str | None) -> DagRunStatus:
    result = plans.start_run(
        spec,
        DagRunStatus(),
        plans.DagRef(dag_spec(version), 1),
        namespace="ns",
        created_at=CREATED,
        generation=1,
        now=CREATED,
    )
    assert result.started
    return result.status


def test_an_airflow3_manual_run_given_no_logical_date_has_none_and_is_due_when_triggered() -> None:
    """Airflow 3.1.8 `api_fastapi/core_api/datamodels/dag_run.py` `TriggerDAGRunPostBody.validate_context`
    and `api/common/trigger_dag.py` `_trigger_dag`: no logical date means no data interval (the timetable's
    `infer_manual_data_interval` is not asked), `run_after` the request's time, and the run id
    `Timetable.generate_run_id` gives (`timetables/base.py`): ``manual__<run_after.isoformat()>``."""
    status = start(DagRunSpec(dag_name="d", run_after=TRIGGERED), "3")
    assert status.logical_date is None
    assert (status.data_interval_start, status.data_interval_end) == (None, None)
    assert status.run_after == TRIGGERED
    assert status.run_id == "manual__2026-03-04T05:06:07.123456+00:00"


def test_without_a_trigger_time_an_airflow3_manual_run_is_due_at_its_creation() -> None:
    """A DagRun made with kubectl names no run_after: `_trigger_dag` defaults it to `utcnow()`, the
    moment the run is created."""
    status = start(DagRunSpec(dag_name="d"), "3")
    assert (status.logical_date, status.run_after) == (None, CREATED)
    assert status.run_id == "manual__2026-03-04T05:06:07.890000+00:00"


def test_an_airflow3_manual_run_given_a_logical_date_keeps_it_and_the_manual_interval() -> None:
    """`validate_context` with a logical date: `infer_manual_data_interval(run_after=logical_date)`
    (for `@daily`, the day before it) and run_after the request's time."""
    logical = datetime(2026, 1, 5, 12, tzinfo=UTC)
    status = start(DagRunSpec(dag_name="d", logical_date=logical, run_after=TRIGGERED), "3")
    assert status.logical_date == logical
    assert (status.data_interval_start, status.data_interval_end) == (
        datetime(2026, 1, 4, tzinfo=UTC),
        datetime(2026, 1, 5, tzinfo=UTC),
    )
    assert status.run_after == TRIGGERED


@pytest.mark.parametrize("version", ["2", None])
def test_an_airflow2_manual_run_is_still_at_its_creation_time(version: str | None) -> None:
    """Airflow 2.10's `dags trigger` (`api/common/trigger_dag.py`): the logical date defaults to now;
    run_after (not an Airflow 2 attribute) is recorded as that same time."""
    status = start(DagRunSpec(dag_name="d"), version)
    assert status.logical_date == CREATED
    assert status.data_interval_end == datetime(2026, 3, 4, tzinfo=UTC)
    assert status.run_after == CREATED
    assert status.run_id == "manual__2026-03-04T05:06:07.890000+00:00"


def test_a_scheduled_airflow3_run_is_due_at_its_interval_end() -> None:
    status = start(
        DagRunSpec(
            dag_name="d",
            run_type=RunType.SCHEDULED,
            logical_date=datetime(2026, 1, 1, tzinfo=UTC),
            data_interval={
                "start": datetime(2026, 1, 1, tzinfo=UTC),
                "end": datetime(2026, 1, 2, tzinfo=UTC),
            },
        ),
        "3",
    )
    assert (status.logical_date, status.run_after) == (
        datetime(2026, 1, 1, tzinfo=UTC),
        datetime(2026, 1, 2, tzinfo=UTC),
    )


# ---------------------------------------------------------------------------------- the try's context


def invocation(version: str | None = "3") -> TaskInvocation:
    spec = DagRunSpec(dag_name="d", run_after=TRIGGERED)
    status = start(spec, version or "3")
    status.task_instances["t"] = TaskInstanceStatus(try_number=1, max_tries=0)
    dag_wire = dag_spec(version)
    dag = resolve_dag("d", parse_dag_spec(dag_wire))
    return task_invocation(
        run_name="d-manual-20260304t050607123456z",
        spec=spec,
        status=status,
        dag_spec=parse_dag_spec(dag_wire),
        task=dag.tasks["t"],
        try_number=1,
        previous_success=(datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 2, tzinfo=UTC)),
    )


def test_the_context_of_a_run_without_a_logical_date_lacks_the_keys_derived_from_it() -> None:
    """task-sdk 1.1.8 `RuntimeTaskInstance.get_template_context`: the logical-date and data-interval keys
    are set only ``if logical_date := coerce_datetime(dag_run.logical_date)`` ("logical_date and
    data_interval either coexist or be None together"); `task_instance_key_str` is then
    ``f"{dag_id}__{task_id}__{dag_run.run_id}"``; `dag_run` carries `logical_date=None`,
    `data_interval_start/end=None` and `run_after` (`api/datamodels/_generated.py` `DagRun`)."""
    context = build_context(invocation())
    assert not LOGICAL_DATE_KEYS & set(context)
    assert context["task_instance_key_str"] == "d__t__manual__2026-03-04T05:06:07.123456+00:00"
    run = context["dag_run"]
    assert (run.logical_date, run.data_interval_start, run.data_interval_end) == (None, None, None)
    assert run.run_after.isoformat() == "2026-03-04T05:06:07.123456+00:00"
    assert run.run_type == "manual"
    assert context["run_id"] == "manual__2026-03-04T05:06:07.123456+00:00"  # Airflow's, not the name


def test_a_template_using_ds_in_such_a_run_fails_naming_the_reason() -> None:
    """Airflow 3's DAG renders with `template_undefined=jinja2.StrictUndefined` (task-sdk
    `definitions/dag.py`): ``{{ ds }}`` is an UndefinedError, not an empty string."""
    context = build_context(invocation())
    with pytest.raises(TemplateError, match=r"'ds' is undefined.*no logical date.*dag_run\.run_after"):
        render("{{ ds }}", context)
    assert render("{{ dag_run.run_after.isoformat() }}", context) == "2026-03-04T05:06:07.123456+00:00"
    assert render("{{ dag_run.logical_date }}", context) == "None"


def test_include_prior_dates_takes_a_run_without_a_logical_date_at_its_run_after() -> None:
    """Airflow 3.1.8 `models/xcom.py` `XComModel.get_many(include_prior_dates=True)`: runs with
    ``coalesce(logical_date, run_after) <=`` this run's."""

    def run(name: str, when: datetime, value: int) -> xcoms.EarlierRun:
        status = DagRunStatus(task_instances={"t": TaskInstanceStatus(xcom=value)})
        return xcoms.EarlierRun(name, when, "", status)

    runs = [
        run("old", datetime(2026, 3, 1, tzinfo=UTC), 1),
        run("manual-no-date", datetime(2026, 3, 3, tzinfo=UTC), 2),  # at its run_after
        run("later", datetime(2026, 3, 5, tzinfo=UTC), 3),
    ]
    found = xcoms.earlier_xcoms(runs, "t", "return_value", at=TRIGGERED, this_run="this")
    assert found == [2, 1]


def test_operators_comparing_the_logical_date_take_run_after_in_a_run_without_one() -> None:
    """Standard provider 1.21.0 `operators/weekday.py` `BranchDayOfWeekOperator.choose_branch`,
    `operators/datetime.py` `BranchDateTimeOperator.choose_branch`, `sensors/weekday.py`
    `DayOfWeekSensor.poke`: ``now = context.get("logical_date")``, else ``dag_run.run_after``."""
    context = build_context(invocation())  # run_after 2026-03-04, a Wednesday
    weekday = BranchDayOfWeekOperator(
        task_id="b", week_day="Wednesday", use_task_logical_date=True,
        follow_task_ids_if_true="yes", follow_task_ids_if_false="no",
    )  # fmt: skip
    assert weekday.choose_branch(context) == "yes"
    sensor = DayOfWeekSensor(task_id="s", week_day="Wednesday", use_task_logical_date=True)
    assert sensor.poke(context) is True
    window = BranchDateTimeOperator(
        task_id="w", use_task_logical_date=True, follow_task_ids_if_true="in", follow_task_ids_if_false="out",
        target_lower=datetime(2026, 3, 4, 5, tzinfo=UTC), target_upper=datetime(2026, 3, 4, 6, tzinfo=UTC),
    )  # fmt: skip
    assert window.choose_branch(context) == "in"


def test_the_schedule_never_continues_from_such_a_run_but_counts_it_active() -> None:
    """Airflow 3.1.8 `models/dag.py` schedules from the last automated run's data interval (manual runs
    are not automated); `SchedulerJobRunner._should_update_dag_next_dagruns` holds the next one back at
    `max_active_runs` counted by `DagRun.active_runs_of_dags` (queued and running runs of any type but
    backfill, a manual one among them)."""
    manual = dag_plans.RunRef(
        name="d-manual", created_at=CREATED, run_type=RunType.MANUAL, state=None, data_interval=None
    )
    assert dag_plans.last_automated_interval(DagStatus(), [manual]) is None
    spec = dag_spec("3", schedule="@daily", startDate="2026-03-01T00:00:00Z", maxActiveRuns=1, catchup=True)
    plan = dag_plans.plan_dag(
        "d", spec, status=DagStatus(), generation=1, created_at=CREATED, runs=(manual,), now=CREATED
    )
    assert plan.runs_to_create == ()  # held back by the manual run, which is active
    free = dag_plans.plan_dag(
        "d", spec, status=DagStatus(), generation=1, created_at=CREATED, runs=(), now=CREATED
    )
    assert [due.logical_date.day for due in free.runs_to_create] == [1]
