"""JSON that keeps datetimes: what triggers' kwargs and events and XCom values are on the wire.

Apart from `zonda.triggers` (which imports asyncio and the resource models) because every task try
serializes its XComs with `to_json_safe`.
"""

from __future__ import annotations

import enum
import json
import math
import re
import reprlib
from collections.abc import Mapping
from datetime import date, datetime
from typing import Any

#: An aware ISO 8601 datetime as `datetime.isoformat` writes it (offset or `Z` required, so that a
#: date-like string that was never a datetime is left alone).
_AWARE_ISO_DATETIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?(Z|[+-]\d{2}:\d{2})$")


#: How much of a refused value's repr a message quotes (a 10 MB bytes value must not make a 10 MB
#: message: a try's message travels in a 4,096-byte termination message, an Event, a log line).
REPR_LIMIT = 80


class NotJson(TypeError):
    """A part of a value JSON cannot carry faithfully: where it sits (`where`, subscripts from the
    value's top as JSON writes them, `["rows"][3]["when"]`; empty for the value itself), what it is
    (`part`: the value, or a mapping's key when `is_key`) and why (`reason`)."""

    def __init__(self, label: str, where: str, part: Any, reason: str, *, is_key: bool = False) -> None:
        self.label, self.where, self.part, self.reason, self.is_key = label, where, part, reason, is_key
        super().__init__(f"{label}{where}: {reason}")


def _repr_of_parts(limit: int) -> reprlib.Repr:
    shortening = reprlib.Repr()  # its keyword arguments are Python 3.12's
    shortening.maxlevel, shortening.maxstring, shortening.maxother = 2, limit, limit
    return shortening


_REPR = _repr_of_parts(REPR_LIMIT)


def short_repr(value: Any, limit: int = REPR_LIMIT) -> str:
    """`repr(value)` cut to `limit` characters, without building the whole repr of a long string or
    bytes value first (and never raising: a user's `__repr__` may)."""
    if isinstance(value, str | bytes | bytearray):
        text = repr(value[: limit + 1])
    elif isinstance(value, memoryview):
        text = f"<memoryview of {value.nbytes} bytes>"
    else:
        try:
            text = _REPR.repr(value)
        except Exception as error:  # a user's repr that raises still leaves the type to name
            text = f"<{type(value).__name__} whose repr raised {type(error).__name__}>"
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def subscript(key: str | int) -> str:
    """One step of a path into a value, as JSON (and Python) would write it: `["rows"]`, `[3]`."""
    return f"[{key}]" if isinstance(key, int) else f"[{json.dumps(key, ensure_ascii=False)}]"


def to_json_safe(value: Any, *, path: str = "value") -> Any:
    """`value` as the JSON the Kubernetes API stores: aware datetimes become ISO 8601 strings.

    Refuses (`NotJson`, a TypeError naming the offending part's path after `path`) anything JSON cannot
    carry faithfully, NaN and infinity included, rather than letting the apiserver or a later
    `json.dumps` fail far from the trigger or task that produced it.
    """
    return _safe(value, path, "")


def _safe(value: Any, label: str, where: str) -> Any:
    if value is None or (isinstance(value, bool | int | str) and not isinstance(value, enum.Enum)):
        return value
    if isinstance(value, float) and not isinstance(value, enum.Enum):
        if not math.isfinite(value):
            raise NotJson(label, where, value, f"float {value!r}: JSON has no NaN or infinity")
        return value
    if isinstance(value, enum.Enum):
        return _safe(value.value, label, where)
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            reason = f"naive datetime {value.isoformat()!r} cannot be stored (add a timezone)"
            raise NotJson(label, where, value, reason)
        return value.isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Mapping):
        encoded: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                reason = f"mapping key {short_repr(key)} is not a string"
                raise NotJson(label, where, key, reason, is_key=True)
            encoded[key] = _safe(item, label, where + subscript(key))
        return encoded
    if isinstance(value, list | tuple):
        return [_safe(item, label, where + subscript(index)) for index, item in enumerate(value)]
    reason = f"{type(value).__name__} {short_repr(value)} is not JSON-serializable"
    raise NotJson(label, where, value, reason)


def from_json_safe(value: Any) -> Any:
    """Undo `to_json_safe`: strings holding an aware ISO 8601 datetime become datetimes again."""
    if isinstance(value, str) and _AWARE_ISO_DATETIME.match(value):
        return datetime.fromisoformat(value)
    if isinstance(value, dict):
        return {key: from_json_safe(item) for key, item in value.items()}
    if isinstance(value, list):
        return [from_json_safe(item) for item in value]
    return value
