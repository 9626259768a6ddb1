"""`FakeKube`: an in-memory `KubeApi` for adapter unit tests, strict where the apiserver is strict.

What it models, as tests/kube_contract.py states it and its scenarios prove on a real apiserver too
(tests/cluster/test_fake_kube_contract.py): objects by (kind, namespace, name) with a uid,
creationTimestamp, generation and a resourceVersion that changes on every write that changes
something (a write that changes nothing keeps it, as the apiserver does not write it); 404 NotFound,
409 AlreadyExists and Conflict with the apiserver's messages; resourceVersion preconditions on status
patches, status replaces and Lease replaces; JSON merge patch of the status subresource, which alone
writes status (a status given on create is dropped; a new Pod's is `Pending`); label selectors with
every operator (`=`, `==`, `!=`, `in`, `notin`, `key`, `!key`; a malformed one is a 400); Events
recorded in order; finalizers (a delete of an object that has some marks it with a
`deletionTimestamp`; it goes when a JSON patch of a pod removes the last), JSON patch of a pod with
`test` preconditions (a failed one is a 422); when `max_object_bytes` is set, etcd's refusal of a
status write that makes an object larger; and watches (`list_objects`, `watch_objects`, with
`keep_history`): every write that changes something is an event in a history a watch replays from
its resourceVersion, with the apiserver's faults as test hooks (`end_watches`: the server's timeout;
`break_watches`: a dropped connection; `compact`: older versions answer 410 Gone; `bookmark`). What
it does not: admission, schema validation and pruning, garbage collection, pod life cycles (tests
set a pod's `status` themselves).
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import json
import re
import uuid
from collections.abc import AsyncGenerator, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from controller.kube.errors import AlreadyExists, Conflict, KubeError, NotFound
from controller.kube.protocol import Body
from controller.kube.run_shards import RunShards
from zonda.resources.models import DAGRUNS, GROUP

#: How the apiserver names a kind in its messages (`<plural>.<group>`; the core group has none).
_RESOURCE_NAMES = {"pods": "pods", "leases": "leases.coordination.k8s.io"}

# Label selector syntax as the apiserver parses it (k8s.io/apimachinery/pkg/labels).
_NAME = r"[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?"
_KEY = rf"(?:[a-z0-9](?:[-a-z0-9.]*[a-z0-9])?/)?{_NAME}"
_VALUE = rf"(?:{_NAME})?"
_SET_TERM = re.compile(rf"^({_KEY})\s+(in|notin)\s*\(([^()]*)\)$")
_COMPARE_TERM = re.compile(rf"^({_KEY})\s*(==|=|!=)\s*({_VALUE})$")
_EXISTS_TERM = re.compile(rf"^(!?)\s*({_KEY})$")


def _resource(kind: str) -> str:
    return _RESOURCE_NAMES.get(kind, f"{kind}.{GROUP}")


def _status_error(error: type[KubeError], code: int, reason: str, message: str) -> KubeError:
    """The error the real client raises: its reason is the apiserver's Status body."""
    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message}
    return error(code, json.dumps({**body, "reason": reason, "code": code}))


def _json_patch(body: Body, patch: list[Body], name: str) -> Body:
    """RFC 6902 on a copy of `body` (paths into objects and lists; no `move` or `copy`)."""
    result = copy.deepcopy(body)
    for op in patch:
        *parents, last = [part.replace("~1", "/").replace("~0", "~") for part in op["path"].split("/")[1:]]
        parent: Any = result
        try:
            for part in parents:
                parent = parent[int(part)] if isinstance(parent, list) else parent[part]
            key: Any = int(last) if isinstance(parent, list) and last != "-" else last
            if op["op"] == "test":
                if parent[key] != op["value"]:
                    raise LookupError(f"testing value {op['path']} failed")
            elif op["op"] == "remove":
                del parent[key]
            elif op["op"] == "replace":
                parent[key] = op["value"]
            elif op["op"] == "add" and isinstance(parent, list):
                parent.insert(len(parent) if key == "-" else key, op["value"])
            elif op["op"] == "add":
                parent[key] = op["value"]
            else:
                raise LookupError(f"unsupported operation {op['op']}")
        except (LookupError, ValueError, TypeError) as error:
            message = f'Pod "{name}" is invalid: the server rejected our request: {error}'
            raise _status_error(KubeError, 422, "Invalid", message) from error
    return result


def _not_found(kind: str, name: str) -> KubeError:
    return _status_error(NotFound, 404, "NotFound", f'{_resource(kind)} "{name}" not found')


def _conflict(kind: str, name: str) -> KubeError:
    message = (
        f'Operation cannot be fulfilled on {_resource(kind)} "{name}": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )
    return _status_error(Conflict, 409, "Conflict", message)


def matches(labels: Mapping[str, str], selector: str | None) -> bool:
    """Whether `labels` satisfy a label selector; a malformed selector is the apiserver's 400."""
    if not selector or not selector.strip():
        return True
    return all(_term_matches(labels, term.strip(), selector) for term in _split_terms(selector))


def _term_matches(labels: Mapping[str, str], term: str, selector: str) -> bool:
    if match := _SET_TERM.match(term):
        key, operator, listed = match.groups()
        values = {v.strip() for v in listed.split(",")}
        if not all(re.fullmatch(_VALUE, v) for v in values) or values == {""}:
            raise _bad_selector(selector)
        return (labels.get(key) in values) == (operator == "in") if key in labels else operator == "notin"
    if match := _COMPARE_TERM.match(term):
        key, operator, value = match.groups()
        return (labels.get(key) == value) == (operator != "!=")
    if match := _EXISTS_TERM.match(term):
        negated, key = match.groups()
        return (key in labels) != bool(negated)
    raise _bad_selector(selector)


def _bad_selector(selector: str) -> KubeError:
    return _status_error(KubeError, 400, "BadRequest", f"unable to parse requirement: {selector!r}")


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
    #: A big run's task instances in DagRunShards, as `client.Kube` keeps them.
    run_shards: RunShards = field(default_factory=RunShards)
    #: Whether changes are kept for watches (off: a copy of every write would slow other tests).
    keep_history: bool = False
    #: Every change as a watch sees it: (resourceVersion, kind, event type, the object then).
    history: list[tuple[int, str, str, Body]] = field(default_factory=list)
    #: Watches from a resourceVersion below this answer 410 Gone (etcd compacted them away).
    compacted: int = 0
    #: The signals of the watches open now ("more", "end", a bookmark's version, an exception).
    _watchers: list[asyncio.Queue[Any]] = field(default_factory=list)
    #: How many watches were opened, and lists made by `list_objects`, by kind.
    watches_opened: dict[str, int] = field(default_factory=dict)

    def _record(self, kind: str, type_: str, body: Body) -> None:
        if not self.keep_history:
            return
        self.history.append((int(body["metadata"]["resourceVersion"]), kind, type_, copy.deepcopy(body)))
        for queue in self._watchers:
            queue.put_nowait("more")

    def end_watches(self) -> None:
        """The server ends every open watch (its timeout): the streams finish."""
        for queue in self._watchers:
            queue.put_nowait("end")

    def break_watches(self, error: BaseException | None = None) -> None:
        """Every open watch's connection drops: the streams raise `error` (ConnectionResetError)."""
        for queue in self._watchers:
            queue.put_nowait(error or ConnectionResetError("connection reset by the fake"))

    def compact(self, version: int | None = None) -> None:
        """etcd compacts: a watch from a version before `version` (now) answers 410 Gone."""
        self.compacted = version if version is not None else next(self._versions)

    def bookmark(self) -> int:
        """A BOOKMARK on every watch that asked for them, at a new version (returned)."""
        version = next(self._versions)
        for queue in self._watchers:
            queue.put_nowait(version)
        return version

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
            raise _not_found(kind, name)
        return stored

    def _write(self, stored: Body, changed: Body, kind: str = "") -> Body:
        """Stores `changed` over `stored` with a new resourceVersion, unless nothing changed: the
        apiserver skips a write that changes nothing and keeps the resourceVersion."""
        if changed != stored:
            stored.clear()
            stored.update(changed)
            stored["metadata"]["resourceVersion"] = str(next(self._versions))
            self._record(kind, "MODIFIED", stored)
        return copy.deepcopy(stored)

    def _create(self, kind: str, namespace: str, body: Body) -> Body:
        self._count("create", kind)
        meta = body.setdefault("metadata", {})
        key = (kind, namespace, meta["name"])
        if key in self.objects:
            message = f'{_resource(kind)} "{meta["name"]}" already exists'
            raise _status_error(AlreadyExists, 409, "AlreadyExists", message)
        stored = copy.deepcopy(body)
        # only the status subresource writes status (every Zonda CRD has one; so do Pods)
        stored.pop("status", None)
        if kind == "pods":
            stored["status"] = {"phase": "Pending"}
        stored["metadata"] |= {
            "namespace": namespace,
            "uid": str(uuid.uuid4()),
            "resourceVersion": str(next(self._versions)),
            "creationTimestamp": self.now().strftime("%Y-%m-%dT%H:%M:%SZ"),
            "generation": 1,
        }
        self.objects[key] = stored
        self._record(kind, "ADDED", stored)
        return copy.deepcopy(stored)

    def _list(self, kind: str, namespace: str | None, selector: str | None) -> list[Body]:
        return [
            copy.deepcopy(body)
            for (k, ns, _), body in sorted(self.objects.items())
            if k == kind
            and (namespace is None or ns == namespace)
            and matches(body["metadata"].get("labels") or {}, selector)
        ]

    def _delete(
        self,
        kind: str,
        namespace: str,
        name: str,
        resource_version: str | None = None,
        uid: str | None = None,
    ) -> bool:
        """As the apiserver: False if gone; Conflict if a precondition names another version or uid."""
        self._count("delete", kind)
        stored = self.objects.get((kind, namespace, name))
        if stored is None:
            return False
        meta = stored["metadata"]
        for field_name, wanted, have, why in (
            ("UID", uid, meta["uid"], "deleted and then recreated"),
            ("ResourceVersion", resource_version, meta["resourceVersion"], "modified"),
        ):
            if wanted is not None and wanted != have:
                message = (
                    f'Operation cannot be fulfilled on {_resource(kind)} "{name}": the {field_name} in the '
                    f"precondition ({wanted}) does not match the {field_name} in record ({have}). "
                    f"The object might have been {why}"
                )
                raise _status_error(Conflict, 409, "Conflict", message)
        if meta.get("finalizers"):  # as the apiserver: marked, removed when its finalizers are
            if not meta.get("deletionTimestamp"):
                changed = copy.deepcopy(stored)
                changed["metadata"]["deletionTimestamp"] = self.now().strftime("%Y-%m-%dT%H:%M:%SZ")
                changed["metadata"]["deletionGracePeriodSeconds"] = 0
                self._write(stored, changed, kind)
            return True
        self._gone(kind, namespace, name)
        return True

    def _gone(self, kind: str, namespace: str, name: str) -> None:
        """The object removed, and its DELETED event (at a version of its own) recorded."""
        gone = copy.deepcopy(self.objects.pop((kind, namespace, name)))
        gone["metadata"]["resourceVersion"] = str(next(self._versions))
        self._record(kind, "DELETED", gone)

    # ----------------------------------------------------------------------- custom resources

    async def get_custom(self, plural: str, namespace: str, name: str) -> Body | None:
        stored = self.objects.get((plural, namespace, name))
        if stored is None:
            return None
        if plural == DAGRUNS:  # a big run whole, as `client.Kube` reads it
            return await self.run_shards.whole(self, copy.deepcopy(stored))
        return copy.deepcopy(stored)

    async def list_custom(
        self, plural: str, namespace: str | None, label_selector: str | None = None
    ) -> list[Body]:
        items = self._list(plural, namespace, label_selector)
        if plural == DAGRUNS:
            return await self.run_shards.whole_list(self, namespace, items)
        return items

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
            raise _conflict(plural, name)
        changed = {**copy.deepcopy(stored), "status": _merge_patch(stored.get("status") or {}, status)}
        self._check_size(changed)
        return self._write(stored, changed, plural)

    async def replace_custom_status(self, plural: str, namespace: str, body: Body) -> Body:
        if plural == DAGRUNS:  # a big run's task instances to its shards first, as `client.Kube`
            stored = await self.run_shards.stored_form(self, namespace, body)
            written = self._replace_status(plural, namespace, stored)
            return await self.run_shards.after_write(self, written, body.get("status") or {})
        return self._replace_status(plural, namespace, body)

    def _replace_status(self, plural: str, namespace: str, body: Body) -> Body:
        self._count("replace-status", plural)
        name = body["metadata"]["name"]
        stored = self._stored(plural, namespace, name)
        if body["metadata"].get("resourceVersion") != stored["metadata"]["resourceVersion"]:
            raise _conflict(plural, name)
        # the status endpoint takes the status alone: spec and metadata stay as stored
        changed = {k: copy.deepcopy(v) for k, v in stored.items() if k != "status"}
        if "status" in body:
            changed["status"] = copy.deepcopy(body["status"])
        self._check_size(changed)
        return self._write(stored, changed, plural)

    async def delete_custom(
        self,
        plural: str,
        namespace: str,
        name: str,
        *,
        resource_version: str | None = None,
        uid: str | None = None,
    ) -> bool:
        return self._delete(plural, namespace, name, resource_version, uid)

    async def list_objects(
        self, plural: str, namespace: str | None, label_selector: str | None = None
    ) -> tuple[list[Body], str | None]:
        self.watches_opened[f"list {plural}"] = self.watches_opened.get(f"list {plural}", 0) + 1
        return self._list(plural, namespace, label_selector), str(next(self._versions))

    async def watch_objects(
        self,
        plural: str,
        namespace: str | None,
        *,
        label_selector: str | None = None,
        resource_version: str | None = None,
        timeout_seconds: int = 300,
        bookmarks: bool = False,
    ) -> AsyncGenerator[tuple[str, Body], None]:
        """The changes after `resource_version` (all kept, without one), then the new ones, until
        `end_watches`; 410 Gone from a version `compact` dropped, as the apiserver's ERROR event."""
        assert self.keep_history, "FakeKube(keep_history=True) for watches"
        self.watches_opened[plural] = self.watches_opened.get(plural, 0) + 1
        since = int(resource_version) if resource_version else 0
        if resource_version and since < self.compacted:
            raise KubeError(410, f"too old resource version: {since} ({self.compacted})")
        queue: asyncio.Queue[Any] = asyncio.Queue()
        self._watchers.append(queue)
        position = next((i for i, item in enumerate(self.history) if item[0] > since), len(self.history))
        try:
            while True:
                while position < len(self.history):
                    _, kind, type_, body = self.history[position]
                    position += 1
                    meta = body["metadata"]
                    if (
                        kind == plural
                        and (namespace is None or meta.get("namespace") == namespace)
                        and matches(meta.get("labels") or {}, label_selector)
                    ):
                        yield type_, copy.deepcopy(body)
                signal = await queue.get()
                if signal == "end":
                    return
                if isinstance(signal, BaseException):
                    raise signal
                if isinstance(signal, int) and bookmarks and position == len(self.history):
                    yield "BOOKMARK", {"metadata": {"resourceVersion": str(signal)}}
        finally:
            self._watchers.remove(queue)

    # ----------------------------------------------------------------------------------- pods

    async def create_pod(self, namespace: str, body: Body) -> Body:
        return self._create("pods", namespace, body)

    async def delete_pod(
        self,
        namespace: str,
        name: str,
        *,
        grace_period_seconds: int | None = None,
        resource_version: str | None = None,
        uid: str | None = None,
    ) -> bool:
        return self._delete("pods", namespace, name, resource_version, uid)

    async def list_pods(self, namespace: str, label_selector: str) -> list[Body]:
        return self._list("pods", namespace, label_selector)

    async def patch_pod(self, namespace: str, name: str, patch: list[Body]) -> Body | None:
        """A JSON patch (`test`, `add`, `remove`, `replace`); a failed `test` is 422 Invalid, as the
        apiserver's. A pod being deleted whose last finalizer the patch removes is gone after it."""
        self._count("patch", "pods")
        stored = self.objects.get(("pods", namespace, name))
        if stored is None:
            return None
        changed = _json_patch(stored, patch, name)
        self._write(stored, changed, "pods")
        meta = stored["metadata"]
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self._gone("pods", namespace, name)
        return copy.deepcopy(stored)

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
        name = body["metadata"]["name"]
        stored = self._stored("leases", namespace, name)
        if body["metadata"].get("resourceVersion") != stored["metadata"]["resourceVersion"]:
            raise _conflict("leases", name)
        # a replace is of the whole object: spec, labels and annotations; the server's fields stay
        meta = copy.deepcopy(stored["metadata"])
        for key in ("labels", "annotations"):
            if body["metadata"].get(key):
                meta[key] = copy.deepcopy(body["metadata"][key])
            else:
                meta.pop(key, None)
        return self._write(
            stored,
            {**copy.deepcopy(stored), "metadata": meta, "spec": copy.deepcopy(body.get("spec") or {})},
            "leases",
        )

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
