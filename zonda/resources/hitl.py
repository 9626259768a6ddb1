"""Human-in-the-loop requests and answers as they are stored: the pure decisions around them.

A `HITLOperator` (Airflow 3.1+'s human-in-the-loop operators, `zonda.operators.hitl`) defers to a
`zonda.triggers.hitl.HITLTrigger`; the request (subject, options, defaults, params...) is that
Trigger's `spec.kwargs`, so it is stored where every deferral is, and shown where users look
(the task instance's reason in `kubectl describe dagrun`, the pass's Event). A human answers by
writing the event into the Trigger's status (`zonda tasks respond`, the UI's form): `fired` with
Airflow's success payload. A timeout is the trigger's own event (`timeout_event`). Whichever status
write comes first wins, by the resourceVersion precondition every Trigger status write carries.

Purely computational: the clock is passed in (`responded_at`, `now`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

#: The trigger a HITL operator defers to (`zonda.triggers.hitl.HITLTrigger`).
TRIGGER_CLASSPATH = "zonda.triggers.hitl.HITLTrigger"
#: Airflow's error payload when the response timeout passed with no defaults to fall back to.
TIMEOUT_ERROR = "The timeout has passed, and the response has not yet been received."


class ResponseError(ValueError):
    """An answer that cannot be taken: the message says why, in a sentence a responder can act on."""


@dataclass(frozen=True)
class Request:
    """What a deferred HITL task asks (the HITLTrigger's kwargs)."""

    subject: str
    options: tuple[str, ...]
    body: str | None = None
    defaults: tuple[str, ...] | None = None
    multiple: bool = False
    params: Mapping[str, Any] = field(default_factory=dict)
    assigned_users: tuple[Mapping[str, str], ...] = ()
    timeout_datetime: str | None = None

    @classmethod
    def from_kwargs(cls, kwargs: Mapping[str, Any]) -> Request:
        defaults = kwargs.get("defaults")
        timeout = kwargs.get("timeout_datetime")
        return cls(
            subject=str(kwargs.get("subject") or ""),
            options=tuple(str(option) for option in kwargs.get("options") or ()),
            body=kwargs.get("body"),
            defaults=tuple(defaults) if defaults is not None else None,
            multiple=bool(kwargs.get("multiple")),
            params=dict(kwargs.get("params") or {}),
            assigned_users=tuple(kwargs.get("assigned_users") or ()),
            timeout_datetime=timeout.isoformat() if isinstance(timeout, datetime) else timeout,
        )


def request_of(classpath: str | None, kwargs: Mapping[str, Any] | None) -> Request | None:
    """The HITL request a deferral carries, or None when it is another trigger's."""
    if classpath != TRIGGER_CLASSPATH:
        return None
    return Request.from_kwargs(kwargs or {})


def check_defaults(options: Sequence[str], defaults: Sequence[str] | None, multiple: bool) -> None:
    """Airflow's `validate_options` and `validate_defaults`, at DAG-parse time (ValueError)."""
    if not options:
        raise ValueError('"options" cannot be empty.')
    if defaults is not None:
        if not set(defaults).issubset(options):
            raise ValueError(f'defaults "{list(defaults)}" should be a subset of options "{list(options)}"')
        if multiple is False and len(defaults) > 1:
            raise ValueError('More than one defaults given when "multiple" is set to False.')


def parse_param_inputs(pairs: Sequence[str]) -> dict[str, Any]:
    """`--param key=value` pairs: the value is JSON when it parses as JSON (`3`, `true`, `"x"`,
    `[1]`), else the text itself."""
    import json

    values: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key:
            raise ResponseError(f"--param {pair!r}: expected key=value")
        try:
            values[key] = json.loads(text)
        except ValueError:
            values[key] = text
    return values


def check_response(
    request: Request, chosen: Sequence[str], params_input: Mapping[str, Any]
) -> dict[str, Any]:
    """The params input the answer gives (the request's values with the human's over them), or
    `ResponseError`: an option not offered, none or several for a single choice, a param not asked."""
    if not chosen:
        raise ResponseError(f"choose an option: one of {_listed(request.options)}")
    if unknown := [option for option in chosen if option not in request.options]:
        raise ResponseError(f"{_listed(unknown)} not offered: the options are {_listed(request.options)}")
    if len(set(chosen)) != len(chosen):
        raise ResponseError(f"an option is given twice: {_listed(chosen)}")
    if not request.multiple and len(chosen) > 1:
        raise ResponseError(f"only one option may be chosen (multiple=False), got {_listed(chosen)}")
    if unknown := sorted(set(params_input) - set(request.params)):
        asked = _listed(sorted(request.params)) if request.params else "none"
        raise ResponseError(f"params {_listed(unknown)} are not asked: the params are {asked}")
    return {**request.params, **params_input}


def response_event(
    chosen: Sequence[str],
    params_input: Mapping[str, Any],
    *,
    responded_at: datetime,
    user: Mapping[str, str] | None,
) -> dict[str, Any]:
    """Airflow's `HITLTriggerEventSuccessPayload` for a human's answer (JSON: the time as ISO 8601)."""
    return {
        "chosen_options": list(chosen),
        "params_input": dict(params_input),
        "responded_at": responded_at.isoformat(),
        "responded_by_user": dict(user) if user is not None else None,
        "timedout": False,
    }


def timeout_event(request: Request, *, now: datetime) -> dict[str, Any]:
    """The trigger's event once the response timeout passed: the defaults as the answer (Airflow's
    timeout fallback, `timedout: true`, no user), or Airflow's timeout error when there are none."""
    if request.defaults is None:
        return {"error": TIMEOUT_ERROR, "error_type": "timeout"}
    return {
        "chosen_options": list(request.defaults),
        "params_input": dict(request.params),
        "responded_at": now.isoformat(),
        "responded_by_user": None,
        "timedout": True,
    }


def unanswerable(ti_state: str | None, trigger_state: str | None, *, is_hitl: bool) -> str | None:
    """Why a task instance cannot be answered now (None: it can), from its state and its Trigger's."""
    if ti_state != "deferred":
        return f"it is {ti_state or 'not started'}, not waiting for a response"
    if not is_hitl:
        return "it waits for a trigger that is not a human-in-the-loop request"
    if trigger_state == "fired":
        return "it has been answered already (or its response timeout chose the defaults)"
    if trigger_state == "failed":
        return "its request failed"
    return None


def waiting_reason(request: Request, *, run_name: str, task_id: str) -> str:
    """The deferred task instance's reason: what is asked and how to answer it."""
    choice = "one or more of" if request.multiple else "one of"
    how = f"zonda tasks respond {run_name} {task_id} --option OPTION"
    if request.params:
        how += " --param KEY=VALUE"
    parts = [f"Awaiting a human response: {request.subject.strip()!r}; {choice} {_listed(request.options)}"]
    if request.params:
        parts.append(f"params {_listed(sorted(request.params))}")
    if request.defaults is not None and request.timeout_datetime:
        parts.append(f"defaults {_listed(request.defaults)} at {request.timeout_datetime}")
    elif request.timeout_datetime:
        parts.append(f"fails at {request.timeout_datetime} without a response")
    return "; ".join(parts) + f". Answer: {how}"


def _listed(values: Sequence[str]) -> str:
    return ", ".join(repr(value) for value in values)
