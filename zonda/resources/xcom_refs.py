"""A reference to another task's XCom inside operator arguments (what Airflow's `XComArg` serializes to).

`{"__zonda_xcom__": {"task_id": "extract", "key": "return_value"}}` stands for that task's return value
(or, for another key, that item of a `multiple_outputs` dict) and is replaced by the value itself, with
its JSON type, when the task runs. A Jinja string could only give text; a TaskFlow function given
`other()` expects the value as it was returned.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

MARKER = "__zonda_xcom__"
RETURN_KEY = "return_value"


def reference(task_id: str, key: str = RETURN_KEY) -> dict[str, Any]:
    return {MARKER: {"task_id": task_id, "key": key}}


def is_reference(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {MARKER} and isinstance(value[MARKER], dict)


def referenced_task_ids(value: Any) -> set[str]:
    """Task ids referenced anywhere inside `value`."""
    if is_reference(value):
        return {value[MARKER]["task_id"]}
    if isinstance(value, dict):
        return set().union(*(referenced_task_ids(item) for item in value.values()))
    if isinstance(value, list | tuple):
        return set().union(*(referenced_task_ids(item) for item in value))
    return set()


def resolve(value: Any, pull: Callable[[str], Any]) -> Any:
    """`value` with every reference replaced by the XCom `pull(task_id)` returns (indexed by key)."""
    if is_reference(value):
        target = value[MARKER]
        result = pull(target["task_id"])
        key = target.get("key", RETURN_KEY)
        if key == RETURN_KEY:
            return result
        if not isinstance(result, dict) or key not in result:
            raise KeyError(
                f"task {target['task_id']!r} returned no {key!r}: multiple_outputs needs a dict holding it"
            )
        return result[key]
    if isinstance(value, dict):
        return {name: resolve(item, pull) for name, item in value.items()}
    if isinstance(value, list):
        return [resolve(item, pull) for item in value]
    if isinstance(value, tuple):
        return tuple(resolve(item, pull) for item in value)
    return value
