"""`ObjectCache`: the newest body of our own resources the controller has seen, so a pass need not GET.

The controller's watches (kopf's) deliver every DagRun, DAG and Pool the moment it changes, and our
own status writes answer with the object as written; a pass reading its object again from the API
cost a round trip (11-21 ms under load) and the apiserver's CPU on a two-core machine. Reads served
from here are safe for the same reason the GET was: every status write is checked by
resourceVersion, so a decision made on an object someone changed since is refused (`Conflict`), the
entry is dropped, and the next pass reads the API.

What is kept for a key is never older than what was kept before: a watch event older than our own
write (delivered after the write answered) is ignored, by resourceVersion (etcd's revision, which
every apiserver serves as an integer; one that is not an integer is taken as newer). A copy is
handed out, so callers may change what they get.

`listed` holds the namespaces whose objects of a kind were listed into the cache: a list without a
label selector is then answered from it (the Pools under the admission lock), the watch keeping it
current (ADDED, MODIFIED, DELETED).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgspec

Body = dict[str, Any]
Key = tuple[str, str, str]  # plural, namespace, name

_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder().decode


def copy_body(body: Body) -> Body:
    """A deep copy, through JSON (msgspec): several times faster than `copy.deepcopy` on a DagRun."""
    copied: Body = _decode(_encode(body))
    return copied


def _version(body: Body) -> int | None:
    value = (body.get("metadata") or {}).get("resourceVersion")
    return int(value) if isinstance(value, str) and value.isdigit() else None


@dataclass
class ObjectCache:
    plurals: frozenset[str]
    #: The plurals whose namespace-wide lists are answered from the cache once listed into it.
    listable: frozenset[str] = frozenset()
    objects: dict[Key, Body] = field(default_factory=dict)
    listed: set[tuple[str, str]] = field(default_factory=set)
    #: `objects` by (plural, namespace): a run pass lists the Pools of its namespace, and scanning
    #: every object kept (1,000 DAGs and their runs) for them was 5 % of the controller's busy loop
    _of_kind: dict[tuple[str, str], dict[str, Body]] = field(default_factory=dict)

    def caches(self, plural: str) -> bool:
        return plural in self.plurals

    def get(self, plural: str, namespace: str, name: str) -> Body | None:
        body = self.objects.get((plural, namespace, name))
        return copy_body(body) if body is not None else None

    def holds(self, plural: str, namespace: str, name: str) -> bool:
        return (plural, namespace, name) in self.objects

    def observed(self, plural: str, body: Body) -> None:
        """A body from a watch or a read: kept unless what is kept is newer."""
        meta = body.get("metadata") or {}
        key = (plural, meta.get("namespace", ""), meta.get("name", ""))
        kept = self.objects.get(key)
        if kept is not None:
            new, old = _version(body), _version(kept)
            if new is not None and old is not None and new < old:
                return
        self.objects[key] = body
        self._of_kind.setdefault(key[:2], {})[key[2]] = body

    def deleted(self, plural: str, namespace: str, name: str) -> None:
        self.objects.pop((plural, namespace, name), None)
        kept = self._of_kind.get((plural, namespace))
        if kept is not None:
            kept.pop(name, None)
            if not kept:
                del self._of_kind[(plural, namespace)]

    forget = deleted  # a write was refused as a conflict: what is kept is stale

    def in_namespace(self, plural: str, namespace: str) -> list[Body] | None:
        """Every object of `plural` in `namespace`, or None until they were listed into the cache."""
        if plural not in self.listable or (plural, namespace) not in self.listed:
            return None
        return [copy_body(b) for b in self._of_kind.get((plural, namespace), {}).values()]

    def listed_into(self, plural: str, namespace: str, items: list[Body]) -> None:
        for item in items:
            item.setdefault("metadata", {}).setdefault("namespace", namespace)
            self.observed(plural, item)
        self.listed.add((plural, namespace))


@dataclass
class LabelledObjects:
    """Objects carrying `label` (the task pods, by their run's uid), as the watch reports them.

    `of(namespace, value)` answers "the objects labelled `label=value`" once the namespace was listed
    (`seed`); the watch keeps it current and the objects we create are recorded from the create's
    answer (`observed`), so a pass never misses a pod it launched itself. Never older than what is
    kept: a body is ignored if its resourceVersion is below the kept one's, or below the deletion
    last seen of that name (a list answered before a deletion cannot bring the object back).
    """

    label: str
    objects: dict[tuple[str, str], tuple[int, Body]] = field(default_factory=dict)
    by_value: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    gone: dict[tuple[str, str], int] = field(default_factory=dict)
    seeded: set[str] = field(default_factory=set)

    def observed(self, body: Body) -> None:
        meta = body.get("metadata") or {}
        key = (meta.get("namespace", ""), meta.get("name", ""))
        version = _version(body) or 0
        if version <= self.gone.get(key, -1):
            return
        kept = self.objects.get(key)
        if kept is not None and version < kept[0]:
            return
        self.gone.pop(key, None)
        if kept is not None:
            self._unindex(key, kept[1])
        self.objects[key] = (version, body)
        value = (meta.get("labels") or {}).get(self.label)
        if value is not None:
            self.by_value.setdefault((key[0], value), set()).add(key[1])

    def deleted(self, body: Body) -> None:
        meta = body.get("metadata") or {}
        key = (meta.get("namespace", ""), meta.get("name", ""))
        self.gone[key] = _version(body) or 0
        if (kept := self.objects.pop(key, None)) is not None:
            self._unindex(key, kept[1])

    def _unindex(self, key: tuple[str, str], body: Body) -> None:
        value = ((body.get("metadata") or {}).get("labels") or {}).get(self.label)
        if value is None:
            return
        names = self.by_value.get((key[0], str(value)))
        if names is not None:
            names.discard(key[1])
            if not names:
                del self.by_value[(key[0], str(value))]

    def of(self, namespace: str, value: str) -> list[Body] | None:
        """Copies of the objects labelled `label=value`, or None until the namespace was listed."""
        kept = self.kept(namespace, value)
        return None if kept is None else [copy_body(body) for body in kept]

    def kept(self, namespace: str, value: str) -> list[Body] | None:
        """The objects labelled `label=value` as kept, not copies (None until the namespace was
        listed): for readers that change nothing. Copying a run's 20 pods on each of its passes was
        11 % of the controller's CPU with 100 runs at once (py-spy)."""
        if namespace not in self.seeded:
            return None
        names = sorted(self.by_value.get((namespace, value), ()))
        return [self.objects[(namespace, name)][1] for name in names]

    def seed(self, namespace: str, items: list[Body]) -> None:
        for item in items:
            item.setdefault("metadata", {}).setdefault("namespace", namespace)
            self.observed(item)
        self.seeded.add(namespace)
