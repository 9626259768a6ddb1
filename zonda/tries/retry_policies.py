"""Airflow 3.3's pluggable retry policies (`airflow.sdk.definitions.retry_policy`), as the try applies them.

A task's `retry_policy` is evaluated by the task runner when the try raises (never for
`AirflowFailException` or `AirflowSensorTimeout`, which always fail at once): `FAIL` fails the task
without its remaining retries, `RETRY` retries it — still within `retries`, after the rule's
`retry_delay` if it names one (from the try's end, no backoff: Airflow's `retry_delay_override`) —
and `DEFAULT` (or no matching rule, or a policy that raises) keeps the task's own retry logic. The
policy travels as `{class, params}`: its class's import path and its `serialize()`, which the runner
gives back to the class's `deserialize`, as Airflow's DAG serialization does.
"""

from __future__ import annotations

import abc
import enum
import importlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

log = logging.getLogger(__name__)

__all__ = [
    "ExceptionRetryPolicy",
    "RetryAction",
    "RetryDecision",
    "RetryPolicy",
    "RetryPolicyInvalid",
    "RetryRule",
    "load_retry_policy",
    "policy_reference",
]


class RetryPolicyInvalid(ValueError):
    """A stored policy whose class does not import or whose parameters it rejects."""


class RetryAction(enum.Enum):
    """What should happen after a failure."""

    RETRY = "retry"  # retry, within the task's retries
    FAIL = "fail"  # fail now, skipping the remaining retries
    DEFAULT = "default"  # the task's standard retry logic


@dataclass(frozen=True)
class RetryDecision:
    """What a policy decided: the action, a delay for this retry (None: the task's), and why."""

    action: RetryAction = RetryAction.DEFAULT
    retry_delay: timedelta | None = None
    reason: str | None = None

    @classmethod
    def fail(cls, reason: str | None = None) -> RetryDecision:
        return cls(action=RetryAction.FAIL, reason=reason)

    @classmethod
    def retry(cls, delay: timedelta | None = None, reason: str | None = None) -> RetryDecision:
        return cls(action=RetryAction.RETRY, retry_delay=delay, reason=reason)

    @classmethod
    def default(cls) -> RetryDecision:
        return cls(action=RetryAction.DEFAULT)


class RetryPolicy(abc.ABC):
    """Airflow's base of retry policies: `evaluate` runs in the try, with the exception itself."""

    @abc.abstractmethod
    def evaluate(
        self, exception: BaseException, try_number: int, max_tries: int, context: Any = None
    ) -> RetryDecision:
        """Decide whether and how to retry after `exception` (try `try_number`, 1-based)."""

    def serialize(self) -> dict[str, Any]:
        raise NotImplementedError(f"{type(self).__name__} must implement serialize()")

    @classmethod
    def deserialize(cls, data: dict[str, Any]) -> RetryPolicy:
        raise NotImplementedError


ExceptionSpec = type[BaseException] | str


def _import_string(path: str) -> Any:
    module_name, _, attribute = path.rpartition(".")
    return getattr(importlib.import_module(module_name), attribute)


@dataclass
class RetryRule:
    """One exception (a class, a dotted import path, or a list of either) -> what to do."""

    exception: ExceptionSpec | list[ExceptionSpec]
    action: RetryAction = RetryAction.RETRY
    retry_delay: timedelta | None = None
    reason: str | None = None
    match_subclasses: bool = True
    _resolved: list[type[BaseException]] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for spec in self._specs:
            if isinstance(spec, str) and (not spec or "." not in spec):
                raise ValueError(
                    "RetryRule exception string must be a dotted import path "
                    f"(e.g. 'builtins.ValueError'), got {spec!r}"
                )

    @property
    def _specs(self) -> list[ExceptionSpec]:
        return self.exception if isinstance(self.exception, list) else [self.exception]

    @property
    def exception_path(self) -> str:
        paths = [
            spec if isinstance(spec, str) else f"{spec.__module__}.{spec.__qualname__}"
            for spec in self._specs
        ]
        return ",".join(paths)

    def matches(self, exc: BaseException) -> bool:
        """Airflow's: an exception path that does not import matches nothing (logged)."""
        if self._resolved is None:
            resolved: list[type[BaseException]] = []
            for spec in self._specs:
                if isinstance(spec, type):
                    resolved.append(spec)
                    continue
                try:
                    resolved.append(_import_string(spec))
                except (ImportError, AttributeError):
                    log.warning("Could not import exception class %r, it will not match", spec)
            self._resolved = resolved
        if not self._resolved:
            return False
        if self.match_subclasses:
            return isinstance(exc, tuple(self._resolved))
        return type(exc) in self._resolved

    def serialize(self) -> dict[str, Any]:
        paths = [
            spec if isinstance(spec, str) else f"{spec.__module__}.{spec.__qualname__}"
            for spec in self._specs
        ]
        result: dict[str, Any] = {
            "exception": paths if len(paths) > 1 else paths[0],
            "action": self.action.value,
            "match_subclasses": self.match_subclasses,
        }
        if self.retry_delay is not None:
            result["retry_delay"] = self.retry_delay.total_seconds()
        if self.reason is not None:
            result["reason"] = self.reason
        return result

    @classmethod
    def deserialize(cls, data: Mapping[str, Any]) -> RetryRule:
        return cls(
            exception=data["exception"],
            action=RetryAction(data["action"]),
            retry_delay=timedelta(seconds=data["retry_delay"]) if "retry_delay" in data else None,
            reason=data.get("reason"),
            match_subclasses=data.get("match_subclasses", True),
        )


class ExceptionRetryPolicy(RetryPolicy):
    """Rules in order, the first that matches wins; none: `default`."""

    def __init__(self, rules: list[RetryRule], default: RetryAction = RetryAction.DEFAULT) -> None:
        self.rules = rules
        self.default = default

    def evaluate(
        self, exception: BaseException, try_number: int, max_tries: int, context: Any = None
    ) -> RetryDecision:
        for rule in self.rules:
            if rule.matches(exception):
                return RetryDecision(
                    action=rule.action,
                    retry_delay=rule.retry_delay,
                    reason=rule.reason or f"Matched rule for {type(exception).__name__}",
                )
        return RetryDecision(action=self.default)

    def serialize(self) -> dict[str, Any]:
        return {
            "__type": "ExceptionRetryPolicy",
            "rules": [rule.serialize() for rule in self.rules],
            "default": self.default.value,
        }

    @classmethod
    def deserialize(cls, data: dict[str, Any]) -> ExceptionRetryPolicy:
        rules = [RetryRule.deserialize(rule) for rule in data["rules"]]
        return cls(rules=rules, default=RetryAction(data.get("default", "default")))


def policy_reference(policy: RetryPolicy) -> dict[str, Any]:
    """The `{class, params}` a manifest stores for `policy`."""
    klass = type(policy)
    return {"class": f"{klass.__module__}.{klass.__qualname__}", "params": policy.serialize()}


def load_retry_policy(reference: Mapping[str, Any]) -> RetryPolicy:
    """The policy a stored `{class, params}` names."""
    path = str(reference.get("class", ""))
    try:
        klass = _import_string(path)
    except Exception as exc:  # ImportError, AttributeError, ValueError, or what its module raises
        raise RetryPolicyInvalid(
            f"retry policy {path!r} cannot be imported ({type(exc).__name__}: {exc})"
        ) from exc
    if not (isinstance(klass, type) and issubclass(klass, RetryPolicy)):
        raise RetryPolicyInvalid(f"retry policy {path!r} is not a RetryPolicy (airflow.sdk.RetryPolicy)")
    try:
        return klass.deserialize(dict(reference.get("params") or {}))
    except Exception as exc:
        raise RetryPolicyInvalid(f"retry policy {path!r} rejected its parameters: {exc}") from exc
