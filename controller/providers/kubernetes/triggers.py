"""A Kubernetes-native trigger: wait until an object has a condition, or a field has a value.

`ObjectConditionTrigger` polls one object through the triggerer's API connection: it fires when
``.status.conditions[type=<condition>].status == "True"`` (what ``kubectl wait --for=condition=X``
checks) or when the dotted `field_path` equals `value` (``kubectl wait --for=jsonpath=...``), e.g. a
Job's ``status.succeeded == 1``.

It lives in `controller` because it talks to the API (through `Kube.get_path`, with API discovery of
the plural of an arbitrary kind).
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import AsyncIterator, Mapping
from datetime import datetime
from typing import Any

from controller.kube import Kube, KubeError
from zonda.resources import wire
from zonda.triggers import BaseEventTrigger, BaseTrigger, TriggerEvent

#: The triggerer's API connection; triggers started by it inherit it. Outside a triggerer (a test, a
#: script) `ObjectConditionTrigger` connects by itself and closes the connection in `cleanup()`.
current_kube: contextvars.ContextVar[Kube | None] = contextvars.ContextVar("zonda_current_kube", default=None)

#: HTTP statuses after which polling goes on: the apiserver is busy or briefly unreachable.
_TRANSIENT = frozenset({0, 429, 500, 502, 503, 504})

_resources: dict[tuple[str, str], tuple[str, bool]] = {}


async def _get_json(kube: Kube, path: str) -> Any:
    return await kube.get_path(path)


def _group_path(api_version: str) -> str:
    return "/api/v1" if api_version == "v1" else f"/apis/{api_version}"


async def resolve_resource(kube: Kube, api_version: str, kind_or_plural: str) -> tuple[str, bool]:
    """(plural, namespaced) of a kind (``Job``) or plural (``jobs``) in `api_version`, by discovery."""
    key = (api_version, kind_or_plural)
    if key not in _resources:
        listing = await _get_json(kube, _group_path(api_version))
        for resource in (listing or {}).get("resources", []):
            if "/" in resource["name"]:
                continue  # a subresource such as jobs/status
            if kind_or_plural in (resource["kind"], resource["name"]):
                _resources[key] = (resource["name"], bool(resource.get("namespaced")))
                break
        else:
            raise LookupError(f"The API has no resource {kind_or_plural!r} in {api_version!r}")
    return _resources[key]


async def get_object(
    kube: Kube, api_version: str, kind_or_plural: str, namespace: str | None, name: str
) -> dict[str, Any] | None:
    """Any object by apiVersion, kind (or plural), namespace and name; None if it does not exist."""
    plural, namespaced = await resolve_resource(kube, api_version, kind_or_plural)
    scope = f"/namespaces/{namespace}" if namespaced and namespace else ""
    obj: dict[str, Any] | None = await _get_json(kube, f"{_group_path(api_version)}{scope}/{plural}/{name}")
    return obj


def field_value(obj: Mapping[str, Any], field_path: str) -> Any:
    """The value at a dotted path (``status.succeeded``; a number indexes a list), None if absent."""
    current: Any = obj
    for part in field_path.strip(".").split("."):
        if isinstance(current, Mapping):
            current = current.get(part)
        elif isinstance(current, list) and part.isdigit() and int(part) < len(current):
            current = current[int(part)]
        else:
            return None
    return current


def _as_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


def values_equal(actual: Any, expected: Any) -> bool:
    """Equal as JSON values, or as text the way ``kubectl wait --for=jsonpath`` compares them.

    The text comparison lets a YAML author write ``value: 1`` or ``value: "1"`` alike.
    """
    if actual is None or expected is None:
        return actual is expected
    if isinstance(expected, datetime) and isinstance(actual, str):
        try:
            return wire.parse_time(actual) == expected
        except ValueError:
            return False
    if isinstance(actual, bool) or isinstance(expected, bool):  # True == 1 in Python, not in YAML
        return _as_text(actual) == _as_text(expected)
    if actual == expected:
        return True
    return not isinstance(actual, dict | list) and _as_text(actual) == _as_text(expected)


def condition_status(obj: Mapping[str, Any], condition: str) -> str | None:
    """The `status` of condition `condition` in ``.status.conditions``, None if absent."""
    for entry in field_value(obj, "status.conditions") or []:
        if isinstance(entry, Mapping) and entry.get("type") == condition:
            status = entry.get("status")
            return None if status is None else str(status)
    return None


def match_object(
    obj: Mapping[str, Any], *, condition: str | None, field_path: str | None, value: Any
) -> dict[str, Any] | None:
    """What the event reports if `obj` satisfies the wait, else None. Purely computational."""
    if condition is not None:
        status = condition_status(obj, condition)
        return {"condition": condition, "status": status} if status == "True" else None
    assert field_path is not None
    actual = field_value(obj, field_path)
    ready = actual is not None if value is None else values_equal(actual, value)
    return {"fieldPath": field_path, "value": actual} if ready else None


class KubeTrigger(BaseTrigger):
    """A trigger that reads the API: the triggerer's connection, or its own outside a triggerer."""

    def __init__(self) -> None:
        super().__init__()
        self._own_kube: Kube | None = None

    async def kube(self) -> Kube:
        kube = current_kube.get()
        if kube is None:
            if self._own_kube is None:
                self._own_kube = await Kube.connect()
            kube = self._own_kube
        return kube

    def transient(self, error: KubeError, what: str) -> bool:
        """Whether to poll again after `error` (logged) rather than fail the trigger."""
        if error.status not in _TRANSIENT:
            return False
        self.log.warning("Reading %s failed, retrying: %s", what, error)
        return True

    async def cleanup(self) -> None:
        if self._own_kube is not None:
            own, self._own_kube = self._own_kube, None
            await own.close()


class ObjectConditionTrigger(KubeTrigger):
    """Fire once the object has `condition` True, or its `field_path` equals `value`.

    :param api_version: e.g. ``batch/v1``, ``v1``, ``zonda.dev/v1alpha1``.
    :param kind: the kind (``Job``) or plural (``jobs``).
    :param condition: a condition type (``Complete``, ``Ready``...); exclusive with `field_path`.
    :param field_path: a dotted path such as ``status.succeeded``; compared with `value`, or, when
        `value` is None, satisfied as soon as the field is present (e.g. ``status.loadBalancer.ingress``).
    :param poll_interval: seconds between reads. A missing object is waited for, not an error.
    """

    def __init__(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None,
        condition: str | None = None,
        field_path: str | None = None,
        value: Any = None,
        poll_interval: float = 5.0,
    ) -> None:
        super().__init__()
        if (condition is None) == (field_path is None):
            raise ValueError("Pass exactly one of `condition` and `field_path`")
        self.api_version = api_version
        self.kind = kind
        self.name = name
        self.namespace = namespace
        self.condition = condition
        self.field_path = field_path
        self.value = value
        self.poll_interval = float(poll_interval)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            "controller.providers.kubernetes.triggers.ObjectConditionTrigger",
            {
                "api_version": self.api_version,
                "kind": self.kind,
                "name": self.name,
                "namespace": self.namespace,
                "condition": self.condition,
                "field_path": self.field_path,
                "value": self.value,
                "poll_interval": self.poll_interval,
            },
        )

    async def poll(self, kube: Kube) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """The object now (None while it is missing, or the API fails transiently) and what of it
        satisfies the wait (None: not yet)."""
        try:
            obj = await get_object(kube, self.api_version, self.kind, self.namespace, self.name)
        except KubeError as error:
            if not self.transient(error, f"{self.kind} {self.name}"):
                raise
            return None, None
        if obj is None:
            return None, None
        return obj, match_object(obj, condition=self.condition, field_path=self.field_path, value=self.value)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        kube = await self.kube()
        while True:
            _, matched = await self.poll(kube)
            if matched is not None:
                # Only what any replica would see alike: no resourceVersion, so duplicates compare equal.
                yield TriggerEvent(
                    {
                        "apiVersion": self.api_version,
                        "kind": self.kind,
                        "namespace": self.namespace,
                        "name": self.name,
                        **matched,
                    }
                )
                return
            await asyncio.sleep(self.poll_interval)


def transition_of(obj: Mapping[str, Any], condition: str) -> Any:
    """The `lastTransitionTime` of condition `condition`: when it last became what it is now."""
    for entry in field_value(obj, "status.conditions") or []:
        if isinstance(entry, Mapping) and entry.get("type") == condition:
            return entry.get("lastTransitionTime")
    return None


class ObjectConditionEventTrigger(ObjectConditionTrigger, BaseEventTrigger):
    """`ObjectConditionTrigger` as an asset's watcher (`AssetWatcher(trigger=...)`): it polls for good
    and yields an event each time the object *comes to* satisfy the wait — a Job completes, a custom
    resource becomes Ready, a ConfigMap's field gets a value (with `value=None`, every new value of
    the field: a ConfigMap's ``data`` changing).

    The payload names that state and nothing else (the object's uid, and the condition's
    `lastTransitionTime` or the field's value), so another replica, or this one restarted, yields the
    same event for it and the asset is updated once. A condition that turns False and True again has a
    new `lastTransitionTime`, so it is a new event; a field that returns to a value it had before is not.
    """

    def serialize(self) -> tuple[str, dict[str, Any]]:
        _, kwargs = super().serialize()
        return ("controller.providers.kubernetes.triggers.ObjectConditionEventTrigger", kwargs)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        kube = await self.kube()
        last: Any = None
        while True:
            obj, matched = await self.poll(kube)
            if obj is not None and matched is not None:
                if self.condition is not None:
                    matched["lastTransitionTime"] = transition_of(obj, self.condition)
                payload = {
                    "apiVersion": self.api_version,
                    "kind": self.kind,
                    "namespace": self.namespace,
                    "name": self.name,
                    "uid": (obj.get("metadata") or {}).get("uid"),
                    **matched,
                }
                if payload != last:
                    last = payload
                    yield TriggerEvent(payload)
            await asyncio.sleep(self.poll_interval)
