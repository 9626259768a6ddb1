"""Airflow's custom priority weight strategies (`weight_rule=` a `PriorityWeightStrategy`).

Airflow (`airflow.task.priority_strategy`) stores a task instance's `priority_weight` as its
`weight_rule.get_weight(ti)` when the task instance is created (`TaskInstance.insert_mapping`, try
number 0) and again when it is cleared (`refresh_from_task`, at the try number it had then); a retry
keeps it. The scheduler queues by that stored weight. Zonda keeps no such column: a clear sets
`max_tries = try_number + retries` (Airflow's), so the tries a task instance had when it was last
created or cleared are `max_tries - retries`, and its weight is the strategy's for that try number —
the value Airflow stored. The class is imported by path (a DAGs folder's `plugins/` package, as
Airflow's plugins folder; registering it in an `AirflowPlugin` is not needed), its `serialize()` is
stored and handed to `deserialize`, as Airflow's DAG serialization does.

`get_weight` is a user's code that the controller calls in its passes: where the process bounds it
(`bound_calls`: the controller, with `controller.processes.deadlines.any_thread_deadline`) a call
past `WEIGHT_SECONDS` is stopped, the task instance gets its task's own `priority_weight` (what
Airflow keeps when `get_weight` raises), and the strategy is not called again by this process (a
strategy that hangs would otherwise cost every pass a second per task instance). Why is kept for the
caller to say where the user looks (`take_timeouts`: the controller posts it as a Warning Event on
the run whose pass met it).
"""

from __future__ import annotations

import functools
import importlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from zonda.specs.params import CheckTimeout, Deadline, no_deadline

__all__ = [
    "PriorityWeightStrategy",
    "StrategyInvalid",
    "load_priority_strategy",
    "strategy_weight",
    "tries_when_created",
]

#: Seconds one `get_weight` may take where the process bounds it (`bound_calls`).
WEIGHT_SECONDS = 1.0


#: What a `get_weight` call runs under: nothing by default; the controller installs a deadline.
_deadline: Deadline = no_deadline
#: Strategies (by class) whose `get_weight` ran past the limit in this process: not called again.
_too_slow: set[str] = set()
#: Why, for each strategy stopped since the caller last took them (`take_timeouts`).
_timeouts: list[str] = []


def bound_calls(deadline: Deadline) -> None:
    """Run every `get_weight` under `deadline(WEIGHT_SECONDS)`, which raises `CheckTimeout` when it
    passes (the module says what follows)."""
    global _deadline
    _deadline = deadline


def take_timeouts() -> list[str]:
    """The messages of the strategies stopped since the last call (each once), then forgotten."""
    taken = list(_timeouts)
    _timeouts.clear()
    return taken


class StrategyInvalid(ValueError):
    """A strategy class path that does not import, or names no `PriorityWeightStrategy`."""


class PriorityWeightStrategy:
    """Airflow's base of priority weight strategies: `get_weight(ti)` gives a task instance's weight."""

    def get_weight(self, ti: Any) -> int:
        raise NotImplementedError

    @classmethod
    def deserialize(cls, data: dict[str, Any]) -> PriorityWeightStrategy:
        return cls(**data)

    def serialize(self) -> dict[str, Any]:
        return {}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, type(self)) and self.serialize() == other.serialize()

    def __hash__(self) -> int:
        return hash(json.dumps(self.serialize(), sort_keys=True, default=str))


@dataclass(frozen=True)
class StrategyTask:
    """What `ti.task` offers a strategy: the task's own fields."""

    task_id: str
    dag_id: str
    priority_weight: int
    retries: int
    pool: str
    queue: str | None


@dataclass(frozen=True)
class StrategyTaskInstance:
    """The task instance a strategy's `get_weight` is given, as Airflow's `TaskInstance` names it."""

    dag_id: str
    task_id: str
    run_id: str
    map_index: int
    try_number: int
    task: StrategyTask


def load_priority_strategy(class_path: str, params: Mapping[str, Any]) -> PriorityWeightStrategy:
    """The strategy `class_path` (``pkg.mod.Class``) names, built from its stored `serialize()`."""
    return _load(class_path, json.dumps(dict(params), sort_keys=True))


@functools.lru_cache(maxsize=256)
def _load(class_path: str, params: str) -> PriorityWeightStrategy:
    module_name, _, attribute = class_path.strip().rpartition(".")
    if not module_name:
        raise StrategyInvalid(f"priority weight strategy {class_path!r}: expected 'package.module.Class'")
    try:
        cls = getattr(importlib.import_module(module_name), attribute)
    except Exception as exc:  # ImportError, AttributeError, or anything the module body raises
        raise StrategyInvalid(
            f"priority weight strategy {class_path!r} cannot be imported ({type(exc).__name__}: {exc})"
        ) from exc
    if not (isinstance(cls, type) and issubclass(cls, PriorityWeightStrategy)):
        raise StrategyInvalid(
            f"priority weight strategy {class_path!r} is not a PriorityWeightStrategy "
            f"(airflow.task.priority_strategy): {cls!r}"
        )
    try:
        return cls.deserialize(json.loads(params))
    except Exception as exc:
        raise StrategyInvalid(f"priority weight strategy {class_path!r} rejected {params}: {exc}") from exc


def tries_when_created(*, max_tries: int | None, retries: int) -> int:
    """The try number a task instance had when it was created (0) or last cleared (see the module)."""
    return max(0, max_tries - retries) if max_tries is not None else 0


def strategy_weight(strategy: PriorityWeightStrategy, ti: StrategyTaskInstance) -> int:
    """`get_weight(ti)`; Airflow's `refresh_from_task` keeps the task's `priority_weight` if it raises,
    and so does a call past the process's limit (the module)."""
    kind = f"{type(strategy).__module__}.{type(strategy).__qualname__}"
    if kind in _too_slow:
        return ti.task.priority_weight
    try:
        with _deadline(WEIGHT_SECONDS):
            return int(strategy.get_weight(ti))
    except CheckTimeout:
        message = (
            f"priority weight strategy {kind}.get_weight took more than {WEIGHT_SECONDS:g} s (task "
            f"{ti.task_id!r} of run {ti.run_id!r}) and was stopped: this controller calls it no more, its "
            f"task instances get their task's priority_weight ({ti.task.priority_weight} for this one)"
        )
        _too_slow.add(kind)
        _timeouts.append(message)
        return ti.task.priority_weight
    except Exception:  # a user's method: a failure leaves the task's own weight, as Airflow's refresh
        return ti.task.priority_weight
