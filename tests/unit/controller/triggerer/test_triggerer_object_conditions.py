"""When `ObjectConditionTrigger` (`controller.providers.kubernetes.triggers`) considers an object
ready, as pure functions of the object, and how `WaitForObjectSensor` defers to it; the cluster tier
runs the trigger against a real apiserver."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from controller.providers.kubernetes.sensors import WaitForObjectSensor
from controller.providers.kubernetes.triggers import ObjectConditionTrigger, field_value, match_object
from zonda.exceptions import TaskDeferred
from zonda.triggers import load_trigger, serialize_trigger

JOB_DONE = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {"name": "etl"},
    "status": {
        "succeeded": 1,
        "startTime": "2024-03-01T12:00:00Z",
        "conditions": [
            {"type": "SuccessCriteriaMet", "status": "True"},
            {"type": "Complete", "status": "True"},
        ],
        "containerStatuses": [{"ready": True}],
    },
}
JOB_RUNNING = {"apiVersion": "batch/v1", "kind": "Job", "status": {"active": 1, "conditions": []}}
POD_NOT_READY = {"status": {"conditions": [{"type": "Ready", "status": "False"}]}}


@pytest.mark.parametrize(
    ("obj", "wait", "event"),
    [
        pytest.param(
            JOB_DONE,
            {"condition": "Complete"},
            {"condition": "Complete", "status": "True"},
            id="a Job with condition Complete True is ready",
        ),
        pytest.param(JOB_RUNNING, {"condition": "Complete"}, None, id="a Job without the condition is not"),
        pytest.param(POD_NOT_READY, {"condition": "Ready"}, None, id="a condition with status False is not"),
        pytest.param(
            JOB_DONE,
            {"field_path": "status.succeeded", "value": 1},
            {"fieldPath": "status.succeeded", "value": 1},
            id="a Job whose status.succeeded is 1 is ready",
        ),
        pytest.param(
            JOB_DONE,
            {"field_path": "status.succeeded", "value": "1"},
            {"fieldPath": "status.succeeded", "value": 1},
            id="the value may be written as text",
        ),
        pytest.param(
            JOB_DONE,
            {"field_path": "status.succeeded", "value": True},
            None,
            id="but True is not 1, unlike in Python",
        ),
        pytest.param(
            JOB_DONE,
            {"field_path": "status.containerStatuses.0.ready", "value": "true"},
            {"fieldPath": "status.containerStatuses.0.ready", "value": True},
            id="a number in the path indexes a list and booleans compare as true/false",
        ),
        pytest.param(
            JOB_DONE,
            {"field_path": "status.startTime", "value": datetime(2024, 3, 1, 12, tzinfo=UTC)},
            {"fieldPath": "status.startTime", "value": "2024-03-01T12:00:00Z"},
            id="a timestamp value compares as a moment",
        ),
        pytest.param(
            JOB_RUNNING,
            {"field_path": "status.succeeded", "value": 1},
            None,
            id="a missing field is not ready",
        ),
        pytest.param(
            JOB_RUNNING,
            {"field_path": "status.succeeded"},
            None,
            id="without a value a field path waits for the field to appear",
        ),
        pytest.param(
            JOB_RUNNING,
            {"field_path": "status.active"},
            {"fieldPath": "status.active", "value": 1},
            id="without a value any present field is ready",
        ),
    ],
)
def test_match_object(obj: dict[str, Any], wait: dict[str, Any], event: dict[str, Any] | None) -> None:
    arguments = {"condition": None, "field_path": None, "value": None, **wait}
    assert match_object(obj, **arguments) == event


@pytest.mark.parametrize(
    ("path", "value"),
    [
        pytest.param("status.succeeded", 1, id="a nested field"),
        pytest.param(".status.succeeded", 1, id="a leading dot as in jsonpath"),
        pytest.param("status.conditions.1.type", "Complete", id="a list element's field"),
        pytest.param("status.conditions.9.type", None, id="an index past the end"),
        pytest.param("status.succeeded.more", None, id="a path through a scalar"),
    ],
)
def test_field_value(path: str, value: Any) -> None:
    assert field_value(JOB_DONE, path) == value


def test_object_condition_trigger_round_trips_through_json() -> None:
    trigger = ObjectConditionTrigger(
        "batch/v1", "Job", "etl", "team-a", field_path="status.succeeded", value=1, poll_interval=2
    )
    classpath, kwargs = serialize_trigger(trigger)
    rebuilt = load_trigger(classpath, json.loads(json.dumps(kwargs)))
    assert classpath == "controller.providers.kubernetes.triggers.ObjectConditionTrigger"
    assert rebuilt.serialize() == trigger.serialize()


@pytest.mark.parametrize(
    "wait",
    [
        pytest.param({}, id="neither a condition nor a field path"),
        pytest.param({"condition": "Ready", "field_path": "status.x"}, id="both criteria"),
    ],
)
def test_object_condition_trigger_needs_exactly_one_criterion(wait: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="exactly one"):
        ObjectConditionTrigger("v1", "Pod", "p", "ns", **wait)


def test_wait_for_object_sensor_defers_to_the_trigger_with_its_timeout() -> None:
    sensor = WaitForObjectSensor(
        task_id="wait",
        api_version="batch/v1",
        kind="Job",
        name="etl",
        namespace="team-a",
        condition="Complete",
        timeout="10m",
        poke_interval=3,
    )
    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute({})
    assert deferred.value.method_name == "execute_complete"
    assert deferred.value.timeout == timedelta(minutes=10)
    assert serialize_trigger(deferred.value.trigger) == (
        "controller.providers.kubernetes.triggers.ObjectConditionTrigger",
        {
            "api_version": "batch/v1",
            "kind": "Job",
            "name": "etl",
            "namespace": "team-a",
            "condition": "Complete",
            "field_path": None,
            "value": None,
            "poll_interval": 3.0,
        },
    )
    event = {"kind": "Job", "name": "etl", "condition": "Complete", "status": "True"}
    assert sensor.resume_execution("execute_complete", {"event": event}, {}) == event


def test_wait_for_object_sensor_needs_exactly_one_criterion() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        WaitForObjectSensor(task_id="wait", api_version="v1", kind="Pod", name="p")
