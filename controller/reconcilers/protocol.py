"""The shape of a reconciler, and the one head every object reconciler shares.

A work-queue key names an object (kind, namespace, name); a reconciler needs the object. The DAG,
DagRun, Backfill and Pool reconcilers each began with the same lines: read the object, stop if it is
gone or being deleted, read the clock. Here they are written once, as controller-runtime does
(`pkg/reconcile/reconcile.go`: an `ObjectReconciler` is given the object, `AsReconciler` gets it or
returns when it is gone):

- `ObjectReconciler`: one pass over an object that exists, with `now` read once for the pass.
- `AsReconciler`: the key -> object head. A missing object, or one with a `deletionTimestamp`, needs
  nothing: what it owns goes with it by its owner references, and a deletion is final.
- `KeyReconciler`: what the work queue calls, `(namespace, name) -> when to look again`. Assets are
  one directly: an event created with kubectl for an asset nobody declared creates its `Asset`, so
  their head is get-or-create, not get-or-gone (`controller.reconcilers.assets.AssetReconciler`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from controller.kube import KubeApi
from controller.reconcilers.common import utcnow

#: One pass over the object a key names, `(namespace, name) -> when to look again` (None: on a change).
KeyReconciler = Callable[[str, str], Awaitable[datetime | None]]


class ObjectReconciler(Protocol):
    @property
    def plural(self) -> str:
        """The resource it reconciles (`zonda.resources.models` plurals)."""
        ...

    async def reconcile_object(self, obj: Mapping[str, Any], now: datetime) -> datetime | None:
        """One pass over `obj`, which exists and is not being deleted; `now` is the pass's clock."""
        ...


@dataclass(frozen=True)
class AsReconciler:
    """Get the object or it is gone, then one pass over it: `ObjectReconciler` as a `KeyReconciler`."""

    kube: KubeApi
    reconciler: ObjectReconciler

    async def __call__(self, namespace: str, name: str) -> datetime | None:
        obj = await self.kube.get_custom(self.reconciler.plural, namespace, name)
        if obj is None or obj["metadata"].get("deletionTimestamp"):
            return None
        return await self.reconciler.reconcile_object(obj, utcnow())
