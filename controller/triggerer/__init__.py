"""The triggerer: replicas that run deferred tasks' triggers, sharded by Leases and fenced on write.

Pure parts: `shards` (hashing, fair share, the balancing plan) and the fencing predicate in `leases`.
I/O parts: `leases.LeaseKeeper`, `runtime.Triggerer` and `run_triggerer`. See docs/triggerer.md.
"""

from controller.triggerer.runtime import Triggerer, run_triggerer, write_outcome
from controller.triggerer.shards import SHARD_LABEL, fair_share, plan_shards, shard_for, shard_selector

__all__ = [
    "SHARD_LABEL",
    "Triggerer",
    "fair_share",
    "plan_shards",
    "run_triggerer",
    "shard_for",
    "shard_selector",
    "write_outcome",
]
