"""The triggerer: replicas that run deferred tasks' triggers, sharded by Leases and fenced on write.

Pure parts: `shards` (hashing, fair share, the balancing plan) and the fencing predicate in `leases`.
I/O parts: `leases.LeaseKeeper`, `runtime.Triggerer` and `run_triggerer`, `running.drive_trigger` (one
trigger to its first event), `writes.write_outcome` (its status, once). See docs/triggerer.md.
"""

from controller.coordination.shards import SHARD_LABEL, fair_share, plan_shards, shard_for, shard_selector
from controller.triggerer.runtime import Triggerer, run_triggerer
from controller.triggerer.writes import write_outcome

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
