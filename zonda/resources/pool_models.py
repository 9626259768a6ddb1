"""The `Pool` resource's shape (Airflow's pools) and how an Airflow pool name names one (admission is
`zonda.passes.pools`).

Airflow's pool names may hold ``_`` and capitals, Kubernetes names may not: a task's ``pool="my_pool"`` is
the `Pool` named ``my-pool`` (`pool_resource_name`). Airflow's `default_pool` (the pool of every task that
names none) is ``default-pool``; while no such resource exists it has Airflow's 128 slots.
"""

from __future__ import annotations

import re

from pydantic import Field

from zonda.resources.models import CrdModel

DEFAULT_POOL = "default_pool"
#: Airflow's `[core] default_pool_task_slot_count`.
DEFAULT_POOL_SLOTS = 128
#: A pool whose `slots` is -1 never runs out (Airflow's infinite pool).
UNLIMITED = -1
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


class PoolSpec(CrdModel):
    """Airflow's Pool: how many slots the task instances using it may hold at once."""

    slots: int = Field(ge=-1, description="Slots the pool has; -1: unlimited.")
    description: str = ""
    include_deferred: bool = Field(
        default=False,
        description="Deferred task instances hold their slots too (Airflow's include_deferred).",
    )


class PoolStatus(CrdModel):
    """The pool's occupancy, as Airflow's `Pool.slots_stats` counts it (written by the controller)."""

    observed_generation: int | None = None
    total_slots: int = 0
    occupied_slots: int = Field(default=0, description="Running + queued (+ deferred if included).")
    running_slots: int = 0
    queued_slots: int = 0
    deferred_slots: int = 0
    scheduled_slots: int = Field(default=0, description="Slots asked for by task instances waiting to start.")
    open_slots: int = Field(default=0, description="Slots free now (-1: unlimited).")
    used: str | None = Field(default=None, description="occupied/total, as kubectl shows it.")


def pool_resource_name(pool: str) -> str:
    """The `Pool` resource an Airflow pool name refers to: lower case, ``_`` as ``-``."""
    return pool.lower().replace("_", "-")


def pool_name_problem(pool: str) -> str | None:
    """Why a task's `pool` cannot name a `Pool` resource, or None when it can."""
    name = pool_resource_name(pool)
    if len(name) <= 253 and _NAME.match(name):
        return None
    return (
        f"pool {pool!r} cannot name a Pool resource ({name!r} is not a Kubernetes name: lower-case "
        "letters, digits, '-' and '.', starting and ending with a letter or digit)"
    )
