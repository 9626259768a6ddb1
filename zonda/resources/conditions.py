"""Kubernetes-style status conditions, updated the way cert-manager does it.

`lastTransitionTime` moves only when a condition's `status` changes, so `kubectl describe` tells
when something became true, not when the controller last looked.
"""

from __future__ import annotations

from datetime import datetime

from zonda.resources.models import Condition


def set_condition(
    conditions: list[Condition],
    *,
    type: str,
    status: bool | str,
    reason: str,
    message: str = "",
    now: datetime,
    generation: int | None = None,
) -> list[Condition]:
    """A new list with `type` set; other conditions are kept in order."""
    value = ("True" if status else "False") if isinstance(status, bool) else status
    existing = next((c for c in conditions if c.type == type), None)
    transition = existing.last_transition_time if existing is not None and existing.status == value else now
    updated = Condition(
        type=type,
        status=value,
        reason=reason,
        message=message,
        last_transition_time=transition,
        observed_generation=generation,
    )
    result = [updated if c.type == type else c for c in conditions]
    if existing is None:
        result.append(updated)
    return result


def condition_turned(before: list[Condition], after: list[Condition], type: str) -> bool:
    """True when `type`'s status or reason differs (its message alone may change without an Event:
    "still running" after "did not answer" is the same news)."""
    old = next((c for c in before if c.type == type), None)
    new = next((c for c in after if c.type == type), None)
    if old is None or new is None:
        return old is not new
    return (old.status, old.reason) != (new.status, new.reason)


def condition_changed(before: list[Condition], after: list[Condition], type: str) -> bool:
    """True when `type`'s status or reason differs: the moment to post an Event about it."""
    old = next((c for c in before if c.type == type), None)
    new = next((c for c in after if c.type == type), None)
    if old is None or new is None:
        return old is not new
    return (old.status, old.reason, old.message) != (new.status, new.reason, new.message)
