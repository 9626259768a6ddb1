"""`FakeKube`: an in-memory `KubeApi` for adapter unit tests, strict where the apiserver is strict.

What it models: objects by (kind, namespace, name) with a resourceVersion bumped on every write and
checked on status replaces (409 Conflict), AlreadyExists on a taken name, equality label selectors
(``a=b,c=d``, ``a in (x,y)``), a uid and creationTimestamp on create, Events recorded in order, and,
when `max_object_bytes` is set, etcd's refusal of a status write that makes an object larger.
What it does not: watches, admission, field validation, garbage collection, pod life cycles (tests
set a pod's `status` themselves). The cluster tier (tests/cluster) proves the real API behaves so.
"""

from __future__ import annotations

import copy
import itertools
import json
import re
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from controller.kube.errors import AlreadyExists, Conflict, KubeError, NotFound
from controller.kube.protocol import Body

_IN = re.compile(r"^\s*([\w./-]+)\s+in\s+\(([^)]*)\)\s*$")


def matches(labels: Mapping[str, str], selector: str | None) -> bool:
    """Whether `labels` satisfy a label selector of `key=value` and `key in (a,b)` terms."""
    if not selector:
        return True
    for term in _split_terms(selector):
        if match := _IN.match(term):
            if labels.get(match.group(1)) not in {v.strip() for v in match.group(2).split(",")}:
                return False
        elif "=" in term:
            key, value = term.split("=", 1)
            if labels.get(key.strip()) != value.strip():
                return False
        elif labels.get(term.strip()) is None:
            return False
    return True


def _split_terms(selector: str) -> list[str]:
    terms, depth, current = [], 0, ""
    for char in selector:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            terms.append(current)
            current = ""
        else:
            current += char
    return [*terms, current]


@dataclass(frozen=True)
class RecordedEvent:
    kind: str
    name: str
    reason: str
    message: str
    warning: bool


@dataclass
class FakeKube:
    """Objects in dicts; `writes` counts every write call by verb and kind, as the bench counts them."""

    now: Callable[[], datetime] = lambda: datetime.now(UTC)
    objects: dict[tuple[str, str, str], Body] = field(default_factory=dict)
    events: list[RecordedEvent] = field(default_factory=list)
    writes: dict[str, int] = field(default_factory=dict)
    _versions: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    #: etcd's `--max-request-bytes` (1.5 MiB on a real cluster); None: no limit.
    max_object_bytes: int | None = None

    def _check_size(self, body: Body) -> None:
        """etcd refuses to store an object over its request limit, as the apiserver reports it."""
        if self.max_object_bytes is not None and len(json.dumps(body)) > self.max_object_bytes:
            message = (
                '{"kind":"Status","status":"Failure","message":"etcdserver: request is too large","code":500}'
            )
            raise KubeError(500, message)

    def _count(self, verb: str, kind: str) -> None:
        key = f"{verb} {kind}"
        self.writes[key] = self.writes.get(key, 0) + 1

    def _stored(self, kind: str, namespace: str, name: str) -> Body:
        stored = self.objects.get((kind, namespace, name))
        if stored is None:
            raise NotFound(404, f'{kind} "{name}" not found')
        return stored

    def _create(self, kind: str, namespace: str, body: Body) -> Body:
        self._count("create", kind)
        meta = body.setdefault("metadata", {})
        key = (kind, namespace, meta["name"])
        if key in self.objects:
            raise AlreadyExists(409, f'{kind} "{meta["name"]}" already exists')
        stored = copy.deepcopy(body)
        stored["metadata"] |= {
            "namespace": namespace,
            "uid": str(uuid.uuid4()),
            "resourceVersion": str(next(self._versions)),
            "creationTimestamp": self.now().strftime("%Y-%m-%dT%H:%M:%SZ"),
            "generation": 1,
        }
        self.objects[key] = stored
        return copy.deepcopy(stored)

    def _list(self, kind: str, namespace: str | None, selector: str | None) -> list[Body]:
        return [
            copy.deepcopy(body)
            for (k, ns, _), body in sorted(self.objects.items())
            if k == kind
            and (namespace is None or ns == namespace)
            and matches(body["metadata"].get("labels") or {}, selector)
        ]

    def _delete(self, kind: str, namespace: str, name: str) -> bool:
        self._count("delete", kind)
        return self.objects.pop((kind, namespace, name), None) is not None

    # ----------------------------------------------------------------------- custom resources

    async def get_custom(self, plural: str, namespace: str, name: str) -> Body | None:
        stored = self.objects.get((plural, namespace, name))
        return copy.deepcopy(stored) if stored is not None else None

    async def list_custom(
        self, plural: str, namespace: str | None, label_selector: str | None = None
    ) -> list[Body]:
        return self._list(plural, namespace, label_selector)

    async def list_custom_with_version(
        self, plural: str, namespace: str | None, label_selector: str | None = None
    ) -> tuple[list[Body], str | None]:
        return self._list(plural, namespace, label_selector), str(next(self._versions))

    async def create_custom(self, plural: str, namespace: str, body: Body) -> Body:
        return self._create(plural, namespace, body)

    async def patch_custom_status(
        self, plural: str, namespace: str, name: str, status: Body, *, resource_version: str | None = None
    ) -> Body:
        self._count("patch-status", plural)
        stored = self._stored(plural, namespace, name)
        if resource_version is not None and resource_version != stored["metadata"]["resourceVersion"]:
            raise Conflict(409, "the object has been modified")
        merged = _merge_patch(stored.get("status") or {}, status)
        self._check_size({**stored, "status": merged})
        stored["status"] = merged
        stored["metadata"]["resourceVersion"] = str(next(self._versions))
        return copy.deepcopy(stored)

    async def replace_custom_status(self, plural: str, namespace: str, body: Body) -> Body:
        self._count("replace-status", plural)
        stored = self._stored(plural, namespace, body["metadata"]["name"])
        if body["metadata"].get("resourceVersion") != stored["metadata"]["resourceVersion"]:
            raise Conflict(
                409, "the object has been modified; please apply your changes to the latest version"
            )
        self._check_size({**stored, "status": body.get("status") or {}})
        stored["status"] = copy.deepcopy(body.get("status") or {})
        stored["metadata"]["resourceVersion"] = str(next(self._versions))
        return copy.deepcopy(stored)

    async def delete_custom(self, plural: str, namespace: str, name: str) -> bool:
        return self._delete(plural, namespace, name)

    async def watch_custom(
        self,
        plural: str,
        namespace: str | None,
        *,
        label_selector: str | None = None,
        resource_version: str | None = None,
        timeout_seconds: int = 300,
    ) -> AsyncIterator[tuple[str, Body]]:
        raise NotImplementedError("FakeKube has no watches: drive reconcilers directly")
        yield  # pragma: no cover  (makes this an async generator, as the Protocol says)

    # ----------------------------------------------------------------------------------- pods

    async def create_pod(self, namespace: str, body: Body) -> Body:
        return self._create("pods", namespace, body)

    async def delete_pod(self, namespace: str, name: str, *, grace_period_seconds: int | None = None) -> bool:
        return self._delete("pods", namespace, name)

    async def list_pods(self, namespace: str, label_selector: str) -> list[Body]:
        return self._list("pods", namespace, label_selector)

    async def pod_logs(self, namespace: str, name: str, *, container: str | None = None) -> str:
        return str(self._stored("pods", namespace, name).get("log", ""))

    # --------------------------------------------------------------------------------- leases

    async def get_lease(self, namespace: str, name: str) -> Body | None:
        stored = self.objects.get(("leases", namespace, name))
        return copy.deepcopy(stored) if stored is not None else None

    async def create_lease(self, namespace: str, body: Body) -> Body:
        return self._create("leases", namespace, body)

    async def replace_lease(self, namespace: str, body: Body) -> Body:
        self._count("replace", "leases")
        stored = self._stored("leases", namespace, body["metadata"]["name"])
        if body["metadata"].get("resourceVersion") != stored["metadata"]["resourceVersion"]:
            raise Conflict(409, "the object has been modified")
        stored["spec"] = copy.deepcopy(body.get("spec") or {})
        stored["metadata"]["resourceVersion"] = str(next(self._versions))
        return copy.deepcopy(stored)

    async def delete_lease(self, namespace: str, name: str) -> bool:
        return self._delete("leases", namespace, name)

    async def list_leases(self, namespace: str, label_selector: str) -> list[Body]:
        return self._list("leases", namespace, label_selector)

    async def get_path(self, path: str) -> Any:
        return None

    # --------------------------------------------------------------------------------- events

    async def emit_event(
        self,
        involved: Mapping[str, Any],
        *,
        reason: str,
        message: str,
        warning: bool = False,
        component: str = "zonda",
    ) -> None:
        self._count("create", "events")
        meta = involved["metadata"]
        self.events.append(RecordedEvent(str(involved.get("kind")), meta["name"], reason, message, warning))


def _merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merge_patch(result.get(key), value)
    return result
