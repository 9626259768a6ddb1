"""Airflow 3.1+'s human-in-the-loop operators, their trigger and `BaseNotifier`, as Airflow's standard
provider 1.21.0 defines them (`operators/hitl.py`, `triggers/hitl.py`): the request a task defers
with, the answer it resumes with, Approve/Reject and the branch choice, the timeout's defaults."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from zonda.exceptions import HITLRejectException, HITLTimeoutError, TaskDeferred
from zonda.operators.hitl import ApprovalOperator, HITLBranchOperator, HITLEntryOperator, HITLOperator
from zonda.resources import hitl
from zonda.triggers import serialize_trigger
from zonda.triggers.hitl import HITLTrigger
from zonda.triggers.testing import FakeClock
from zonda.utils.notifiers import BaseNotifier

START = datetime(2026, 1, 1, 12, tzinfo=UTC)


class Recording(BaseNotifier):
    template_fields = ("message",)
    sent: list[str] = []

    def __init__(self, message: str) -> None:
        self.message = message

    def notify(self, context: Any) -> None:
        url = HITLOperator.generate_link_to_ui_from_context(context=context, base_url="http://ui:8080")
        Recording.sent.append(f"{self.message} {url}")


def context_of(task: Any) -> dict[str, Any]:
    ti = SimpleNamespace(run_id="r1", task_id=task.task_id, map_index=-1)
    return {"task": task, "ti": ti, "task_instance": ti, "dag_run": SimpleNamespace(namespace="ns")}


def answer(options: list[str], params: dict[str, Any] | None = None) -> dict[str, Any]:
    return hitl.response_event(options, params or {}, responded_at=START, user={"id": "u", "name": "u"})


def test_execute_calls_the_notifiers_rendered_and_defers_with_the_request() -> None:
    Recording.sent = []
    task = HITLOperator(
        task_id="wait_for_option",
        subject="Choose",
        options=["option 1", "option 2"],
        defaults="option 2",
        response_timeout=timedelta(minutes=5),
        notifiers=[Recording("{{ task.subject }}: {{ task.options }}")],
        assigned_users={"id": "admin", "name": "admin"},
    )
    with FakeClock(START), pytest.raises(TaskDeferred) as deferred:
        task.execute(context_of(task))  # type: ignore[arg-type]
    assert Recording.sent == [
        "Choose: ['option 1', 'option 2'] http://ui:8080/runs/ns/r1/tasks/wait_for_option?map_index=-1"
    ]
    classpath, kwargs = serialize_trigger(deferred.value.trigger)
    assert classpath == hitl.TRIGGER_CLASSPATH and deferred.value.method_name == "execute_complete"
    request = hitl.Request.from_kwargs(kwargs)
    assert (request.subject, request.options, request.defaults) == (
        "Choose",
        ("option 1", "option 2"),
        ("option 2",),
    )
    assert request.assigned_users == ({"id": "admin", "name": "admin"},)
    assert request.timeout_datetime == (START + timedelta(minutes=5)).isoformat()


def test_the_answer_is_the_tasks_xcom_and_a_timeout_without_defaults_fails() -> None:
    task = HITLOperator(task_id="t", subject="s", options=["a", "b"], multiple=True)
    ret = task.execute_complete(context_of(task), answer(["a", "b"]))  # type: ignore[arg-type]
    assert ret["chosen_options"] == ["a", "b"] and ret["responded_by_user"] == {"id": "u", "name": "u"}
    with pytest.raises(HITLTimeoutError):
        task.execute_complete(context_of(task), {"error": hitl.TIMEOUT_ERROR, "error_type": "timeout"})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not in"):
        task.execute_complete(context_of(task), answer(["z"]))  # type: ignore[arg-type]


def test_approve_follows_downstream_reject_skips_it() -> None:
    approve = ApprovalOperator(task_id="ok", subject="s")
    approve.execute_complete(context_of(approve), answer(["Approve"]))  # type: ignore[arg-type]
    assert approve.follow_task_ids is None and not approve.skip_all_downstream
    reject = ApprovalOperator(task_id="ok", subject="s")
    reject.execute_complete(context_of(reject), answer(["Reject"]))  # type: ignore[arg-type]
    assert reject.follow_task_ids == []  # the direct downstream tasks are skipped, trigger rules act beyond
    everything = ApprovalOperator(task_id="ok", subject="s", ignore_downstream_trigger_rules=True)
    everything.execute_complete(context_of(everything), answer(["Reject"]))  # type: ignore[arg-type]
    assert everything.skip_all_downstream
    failing = ApprovalOperator(task_id="ok", subject="s", fail_on_reject=True)
    with pytest.raises(HITLRejectException):
        failing.execute_complete(context_of(failing), answer(["Reject"]))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="Passing options to ApprovalOperator is not allowed"):
        ApprovalOperator(task_id="x", subject="s", options=["a"])  # type: ignore[arg-type]


def test_the_chosen_options_are_the_branches_to_follow() -> None:
    branch = HITLBranchOperator(
        task_id="b", subject="s", options=["Run one", "task_2"], options_mapping={"Run one": "task_1"}
    )
    chosen = branch.execute_complete(context_of(branch), answer(["Run one"]))  # type: ignore[arg-type]
    assert chosen == ["task_1"] and branch.follow_task_ids == ["task_1"]
    with pytest.raises(ValueError, match="not in `options`"):
        HITLBranchOperator(task_id="b", subject="s", options=["a"], options_mapping={"z": "t"})


def test_an_entry_is_a_form_confirmed_with_ok() -> None:
    entry = HITLEntryOperator(task_id="e", subject="s", params={"information": "x"})
    assert (entry.options, entry.defaults) == (["OK"], ["OK"])
    ret = entry.execute_complete(context_of(entry), answer(["OK"], {"information": "y"}))  # type: ignore[arg-type]
    assert ret["params_input"] == {"information": "y"}


@pytest.mark.parametrize(
    ("defaults", "payload"),
    [
        pytest.param(["b"], {"chosen_options": ["b"], "timedout": True}, id="the defaults are the answer"),
        pytest.param(None, {"error_type": "timeout"}, id="without defaults, Airflow's timeout error"),
    ],
)
def test_the_trigger_fires_the_timeout_at_its_moment(
    defaults: list[str] | None, payload: dict[str, Any]
) -> None:
    trigger = HITLTrigger(options=["a", "b"], defaults=defaults, timeout_datetime=START + timedelta(hours=2))
    with FakeClock(START) as clock:

        async def first() -> Any:
            async for event in trigger.run():
                return event.payload

        event = clock.run(first())
        assert clock.utcnow() == START + timedelta(hours=2)
    assert {key: event[key] for key in payload} == payload
