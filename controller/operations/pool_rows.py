"""One pool as the CLI and the web UI show it (Airflow's `pools list` and Admin -> Pools): its spec and
the occupancy the controller wrote, with `default_pool` listed while no `default-pool` resource exists."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from zonda.resources import pool_models

DEFAULT_POOL = pool_models.pool_resource_name(pool_models.DEFAULT_POOL)


@dataclass(frozen=True)
class PoolRow:
    """One pool as the CLI and the UI show it: the spec, and the occupancy the controller wrote."""

    name: str
    slots: str
    used: str
    running: str
    queued: str
    scheduled: str
    open: str
    deferred: str
    include_deferred: bool
    description: str
    implicit: bool = False  # default_pool without a resource: Airflow's 128 slots, occupancy unknown

    def cells(self) -> list[str]:
        return [
            self.name,
            self.slots,
            self.used,
            self.running,
            self.queued,
            self.scheduled,
            self.open,
            self.deferred,
            str(self.include_deferred),
            self.description,
        ]


def pool_row(body: Mapping[str, Any]) -> PoolRow:
    """A Pool resource as a row; a status not written yet (or for an older generation) shows "-"."""
    spec, status = body.get("spec") or {}, body.get("status") or {}
    slots = spec.get("slots", 0)
    counted = bool(status) and status.get("observedGeneration") in (None, body["metadata"].get("generation"))

    def number(field: str) -> str:
        if not counted:
            return "-"
        value = status.get(field, 0)
        return "unlimited" if field == "openSlots" and value == pool_models.UNLIMITED else str(value)

    return PoolRow(
        name=body["metadata"]["name"],
        slots="unlimited" if slots == pool_models.UNLIMITED else str(slots),
        used=str(status.get("used")) if counted and status.get("used") else "-",
        running=number("runningSlots"),
        queued=number("queuedSlots"),
        scheduled=number("scheduledSlots"),
        open=number("openSlots"),
        deferred=number("deferredSlots"),
        include_deferred=bool(spec.get("includeDeferred", False)),
        description=str(spec.get("description") or ""),
    )


def implicit_default_pool() -> PoolRow:
    """`default_pool` while no `default-pool` resource exists: what the controller admits against."""
    return PoolRow(
        name=DEFAULT_POOL,
        slots=str(pool_models.DEFAULT_POOL_SLOTS),
        used="-",
        running="-",
        queued="-",
        scheduled="-",
        open="-",
        deferred="-",
        include_deferred=False,
        description="Default pool (no Pool resource: Airflow's 128 slots)",
        implicit=True,
    )


def pool_rows(bodies: Iterable[Mapping[str, Any]]) -> list[PoolRow]:
    """Every pool by name, `default-pool` included even without a resource (Airflow always has it)."""
    rows = {row.name: row for row in map(pool_row, bodies)}
    rows.setdefault(DEFAULT_POOL, implicit_default_pool())
    return [rows[name] for name in sorted(rows)]
