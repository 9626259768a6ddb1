"""The triggerer's shard and member Leases: `controller.coordination.shard_leases` for component
``triggerer`` (``zonda-triggerer-shard-<n>``, ``zonda-triggerer-member-<identity>``)."""

from __future__ import annotations

from typing import Any

from controller.coordination.shard_leases import (
    Holding,
    LeaseObserver,
    LeaseRecord,
    ShardLeaseKeeper,
    ShardLeaseNames,
    holds,
)
from controller.kube.protocol import KubeApi

NAMES = ShardLeaseNames("triggerer")
LEASES_SELECTOR = NAMES.selector
shard_lease_name = NAMES.shard_lease_name
member_lease_name = NAMES.member_lease_name

__all__ = ["NAMES", "Holding", "LeaseKeeper", "LeaseObserver", "LeaseRecord", "holds"]


class LeaseKeeper(ShardLeaseKeeper):
    """The triggerer's `ShardLeaseKeeper`."""

    def __init__(self, kube: KubeApi, **writer: Any) -> None:
        super().__init__(kube, names=NAMES, **writer)
