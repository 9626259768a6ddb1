"""How large a run's status may grow: the apiserver keeps a DagRun in one etcd value, and etcd refuses
a write over its `--max-request-bytes` (1.5 MiB by default) with ``500 etcdserver: request is too
large`` (a request body over 3 MiB gets ``413 Request entity too large`` first).

Without a check, a run whose mapped tasks outgrow that limit cannot be written any more: every pass
fails and retries, and the run never finishes. So an expansion is checked against a budget, well
under the limit, before it is made (`expansion_problem`, applied by `zonda.passes.mapped_instances`): a
mapped task that would take the status past it fails, as a `max_map_length` failure does. The
estimate is the status the pass is about to write, serialized, plus what its unfinished instances and
the new ones will weigh once finished (`INSTANCE_BYTES` each). An instance holding a large inline
XCom can still weigh more, so the controller also reports a refused write (`refused_write`): a
condition and one Event, and the status last written is kept as it is.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from zonda.resources import conditions, run_shards
from zonda.resources.models import FINISHED_TI_STATES, Condition

#: etcd's default `--max-request-bytes`: the most one object (metadata, spec and status) may weigh.
APISERVER_OBJECT_LIMIT_BYTES = 1_572_864
#: The default budget of a run's status: two thirds of the limit, leaving room for the spec,
#: metadata and instances that finish larger than estimated.
DEFAULT_STATUS_BUDGET_BYTES = 1_048_576
#: What a finished mapped instance is estimated to weigh in the status: measured 404 bytes (state,
#: try, pod name, three dates, duration, exit code, reason, a small XCom: docs/decisions.md), plus a
#: tenth; an inline XCom can add up to 1 KiB more. Two tasks of 1,024 instances fit the default
#: budget, a third does not (3 x 1,024 x 448 bytes is past 1 MiB, and 4 x 1,024 x 404 past the limit).
INSTANCE_BYTES = 448
#: What one shard's entry in its run's status weighs (name, instance count, resourceVersion).
SHARD_REF_BYTES = 120
#: The condition a refused status write sets (False) and a later successful one takes back (True).
STATUS_WRITTEN = "StatusWritten"

_FINISHED = frozenset(state.value for state in FINISHED_TI_STATES)


def wire_bytes(wire: Any) -> int:
    """The size of a JSON value as the API stores it (compact separators)."""
    return len(json.dumps(wire, separators=(",", ":")))


def projected_bytes(status_wire: Mapping[str, Any], new_instances: int) -> int:
    """The status's size once its unfinished task instances and `new_instances` more have finished,
    each at least `INSTANCE_BYTES`."""
    growth = sum(
        max(0, INSTANCE_BYTES - wire_bytes({key: ti}))
        for key, ti in (status_wire.get("taskInstances") or {}).items()
        if ti.get("state") not in _FINISHED
    )
    return wire_bytes(status_wire) + growth + new_instances * INSTANCE_BYTES


def projected_shard_bytes(status_wire: Mapping[str, Any], new_instances: int) -> int:
    """A run stored in shards (`zonda.resources.run_shards`): its largest object once the new
    instances are in, the DagRun (everything but the instances, one entry per shard) or a full shard
    of finished instances."""
    instances = len(status_wire.get("taskInstances") or {}) + new_instances
    rest = {k: v for k, v in status_wire.items() if k not in ("taskInstances", "taskInstanceShards")}
    shards = -(-instances // run_shards.SHARD_INSTANCES)
    return max(wire_bytes(rest) + shards * SHARD_REF_BYTES, run_shards.SHARD_INSTANCES * INSTANCE_BYTES)


def expansion_problem(
    length: int,
    new_instances: int,
    status_wire: Mapping[str, Any],
    budget_bytes: int,
    group: str | None = None,
    inline_limit: int | None = None,
) -> str | None:
    """The sentence failing a mapped task whose `length` instances (`new_instances` of them not in
    the status yet, with its mapped task `group`'s) would take the status past `budget_bytes`, or None.

    With `inline_limit`, a run that has more instances than that (or is stored in shards already) is
    checked object by object (`projected_shard_bytes`): its instances no longer add up in one object,
    and the budget is a safety net for what still would (a DAG spec or run-level lists that large)."""
    together = f" ({new_instances} with the other tasks of its mapped task group {group})" if group else ""
    instances = len(status_wire.get("taskInstances") or {}) + new_instances
    if inline_limit is not None and (
        run_shards.is_sharded(status_wire) or run_shards.needs_shards(instances, inline_limit)
    ):
        projected = projected_shard_bytes(status_wire, new_instances)
        if projected <= budget_bytes:
            return None
        return (
            f"The mapped task would have {length} instances{together}, taking the largest object of the "
            f"run's status (its DagRun or one of its DagRunShards of {run_shards.SHARD_INSTANCES} instances) "
            f"to about {projected:,} bytes, over the status budget of {budget_bytes:,} bytes "
            f"(--status-budget-bytes; the apiserver refuses an object over "
            f"{APISERVER_OBJECT_LIMIT_BYTES:,} bytes): map over fewer items or split the work across runs"
        )
    projected = projected_bytes(status_wire, new_instances)
    if projected <= budget_bytes:
        return None
    return (
        f"The mapped task would have {length} instances{together}, taking the run's status to about "
        f"{projected:,} bytes (about {INSTANCE_BYTES} bytes per finished instance), over the status "
        f"budget of {budget_bytes:,} bytes (--status-budget-bytes; the apiserver refuses an object over "
        f"{APISERVER_OBJECT_LIMIT_BYTES:,} bytes): map over fewer items or split the work across runs"
    )


def is_too_large(status: int, message: str) -> bool:
    """Whether an API error is the object size limit: etcd's 500 or the apiserver's 413."""
    return status == 413 or "request is too large" in message


def refused_write(
    old: list[Condition], size: int, error: str, *, now: datetime
) -> tuple[list[Condition], str | None]:
    """The conditions after the apiserver refused a status of `size` bytes as too large, and the
    Event's message when the condition turned False (one write and one Event, not one per pass)."""
    if any(c.type == STATUS_WRITTEN and c.status == "False" for c in old):
        return old, None
    message = (
        f"The apiserver refused this run's status of {size:,} bytes: {error} (etcd keeps an object of up "
        f"to about {APISERVER_OBJECT_LIMIT_BYTES:,} bytes). The status last written is kept and the run "
        "waits, its tries' results kept by their pods or processes, until a status fits; a lower "
        "--status-budget-bytes fails expansions this large instead"
    )
    new = conditions.set_condition(
        old, type=STATUS_WRITTEN, status=False, reason="StatusTooLarge", message=message, now=now
    )
    return new, message


#: When a run whose status was refused is passed again: soon after a first refusal, twice as long after
#: each refusal in a row, at most `REFUSED_RETRY_MAX` apart (its pods' and Triggers' changes wake it
#: too). A status that is too large is refused the same way until the run changes; a refusal that was
#: not its own size's (the object grown by another writer's metadata, then shrunk) must not leave a
#: run whose last pass it was waiting minutes for a pass that would now fit.
REFUSED_RETRY_FIRST = timedelta(seconds=5)
REFUSED_RETRY_MAX = timedelta(minutes=5)


def next_pass_after_refusal(refusals: int, wake_at: datetime | None, now: datetime) -> datetime:
    """When to pass a run again after its `refusals`-th refused status write in a row; `wake_at`: when
    the refused pass's plan asked to be woken (a retry delay, a sensor's next poke), kept when sooner,
    but never sooner than `REFUSED_RETRY_FIRST` (each refused pass costs a write of the whole status)."""
    doublings = min(max(0, refusals - 1), 16)  # 5 s x 2**6 is past the cap already
    backoff = now + min(REFUSED_RETRY_MAX, REFUSED_RETRY_FIRST * (1 << doublings))
    if wake_at is None:
        return backoff
    return min(backoff, max(wake_at, now + REFUSED_RETRY_FIRST))


def written(old: list[Condition], *, now: datetime) -> list[Condition]:
    """The conditions of a status that is written again: a refusal reported before is taken back."""
    if not any(c.type == STATUS_WRITTEN and c.status == "False" for c in old):
        return old
    return conditions.set_condition(
        old, type=STATUS_WRITTEN, status=True, reason="StatusWritten", message="", now=now
    )
