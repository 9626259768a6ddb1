"""A human's answer to a HITL task against `FakeKube`: the request read from the run and its Trigger,
the answer checked and written as the Trigger's `fired` status under its resourceVersion, and every
refusal (an option not offered, a second answer, a finished task) said by name."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest

from controller.kube import DAGRUNS, TRIGGERS
from controller.kube.fake import FakeKube
from controller.operations import hitl_responses
from zonda.resources import hitl

NS = "ns"
NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)
KWARGS = {
    "subject": "Pick",
    "options": ["task_1", "task_2"],
    "defaults": None,
    "multiple": False,
    "params": {},
}


def seed(
    kube: FakeKube,
    *,
    state: str = "deferred",
    trigger_kwargs: dict[str, Any] | None = None,
    params_schema: dict[str, Any] | None = None,
) -> None:
    kwargs = trigger_kwargs if trigger_kwargs is not None else KWARGS
    ti = {
        "state": state,
        "tryNumber": 1,
        "triggerName": "r1-pick-1-1",
        "deferral": {"triggerClasspath": hitl.TRIGGER_CLASSPATH, "triggerKwargs": kwargs},
    }
    run = {"apiVersion": "zonda.dev/v1alpha1", "kind": "DagRun", "metadata": {"name": "r1"}, "spec": {}}
    asyncio.run(kube.create_custom(DAGRUNS, NS, run))  # the status is a subresource: written apart
    task = {
        "id": "pick",
        "operator": "HITLOperator",
        **({"paramsSchema": params_schema} if params_schema else {}),
    }
    status = {"taskInstances": {"pick": ti}, "dagSpec": {"tasks": [task]}}
    asyncio.run(kube.patch_custom_status(DAGRUNS, NS, "r1", status))
    trigger = {
        "kind": "Trigger",
        "metadata": {"name": "r1-pick-1-1"},
        "spec": {"classpath": hitl.TRIGGER_CLASSPATH},
    }
    asyncio.run(kube.create_custom(TRIGGERS, NS, trigger))


def respond(
    kube: FakeKube, *options: str, key: str = "pick", params: dict[str, Any] | None = None
) -> hitl_responses.Answered:
    return asyncio.run(
        hitl_responses.respond(
            kube, NS, "r1", key, options=list(options), params_input=params or {}, user="alice", now=NOW
        )
    )


def test_an_answer_fires_the_trigger_once_and_a_second_is_refused() -> None:
    kube = FakeKube()
    seed(kube)
    answered = respond(kube, "task_2")
    trigger = asyncio.run(kube.get_custom(TRIGGERS, NS, "r1-pick-1-1"))
    assert trigger is not None
    assert trigger["status"]["state"] == "fired"
    assert trigger["status"]["event"] == answered.event
    assert answered.event["chosen_options"] == ["task_2"]
    assert answered.event["responded_by_user"] == {"id": "alice", "name": "alice"}
    assert [(e.reason, e.message) for e in kube.events] == [
        ("TaskResponded", "pick: answered 'task_2' by alice")
    ]
    with pytest.raises(hitl_responses.RespondError, match="answered already"):
        respond(kube, "task_1")


@pytest.mark.parametrize(
    ("state", "options", "key", "error"),
    [
        pytest.param("deferred", ["task_9"], "pick", "'task_9' not offered", id="an option not offered"),
        pytest.param("success", ["task_1"], "pick", "it is success, not waiting", id="a finished task"),
        pytest.param(
            "deferred", ["task_1"], "other", "has no task instance 'other'", id="a task not in the run"
        ),
    ],
)
def test_answers_refused_leave_the_trigger_waiting(
    state: str, options: list[str], key: str, error: str
) -> None:
    kube = FakeKube()
    seed(kube, state=state)
    with pytest.raises(hitl_responses.RespondError, match=error):
        respond(kube, *options, key=key)
    trigger = asyncio.run(kube.get_custom(TRIGGERS, NS, "r1-pick-1-1"))
    assert trigger is not None and "status" not in trigger  # positive control: the answer above wrote it


def test_a_task_waiting_on_another_trigger_is_not_answered() -> None:
    kube = FakeKube()
    seed(kube)
    run = asyncio.run(kube.get_custom(DAGRUNS, NS, "r1"))
    assert run is not None
    run["status"]["taskInstances"]["pick"]["deferral"]["triggerClasspath"] = (
        "zonda.triggers.temporal.DateTimeTrigger"
    )
    asyncio.run(kube.replace_custom_status(DAGRUNS, NS, run))
    with pytest.raises(hitl_responses.RespondError, match="not a human-in-the-loop request"):
        respond(kube, "task_1")


def test_params_are_checked_against_the_tasks_form_schema_before_anything_is_written() -> None:
    kube = FakeKube()
    schema = {"type": "object", "properties": {"information": {"type": "string"}}}
    seed(kube, trigger_kwargs={**KWARGS, "params": {"information": ""}}, params_schema=schema)
    with pytest.raises(hitl_responses.RespondError, match="param 'information': 3 is not of type 'string'"):
        respond(kube, "task_1", params={"information": 3})
    trigger = asyncio.run(kube.get_custom(TRIGGERS, NS, "r1-pick-1-1"))
    assert trigger is not None and "status" not in trigger
    answered = respond(kube, "task_1", params={"information": "all good"})
    assert answered.event["params_input"] == {"information": "all good"}
