"""The slot ledger: what each controller shard declares it holds of each pool, for `--shards`.

Pools span DAGs, so with the controller sharded they span replicas, and each replica's admission
sees only its own launches at once (another's show up in the watch later). To keep a pool's slots
exact, a replica *declares* the slots its shards hold, launches included, before it launches them:
one Lease per namespace (``zonda-controller-slots-<namespace>``, annotation ``zonda.dev/slots``,
``{"<shard>": {"<pool>": slots}}``), replaced with its resourceVersion as precondition, so two
replicas' admissions cannot both use the same read: the second one's write conflicts, and it
decides again on the newer ledger (`zonda.passes.pools.slots_elsewhere` combines the ledger with
what the watch shows). The Lease is a compare-and-swap record, never held (no holderIdentity).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from controller.coordination.shard_leases import COMPONENT_LABEL, LEASE_KIND_LABEL, LeaseRecord
from controller.kube import AlreadyExists, Conflict, NotFound
from controller.kube.protocol import KubeApi

log = logging.getLogger(__name__)

SLOTS_KIND = "slots"
SLOTS_ANNOTATION = "zonda.dev/slots"

Entries = dict[int, dict[str, int]]


def decode(annotations: Mapping[str, str]) -> Entries:
    """The ledger's entries from its annotation (an unreadable one is empty: it is only ever ours)."""
    try:
        raw = json.loads(annotations.get(SLOTS_ANNOTATION) or "{}")
        return {
            int(shard): {str(pool): int(slots) for pool, slots in pools.items() if int(slots) > 0}
            for shard, pools in raw.items()
            if pools
        }
    except (ValueError, TypeError, AttributeError):
        return {}


def encode(entries: Mapping[int, Mapping[str, int]]) -> str:
    return json.dumps(
        {str(shard): dict(sorted(pools.items())) for shard, pools in sorted(entries.items()) if pools},
        separators=(",", ":"),
    )


def merged(
    old: Mapping[int, Mapping[str, int]], ours: Mapping[int, Mapping[str, int]], served: Iterable[int]
) -> Entries:
    """The ledger with the entries of the shards we serve replaced by `ours` (empty ones dropped)."""
    mine = set(served)
    new = {shard: dict(pools) for shard, pools in old.items() if shard not in mine and pools}
    new.update({shard: dict(pools) for shard, pools in ours.items() if shard in mine and pools})
    return new


class SlotLedger:
    """Reads and conditionally replaces the slot ledgers of one controller, one per namespace served."""

    def __init__(self, kube: KubeApi, *, namespace: str, component: str = "controller") -> None:
        self.kube = kube
        self.namespace = namespace  # where the Leases live
        self.component = component
        #: namespace -> (resourceVersion, entries) as last read or written; None: no Lease yet.
        self._known: dict[str, tuple[str | None, Entries]] = {}

    def lease_name(self, namespace: str) -> str:
        return f"zonda-{self.component}-slots-{namespace}"

    def namespace_of(self, record: LeaseRecord) -> str | None:
        """The namespace a ledger Lease (from a list of the component's Leases) is for; None otherwise."""
        prefix = self.lease_name("")
        if record.labels.get(LEASE_KIND_LABEL) != SLOTS_KIND or not record.name.startswith(prefix):
            return None
        return record.name[len(prefix) :]

    def observe(self, record: LeaseRecord) -> bool:
        """Take a newer ledger from a Lease list; True when it changed (someone else declared)."""
        namespace = self.namespace_of(record)
        if namespace is None:
            return False
        known = self._known.get(namespace)
        if known is not None and known[0] == record.resource_version:
            return False
        self._known[namespace] = (record.resource_version, decode(record.annotations))
        return known is not None

    def namespaces(self) -> list[str]:
        """The namespaces whose ledger this replica has read or written."""
        return sorted(self._known)

    async def refresh(self, namespace: str) -> Entries:
        body = await self.kube.get_lease(self.namespace, self.lease_name(namespace))
        if body is None:
            self._known[namespace] = (None, {})
        else:
            metadata = body.get("metadata") or {}
            self._known[namespace] = (
                metadata.get("resourceVersion"),
                decode(metadata.get("annotations") or {}),
            )
        return self._known[namespace][1]

    async def entries(self, namespace: str) -> Entries:
        """The ledger as last read or written (read once per namespace, then kept up to date)."""
        known = self._known.get(namespace)
        return known[1] if known is not None else await self.refresh(namespace)

    async def declare(
        self, namespace: str, ours: Mapping[int, Mapping[str, int]], served: Iterable[int]
    ) -> bool:
        """Write our shards' entries, conditional on the ledger we decided with; False when it moved
        meanwhile (it is read again: decide again on it) or was created by another replica first."""
        served = set(served)
        if namespace not in self._known:
            await self.refresh(namespace)
        version, old = self._known[namespace]
        new = merged(old, ours, served)
        if new == old:
            return True
        metadata: dict[str, Any] = {
            "name": self.lease_name(namespace),
            "namespace": self.namespace,
            "labels": {COMPONENT_LABEL: self.component, LEASE_KIND_LABEL: SLOTS_KIND},
            "annotations": {SLOTS_ANNOTATION: encode(new)},
        }
        body: dict[str, Any] = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": metadata,
            "spec": {},
        }
        try:
            if version is None:
                written = await self.kube.create_lease(self.namespace, body)
            else:
                metadata["resourceVersion"] = version
                written = await self.kube.replace_lease(self.namespace, body)
        except (Conflict, AlreadyExists, NotFound):
            await self.refresh(namespace)
            return False
        self._known[namespace] = ((written.get("metadata") or {}).get("resourceVersion"), new)
        return True
