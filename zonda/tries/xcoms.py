"""XCom values: how they are serialised, how large ones are replaced by a reference to stored bytes.

A task's XComs travel from its runner to the controller in the 4,096-byte termination message and
live in the DagRun's status, so each must stay small. A value whose JSON is larger than
`INLINE_LIMIT_BYTES` is written by an XCom backend (see `controller.xcom.backends`) and replaced by a
*stored reference*, `{"__zonda_xcom_stored__": {"url": ..., "bytes": n}}`; a pull reads it back. The
default backend's URLs are `xcomchunks://NAMESPACE/NAME?chunks=N` (`zonda.resources.xcom_chunks`).

Values are JSON. As Airflow's XCom JSON encoder does, an aware datetime (or a date) is stored as its
ISO 8601 text, a tuple as a list; anything else JSON cannot hold fails the task with the key and type.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import PurePath
from typing import TYPE_CHECKING, Any
from uuid import UUID

from zonda.resources.json_values import NotJson, to_json_safe

if TYPE_CHECKING:  # the task runner serializes XComs without importing the resource models
    from zonda.resources.dagrun_models import DagRunStatus, TaskInstanceStatus

#: The key of a task's return value among its XComs (Airflow's XCOM_RETURN_KEY).
RETURN_KEY = "return_value"
#: A value whose JSON is larger than this goes to the XCom backend: status keeps a reference.
INLINE_LIMIT_BYTES = 1024
#: Airflow has no limit; Zonda refuses values larger than this unless configured otherwise.
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
STORED_MARKER = "__zonda_xcom_stored__"


class XComError(ValueError):
    """A value that cannot be an XCom (not JSON, too large, no backend for its size)."""


def serialize(key: str, value: Any) -> bytes:
    """The value's compact JSON, datetimes as ISO 8601; otherwise an XComError naming the key, where
    the part JSON cannot hold sits in the value, its type (and repr, cut) and what to return instead."""
    if not isinstance(key, str) or not key:
        raise XComError(f"XCom key must be a non-empty string, not {key!r}")
    try:
        safe = to_json_safe(value, path=f"XCom {key!r}")
    except NotJson as error:
        where = f" at {error.where}" if error.where else ""
        raise XComError(
            f"XCom {key!r}{where}: {error.reason}; {instead(error)}. An XCom must be "
            "JSON: a dict with string keys, list, str, finite number, bool, None or an aware datetime"
        ) from error
    return json.dumps(safe, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


def instead(error: NotJson) -> str:
    """What to return in place of a part JSON cannot hold, by its type (duck-typed for the libraries
    the task runner does not import: numpy, pandas, pydantic)."""
    part = error.part
    if error.is_key:
        return "use string keys instead: {str(k): v for k, v in value.items()}"
    if isinstance(part, float):
        return "return None, or a string such as 'nan', instead"
    if isinstance(part, datetime):
        return "return an aware datetime instead: value.replace(tzinfo=datetime.timezone.utc)"
    if isinstance(part, bytes | bytearray | memoryview):
        size = part.nbytes if isinstance(part, memoryview) else len(part)
        return (
            f"it is {size} bytes: return text instead, value.decode() for UTF-8 or "
            "base64.b64encode(value).decode() for binary data (large data belongs in object storage, "
            "its path in the XCom)"
        )
    if isinstance(part, set | frozenset):
        return "return a list instead: sorted(value)"
    if isinstance(part, timedelta):
        return "return value.total_seconds() instead"
    if isinstance(part, Decimal):
        return "return str(value) (exact) or float(value) instead"
    if isinstance(part, complex):
        return "return [value.real, value.imag] instead"
    if isinstance(part, UUID | PurePath):
        return "return str(value) instead"
    if dataclasses.is_dataclass(part) and not isinstance(part, type):
        return "return dataclasses.asdict(value) instead"
    for method, call in (
        ("model_dump", "value.model_dump(mode='json')"),  # pydantic
        ("tolist", "value.tolist()"),  # numpy arrays and scalars
        ("to_dict", "value.to_dict(orient='records')" if hasattr(part, "columns") else "value.to_dict()"),
    ):
        if callable(getattr(part, method, None)):
            return f"return {call} instead"
    return "return its data as dicts, lists, strings and numbers instead"


def deserialize(data: bytes) -> Any:
    return json.loads(data)


def stored_reference(url: str, size: int) -> dict[str, Any]:
    return {STORED_MARKER: {"url": url, "bytes": size}}


def is_stored(value: Any) -> bool:
    return (
        isinstance(value, dict) and set(value) == {STORED_MARKER} and isinstance(value[STORED_MARKER], dict)
    )


def stored_url(value: Mapping[str, Any]) -> str:
    return str(value[STORED_MARKER]["url"])


def stored_size(value: Mapping[str, Any]) -> int | None:
    size = value[STORED_MARKER].get("bytes")
    return size if isinstance(size, int) else None


def check_size(key: str, size: int, max_bytes: int) -> None:
    """Refuse a value over the configured maximum with its size and the limit."""
    if size > max_bytes:
        raise XComError(f"XCom {key!r} is {size} bytes; the limit is {max_bytes} bytes (xcom max size)")


def multiple_outputs(value: Any) -> dict[str, Any]:
    """The XComs `multiple_outputs` pushes: one per key of the returned dict, as Airflow does."""
    if not isinstance(value, dict):
        raise XComError(f"Returned output was type {type(value)} expected dictionary for multiple_outputs")
    for key in value:
        if not isinstance(key, str):
            raise XComError(
                f"Returned dictionary keys must be strings when using multiple_outputs, "
                f"found {key} ({type(key)}) instead"
            )
    return dict(value)


def object_path(
    namespace: str, run_name: str, task_id: str, try_number: int, key: str, map_index: int = -1
) -> str:
    """Where a stored value lives under the backend's base URL: unique per run, task, try and key."""
    index = "" if map_index < 0 else f"/{map_index}"
    return f"{namespace}/{run_name}/{task_id}{index}/{try_number}/{key}.json"


def upstream_xcoms(
    task_instances: Mapping[str, TaskInstanceStatus],
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """What a try may pull: return values, and the other XComs by task id and key.

    Status holds what Airflow's XCom table would: a try's pushes from when it reports them (at its
    end, or when it defers or reschedules) until a try starts that does not resume a deferral, or
    the task instance is cleared. A try still running has reported nothing yet.
    """
    returned = {tid: ti.xcom for tid, ti in task_instances.items() if ti.xcom is not None}
    keyed = {tid: dict(ti.xcoms) for tid, ti in task_instances.items() if ti.xcoms}
    return returned, keyed


@dataclass(frozen=True)
class EarlierRun:
    """A run of the same DAG as `include_prior_dates` sees it: when it is, and its status."""

    name: str
    #: Its logical date, or for a run without one (Airflow 3 manual) its run_after: Airflow 3.1's
    #: `XComModel.get_many` compares `coalesce(logical_date, run_after)`.
    logical_date: datetime
    created: str  # the object's creationTimestamp (RFC 3339, sorts as text): breaks logical-date ties
    status: DagRunStatus


def xcom_of(status: DagRunStatus, ti_key: str, key: str) -> Any:
    """The XCom `key` of a task instance (`ti_key`: task id, `[i]` if mapped) in a run's status, as
    status holds it (maybe a stored reference; see `upstream_xcoms`); None when it has none."""
    ti = status.task_instances.get(ti_key)
    if ti is None:
        return None
    return ti.xcom if key == RETURN_KEY else (ti.xcoms or {}).get(key)


def earlier_xcoms(
    runs: Iterable[EarlierRun], ti_key: str, key: str, *, at: datetime, this_run: str
) -> list[Any]:
    """Airflow's `include_prior_dates` beyond this run: the XCom in every other run whose logical date
    is at or before `at`, latest first (Airflow orders by execution date, then by when it was written).
    Airflow 3 takes a run without a logical date at its run_after (`EarlierRun.logical_date`, `at`) and
    orders by logical date, whose NULLs the database places (first on PostgreSQL): Zonda orders by the
    same coalesced date."""
    candidates = [run for run in runs if run.name != this_run and run.logical_date <= at]
    candidates.sort(key=lambda run: (run.logical_date, run.created), reverse=True)
    values = (xcom_of(run.status, ti_key, key) for run in candidates)
    return [value for value in values if value is not None]


def merge_pushes(
    earlier: Mapping[str, Any] | None,
    earlier_lengths: Mapping[str, int] | None,
    pushed: Mapping[str, Any],
    pushed_lengths: Mapping[str, int],
) -> tuple[dict[str, Any] | None, dict[str, int] | None]:
    """A resumed try's XComs joined to those its task instance already holds (pushed before deferring):
    Airflow writes each push at once and keeps them across a deferral, a later push of a key wins.

    The lengths (what mapped tasks expand over) follow their values: a key pushed again loses the
    length its earlier value had.
    """
    values = {**(earlier or {}), **pushed}
    lengths = {key: n for key, n in (earlier_lengths or {}).items() if key not in pushed}
    lengths.update(pushed_lengths)
    return values or None, lengths or None
