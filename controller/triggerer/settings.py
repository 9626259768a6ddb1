"""The triggerer's settings: one typed object, read once at start (kopf's `OperatorSettings` shape).

`zonda triggerer` and `python -m controller.triggerer` build it from their options (whose defaults
come from here; `tests/unit/controller/triggerer/test_triggerer_settings.py` checks the CLI against it) and
hand it to
`run_triggerer`, which hands it to `Triggerer`: no setting is threaded through signatures one by one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class TriggererSettings:
    #: Where the shard and member Leases live.
    namespace: str
    #: This replica's identity in the Leases (a pod name, or host-pid).
    identity: str
    #: The number of shards; every replica and the controller must agree on it.
    shards: int = 16
    #: Airflow's triggerer capacity: once it runs that many triggers it takes no further shard.
    capacity: int = 1000
    #: Namespaces whose Triggers to run: None for `namespace` only, empty for every namespace.
    watch_namespaces: Sequence[str] | None = field(default=None)
    lease_duration: float = 15.0
    renew_every: float = 5.0
    health_port: int | None = None
    metrics_port: int | None = None
    bind_host: str = "0.0.0.0"

    def __post_init__(self) -> None:
        if self.shards < 1 or self.capacity < 0:
            raise ValueError("shards must be at least 1 and capacity non-negative")
        if self.renew_every >= self.lease_duration:
            raise ValueError("renew_every must be shorter than lease_duration, or every lease lapses")
        if self.watch_namespaces is not None:
            object.__setattr__(self, "watch_namespaces", tuple(self.watch_namespaces))


DEFAULTS = TriggererSettings(namespace="default", identity="")
