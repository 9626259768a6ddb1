"""`TriggerDagRunOperator`, `ExternalTaskSensor` and their triggers (Zonda's Kubernetes provider):
their arguments as Airflow checks them, the dates a sensor looks at, how an event ends a deferred
try, and the triggers polling DagRuns through the in-memory `FakeKube` (the real apiserver runs them
in tests/cluster/test_dag_dependencies.py)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from controller.kube import DAGRUNS, DAGS
from controller.kube.fake import FakeKube
from controller.providers.kubernetes import triggers as kube_triggers
from controller.providers.kubernetes.dagrun_triggers import DagStateTrigger, WorkflowTrigger
from controller.providers.kubernetes.external_task import ExternalTaskSensor
from controller.providers.kubernetes.trigger_dagrun import (
    DagNotFound,
    DagRunAlreadyExists,
    TriggerDagRunOperator,
)
from zonda.authoring.compat import airflow_imports
from zonda.exceptions import AirflowException, AirflowSkipException
from zonda.schedules.dag_dependencies import Parent
from zonda.triggers import TriggerEvent, load_trigger, serialize_trigger

DAY = datetime(2026, 3, 1, tzinfo=UTC)


def days_before(logical_date: datetime, ds: str) -> list[datetime]:
    """An `execution_date_fn` taking one context entry by name, as Airflow's make_kwargs_callable passes."""
    assert ds == logical_date.strftime("%Y-%m-%d")
    return [logical_date - timedelta(days=1), logical_date - timedelta(days=2)]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"external_task_id": "a", "external_task_ids": ["a"]}, "Only one of `external_task_id`"),
        ({"external_task_ids": ["a"], "external_task_group_id": "g"}, "can't be set at the same time"),
        ({"external_task_ids": ["a", "a"]}, "Duplicate task_ids"),
        ({"external_task_id": "a", "allowed_states": ["success"], "failed_states": ["success"]}, "Duplicate"),
        ({"external_task_id": "a", "allowed_states": ["done"]}, "Valid values"),
        ({"execution_delta": 60, "execution_date_fn": "x.y"}, "Only one of `execution_delta`"),
    ],
)
def test_the_sensor_refuses_what_airflow_refuses(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises((ValueError, AirflowException), match=message):
        ExternalTaskSensor(task_id="s", external_dag_id="parent", **kwargs)


def test_the_sensor_looks_at_the_same_date_or_a_delta_or_what_the_function_returns() -> None:
    context = {"logical_date": DAY, "ds": "2026-03-01", "run_id": "r"}
    same = ExternalTaskSensor(task_id="s", external_dag_id="parent")
    assert same._logical_dates(context) == [DAY]
    delta = ExternalTaskSensor(task_id="s", external_dag_id="parent", execution_delta="1h")
    assert delta._logical_dates(context) == [DAY - timedelta(hours=1)]
    fn = ExternalTaskSensor(
        task_id="s", external_dag_id="parent", execution_date_fn=f"{__name__}:days_before"
    )
    assert fn._logical_dates(context) == [DAY - timedelta(days=1), DAY - timedelta(days=2)]
    assert fn._wait(context).dag_name == "parent"


def test_a_fired_workflow_trigger_ends_the_sensor_as_its_status_says() -> None:
    sensor = ExternalTaskSensor(task_id="s", external_dag_id="parent", external_task_id="a")
    sensor.execute_complete({}, event={"status": "success", "message": "done"})
    with pytest.raises(AirflowSkipException):
        sensor.execute_complete({}, event={"status": "skipped", "message": "skipped"})
    with pytest.raises(AirflowException, match="failed"):
        sensor.execute_complete({}, event={"status": "failed", "message": "it failed"})
    soft = ExternalTaskSensor(task_id="s", external_dag_id="parent", external_task_id="a", soft_fail=True)
    with pytest.raises(AirflowSkipException):
        soft.execute_complete({}, event={"status": "failed", "message": "it failed"})


def test_a_waiting_trigger_dag_run_operator_ends_as_the_child_run_did() -> None:
    operator = TriggerDagRunOperator(task_id="t", trigger_dag_id="child", wait_for_completion=True)
    operator.execute_complete({}, event={"dag_name": "child", "state": "success"})
    with pytest.raises(AirflowException, match="child failed with failed states failed"):
        operator.execute_complete({}, event={"dag_name": "child", "state": "failed"})
    # Airflow (2.10 and the standard provider) accepts a state in both lists; failed states are looked
    # at first, so a failed child still fails the task, unless failed_states=[] (kept, not defaulted).
    both = TriggerDagRunOperator(task_id="t", trigger_dag_id="c", allowed_states=["success", "failed"])
    with pytest.raises(AirflowException, match="c failed with failed states failed"):
        both.execute_complete({}, event={"dag_name": "c", "state": "failed"})
    none_fail = TriggerDagRunOperator(
        task_id="t", trigger_dag_id="c", allowed_states=["success", "failed"], failed_states=[]
    )
    none_fail.execute_complete({}, event={"dag_name": "c", "state": "failed"})
    with pytest.raises(ValueError, match="not both"):
        TriggerDagRunOperator(task_id="t", trigger_dag_id="c", logical_date="x", execution_date="y")


def run_body(name: str, state: str | None, **tasks: str) -> dict[str, Any]:
    return {
        "apiVersion": "zonda.dev/v1alpha1",
        "kind": "DagRun",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"dagName": "parent", "logicalDate": DAY.isoformat()},
        "status": {"state": state, "taskInstances": {t: {"state": s} for t, s in tasks.items()}},
    }


async def first_event(trigger: Any, kube: FakeKube, change: Any) -> TriggerEvent:
    """Run `trigger` on `kube`; after its first poll, `change` the world; return its event."""
    token = kube_triggers.current_kube.set(kube)  # type: ignore[arg-type]
    try:
        runner = trigger.run()
        task = asyncio.ensure_future(runner.__anext__())
        await asyncio.sleep(0.05)
        assert not task.done(), "fired before the world changed"
        await change()
        return await asyncio.wait_for(task, 5)
    finally:
        kube_triggers.current_kube.reset(token)


def test_dag_state_trigger_fires_once_the_run_reaches_an_awaited_state() -> None:
    kube = FakeKube()

    async def scenario() -> TriggerEvent:
        await kube.create_custom(DAGRUNS, "ns", run_body("child-1", "running"))

        async def finish() -> None:
            body = await kube.get_custom(DAGRUNS, "ns", "child-1")
            assert body is not None
            await kube.replace_custom_status(DAGRUNS, "ns", {**body, "status": {"state": "failed"}})

        trigger = DagStateTrigger("ns", "child", "child-1", ["success", "failed"], poll_interval=0.01)
        return await first_event(trigger, kube, finish)

    event = asyncio.run(scenario())
    assert event.payload == {"dag_name": "child", "run_name": "child-1", "state": "failed"}


def test_workflow_trigger_fires_when_the_external_task_succeeds_and_serializes_its_wait() -> None:
    kube = FakeKube()
    trigger = WorkflowTrigger(
        "ns", "parent", [DAY], external_task_ids=["load"], failed_states=["failed"], poll_interval=0.01
    )
    again = load_trigger(*serialize_trigger(trigger))
    assert isinstance(again, WorkflowTrigger) and again.wait == trigger.wait

    async def scenario() -> TriggerEvent:
        await kube.create_custom(DAGRUNS, "ns", run_body("parent-1", "running", load="running"))

        async def succeed() -> None:
            body = await kube.get_custom(DAGRUNS, "ns", "parent-1")
            assert body is not None
            status = {"state": "running", "taskInstances": {"load": {"state": "success"}}}
            await kube.replace_custom_status(DAGRUNS, "ns", {**body, "status": status})

        return await first_event(again, kube, succeed)

    event = asyncio.run(scenario())
    assert event.payload["status"] == "success"


def test_airflow_dag_files_import_the_cross_dag_operators_unchanged() -> None:
    with airflow_imports(enabled=True):
        from airflow.operators.trigger_dagrun import (
            TriggerDagRunOperator as AirflowTrigger,
        )
        from airflow.sensors.external_task import (
            ExternalTaskMarker,
        )
        from airflow.sensors.external_task import (
            ExternalTaskSensor as AirflowSensor,
        )
    assert AirflowTrigger is TriggerDagRunOperator
    assert AirflowSensor is ExternalTaskSensor
    assert ExternalTaskMarker.__module__ == "zonda.sensors.external_task"


def test_the_documented_import_path_names_the_same_operators() -> None:
    from controller.providers.kubernetes import dag_dependencies

    assert dag_dependencies.TriggerDagRunOperator is TriggerDagRunOperator
    assert dag_dependencies.ExternalTaskSensor is ExternalTaskSensor
    assert dag_dependencies.DagRunAlreadyExists is DagRunAlreadyExists
    assert dag_dependencies.ExternalTaskMarker.__module__ == "zonda.sensors.external_task"


# ------------------------------------------------------------------- creating the child run


PARENT = Parent(dag_name="parent", run_name="parent-manual-20260301t000000z", task_id="trigger")


def kube_with_child_dag() -> FakeKube:
    kube = FakeKube()
    child_dag = {"apiVersion": "zonda.dev/v1alpha1", "kind": "DAG", "metadata": {"name": "child"},
                 "spec": {"schedule": None, "tasks": [{"id": "a", "operator": "EmptyOperator"}]}}  # fmt: skip
    asyncio.run(kube.create_custom(DAGS, "ns", child_dag))
    return kube


def create(kube: FakeKube, operator: TriggerDagRunOperator, parent: Parent = PARENT) -> dict[str, Any]:
    return asyncio.run(operator.create_or_adopt(kube, "ns", "child", parent, DAY))


def test_a_retry_adopts_the_run_its_earlier_try_created_instead_of_creating_another() -> None:
    kube = kube_with_child_dag()
    operator = TriggerDagRunOperator(task_id="trigger", trigger_dag_id="child", conf={"x": 1})
    first = create(kube, operator)
    again = create(kube, operator)
    assert again["metadata"]["uid"] == first["metadata"]["uid"]
    assert [r["metadata"]["name"] for r in asyncio.run(kube.list_custom(DAGRUNS, "ns"))] == [
        first["metadata"]["name"]
    ]
    assert first["spec"] == {"dagName": "child", "runType": "manual", "logicalDate": "2026-03-01T00:00:00Z",
                             "conf": {"x": 1}}  # fmt: skip


def test_someone_elses_run_of_that_name_is_refused_or_skipped() -> None:
    kube = kube_with_child_dag()
    named = TriggerDagRunOperator(task_id="trigger", trigger_dag_id="child", trigger_run_id="child-run")
    create(kube, named, Parent(dag_name="other", run_name="other-run", task_id="t"))
    with pytest.raises(DagRunAlreadyExists, match="child-run"):
        create(kube, named)
    skipping = TriggerDagRunOperator(
        task_id="trigger", trigger_dag_id="child", trigger_run_id="child-run", skip_when_already_exists=True
    )
    with pytest.raises(AirflowSkipException):
        create(kube, skipping)


def test_a_missing_dag_is_dag_not_found() -> None:
    operator = TriggerDagRunOperator(task_id="trigger", trigger_dag_id="child")
    with pytest.raises(DagNotFound, match="child"):
        create(FakeKube(), operator)


def test_reset_dag_run_clears_the_existing_run_and_leaves_a_run_not_started_alone() -> None:
    kube = kube_with_child_dag()
    operator = TriggerDagRunOperator(task_id="trigger", trigger_dag_id="child", reset_dag_run=True)
    body = create(kube, operator)
    create(kube, operator)  # not started yet: nothing to clear, no error
    finished = {
        "state": "success",
        "logicalDate": "2026-03-01T00:00:00Z",
        "dataIntervalStart": "2026-03-01T00:00:00Z",
        "dataIntervalEnd": "2026-03-01T00:00:00Z",
        "dagSpec": {"schedule": None, "tasks": [{"id": "a", "operator": "EmptyOperator"}]},
        "taskInstances": {"a": {"state": "success", "tryNumber": 1, "maxTries": 0}},
    }
    stored = asyncio.run(kube.get_custom(DAGRUNS, "ns", body["metadata"]["name"]))
    assert stored is not None
    asyncio.run(kube.replace_custom_status(DAGRUNS, "ns", {**stored, "status": finished}))
    create(kube, operator)
    after = asyncio.run(kube.get_custom(DAGRUNS, "ns", body["metadata"]["name"]))
    assert after is not None
    assert after["status"]["state"] == "queued"
    assert after["status"]["taskInstances"]["a"]["state"] == "none"
