"""The triggerer's Prometheus metrics, in a registry of their own per replica.

A registry per `Triggerer` rather than prometheus_client's global one: tests run several replicas in
one process, and each must report its own numbers.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

__all__ = ["CONTENT_TYPE_LATEST", "TriggererMetrics"]


class TriggererMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.running_triggers = Gauge(
            "zonda_triggerer_running_triggers",
            "Triggers running in this replica.",
            ["shard"],
            registry=self.registry,
        )
        self.events_fired = Counter(
            "zonda_triggerer_events_fired",
            "Trigger events this replica wrote (state fired).",
            registry=self.registry,
        )
        self.triggers_failed = Counter(
            "zonda_triggerer_triggers_failed",
            "Triggers this replica marked failed (error, no event, or not loadable).",
            registry=self.registry,
        )
        self.duplicate_events = Counter(
            "zonda_triggerer_duplicate_events",
            "Events dropped because the Trigger had already fired or failed (failover duplicates).",
            registry=self.registry,
        )
        self.fenced_writes = Counter(
            "zonda_triggerer_fenced_writes",
            "Events not written because the shard's Lease was no longer this replica's.",
            registry=self.registry,
        )
        self.loop_lag = Gauge(
            "zonda_triggerer_loop_lag_seconds",
            "Event-loop lag at the last watchdog tick.",
            registry=self.registry,
        )
        self.blocked_loop = Counter(
            "zonda_triggerer_blocked_main_thread",
            "Watchdog ticks later than the blocking threshold (Airflow's triggers.blocked_main_thread).",
            registry=self.registry,
        )
        self.shards_held = Gauge(
            "zonda_triggerer_shards_held", "Shard Leases this replica holds.", registry=self.registry
        )

    def exposition(self) -> bytes:
        """The text format Prometheus scrapes."""
        return generate_latest(self.registry)
