"""Error messages for a DAG spec that does not validate: field paths, "did you mean", readable patterns.

Kept apart from `zonda.specs.dags` so resolution reads as the scheduler's contract, not as message formatting.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Mapping
from typing import Any

import pydantic

from zonda.resources.durations import DURATION_PATTERN
from zonda.resources.models import TASK_ID_PATTERN, DagSpec

#: How many close matches a "did you mean" suggests.
MAX_SUGGESTIONS = 3


def did_you_mean(candidates: list[str]) -> str:
    return f" (did you mean {' or '.join(repr(c) for c in candidates)}?)" if candidates else ""


def describe_validation_error(error: Mapping[str, Any]) -> str:
    location: tuple[str | int, ...] = tuple(error["loc"])
    path = "spec" + "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in location)
    kind = error["type"]
    value = error.get("input")
    if kind == "extra_forbidden":
        model = _model_at(location[:-1])
        known = [field.alias or name for name, field in model.model_fields.items()] if model else []
        suggestion = difflib.get_close_matches(str(location[-1]), known, MAX_SUGGESTIONS)
        return f"{path}: unknown field{did_you_mean(suggestion)}"
    if kind == "missing":
        return f"{path}: required field is missing"
    if kind == "string_pattern_mismatch":
        pattern = error.get("ctx", {}).get("pattern")
        if pattern == DURATION_PATTERN:
            return f"{path}: invalid duration {value!r}: expected e.g. '30s', '5m' or '1h30m'"
        if pattern == TASK_ID_PATTERN:
            return (
                f"{path}: invalid id {value!r}: use up to 250 letters, digits, '_', '-' or '.', "
                "starting with a letter, digit or '_'"
            )
    message = f"{path}: {error['msg']}"
    if isinstance(value, str | int | float | bool) and kind != "missing":
        shown = repr(value)
        message += f" (got {shown[:77] + '...' if len(shown) > 80 else shown})"
    return message


def _model_at(location: tuple[str | int, ...]) -> type[pydantic.BaseModel] | None:
    """The model class found at `location` under `DagSpec` (for suggesting field names)."""
    annotation: Any = DagSpec
    for part in location:
        annotation = _unwrap(annotation)
        if isinstance(part, str) and _is_model(annotation):
            fields = {field.alias or name: field for name, field in annotation.model_fields.items()}
            field_info = fields.get(part) or annotation.model_fields.get(part)
            if field_info is None:
                return None
            annotation = field_info.annotation
        elif typing.get_origin(annotation) in (list, dict):
            annotation = typing.get_args(annotation)[-1]
        else:
            return None
    annotation = _unwrap(annotation)
    return annotation if _is_model(annotation) else None


def _is_model(annotation: Any) -> typing.TypeGuard[type[pydantic.BaseModel]]:
    return isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel)


def _unwrap(annotation: Any) -> Any:
    """`X | None` -> X."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        members = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        if len(members) == 1:
            return _unwrap(members[0])
    return annotation
