"""JSON that keeps datetimes: what triggers' kwargs and events and XCom values are on the wire.

Apart from `zonda.triggers` (which imports asyncio and the resource models) because every task try
serializes its XComs with `to_json_safe`.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from datetime import date, datetime
from typing import Any

#: An aware ISO 8601 datetime as `datetime.isoformat` writes it (offset or `Z` required, so that a
#: date-like string that was never a datetime is left alone).
_AWARE_ISO_DATETIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?(Z|[+-]\d{2}:\d{2})$")


def to_json_safe(value: Any, *, path: str = "value") -> Any:
    """`value` as the JSON the Kubernetes API stores: aware datetimes become ISO 8601 strings.

    Refuses (TypeError naming the offending path) anything JSON cannot carry faithfully, rather than
    letting the apiserver or a later `json.dumps` fail far from the trigger that produced it.
    """
    if value is None or (isinstance(value, bool | int | float | str) and not isinstance(value, enum.Enum)):
        return value
    if isinstance(value, enum.Enum):
        return to_json_safe(value.value, path=path)
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise TypeError(f"{path}: naive datetime {value.isoformat()!r} cannot be stored; add a timezone")
        return value.isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Mapping):
        encoded: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"{path}: mapping key {key!r} is not a string")
            encoded[key] = to_json_safe(item, path=f"{path}[{key!r}]")
        return encoded
    if isinstance(value, list | tuple):
        return [to_json_safe(item, path=f"{path}[{index}]") for index, item in enumerate(value)]
    raise TypeError(f"{path}: {type(value).__name__} {value!r} is not JSON-serializable")


def from_json_safe(value: Any) -> Any:
    """Undo `to_json_safe`: strings holding an aware ISO 8601 datetime become datetimes again."""
    if isinstance(value, str) and _AWARE_ISO_DATETIME.match(value):
        return datetime.fromisoformat(value)
    if isinstance(value, dict):
        return {key: from_json_safe(item) for key, item in value.items()}
    if isinstance(value, list):
        return [from_json_safe(item) for item in value]
    return value
