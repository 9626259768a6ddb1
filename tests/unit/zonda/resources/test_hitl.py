"""The pure decisions of a human-in-the-loop request: which answers are taken, what a timeout gives,
what the waiting task instance says. Expected behaviour from Airflow's standard provider 1.21.0
(`operators/hitl.py` validation, `triggers/hitl.py` timeout fallback)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from zonda.resources import hitl

NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)
SINGLE = hitl.Request(subject="Pick one", options=("task_1", "task_2", "task_3"))
MULTIPLE = hitl.Request(subject="Pick", options=("a", "b", "c"), multiple=True)
FORM = hitl.Request(subject="Fill", options=("OK",), defaults=("OK",), params={"information": ""})


@pytest.mark.parametrize(
    ("request_", "chosen", "params", "error"),
    [
        pytest.param(
            SINGLE,
            ["task_4"],
            {},
            "'task_4' not offered: the options are 'task_1', 'task_2', 'task_3'",
            id="an option not offered is refused, naming the options",
        ),
        pytest.param(SINGLE, [], {}, "choose an option: one of 'task_1'", id="no option is refused"),
        pytest.param(
            SINGLE,
            ["task_1", "task_2"],
            {},
            "only one option may be chosen (multiple=False)",
            id="two options for a single choice are refused",
        ),
        pytest.param(MULTIPLE, ["a", "a"], {}, "an option is given twice", id="an option twice is refused"),
        pytest.param(
            FORM,
            ["OK"],
            {"other": 1},
            "params 'other' are not asked: the params are 'information'",
            id="a param the form does not ask is refused",
        ),
        pytest.param(SINGLE, ["task_1"], {"x": 1}, "the params are none", id="params where none are asked"),
    ],
)
def test_answers_that_are_refused(
    request_: hitl.Request, chosen: list[str], params: dict[str, Any], error: str
) -> None:
    with pytest.raises(hitl.ResponseError, match=None) as raised:
        hitl.check_response(request_, chosen, params)
    assert error in str(raised.value)


def test_an_answer_keeps_the_forms_values_it_does_not_change() -> None:
    assert hitl.check_response(FORM, ["OK"], {}) == {"information": ""}
    assert hitl.check_response(FORM, ["OK"], {"information": "x"}) == {"information": "x"}
    assert hitl.check_response(MULTIPLE, ["c", "a"], {}) == {}


def test_the_answer_is_airflows_success_payload() -> None:
    event = hitl.response_event(["a"], {"k": 1}, responded_at=NOW, user={"id": "alice", "name": "alice"})
    assert event == {
        "chosen_options": ["a"],
        "params_input": {"k": 1},
        "responded_at": NOW.isoformat(),
        "responded_by_user": {"id": "alice", "name": "alice"},
        "timedout": False,
    }


def test_a_timeout_takes_the_defaults_or_fails_without_them() -> None:
    with_defaults = hitl.Request(subject="s", options=("a", "b"), defaults=("b",), params={"p": 1})
    assert hitl.timeout_event(with_defaults, now=NOW) == {
        "chosen_options": ["b"],
        "params_input": {"p": 1},
        "responded_at": NOW.isoformat(),
        "responded_by_user": None,
        "timedout": True,
    }
    assert hitl.timeout_event(SINGLE, now=NOW) == {"error": hitl.TIMEOUT_ERROR, "error_type": "timeout"}


@pytest.mark.parametrize(
    ("options", "defaults", "multiple", "error"),
    [
        pytest.param([], None, False, '"options" cannot be empty.', id="no options"),
        pytest.param(["a"], ["b"], False, "should be a subset of options", id="a default not offered"),
        pytest.param(
            ["a", "b"], ["a", "b"], False, "More than one defaults", id="two defaults, single choice"
        ),
    ],
)
def test_requests_airflow_refuses_when_the_dag_is_parsed(
    options: list[str], defaults: list[str] | None, multiple: bool, error: str
) -> None:
    with pytest.raises(ValueError, match=error):
        hitl.check_defaults(options, defaults, multiple)


@pytest.mark.parametrize(
    ("ti_state", "trigger_state", "is_hitl", "why"),
    [
        pytest.param("deferred", None, True, None, id="a deferred request not answered yet can be answered"),
        pytest.param("deferred", "fired", True, "answered already", id="a second answer is refused"),
        pytest.param("success", None, True, "it is success, not waiting", id="a finished task is refused"),
        pytest.param(
            "deferred", None, False, "not a human-in-the-loop", id="another trigger's wait is refused"
        ),
    ],
)
def test_when_a_task_instance_can_be_answered(
    ti_state: str, trigger_state: str | None, is_hitl: bool, why: str | None
) -> None:
    found = hitl.unanswerable(ti_state, trigger_state, is_hitl=is_hitl)
    assert (found is None) if why is None else (found is not None and why in found)


def test_the_waiting_reason_says_what_is_asked_and_how_to_answer() -> None:
    reason = hitl.waiting_reason(FORM, run_name="r1", task_id="wait_for_input")
    assert reason == (
        "Awaiting a human response: 'Fill'; one of 'OK'; params 'information'. "
        "Answer: zonda tasks respond r1 wait_for_input --option OPTION --param KEY=VALUE"
    )


def test_param_inputs_are_json_when_they_parse_else_text() -> None:
    assert hitl.parse_param_inputs(["n=3", "s=all good", "b=true", "q=\"3\""]) == {
        "n": 3, "s": "all good", "b": True, "q": "3",
    }  # fmt: skip
    with pytest.raises(hitl.ResponseError, match="expected key=value"):
        hitl.parse_param_inputs(["novalue"])
