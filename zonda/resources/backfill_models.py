"""The `Backfill` resource's shape: Airflow's backfill as a resource (its decisions are
`zonda.schedules.backfills`).

Its own module as each resource's models are (see `zonda.resources.models`).
"""

from __future__ import annotations

import enum
from datetime import datetime

from pydantic import Field

from zonda.resources.models import Condition, CrdModel, JsonObject


class ReprocessBehavior(enum.StrEnum):
    """Airflow 3's `reprocess_behavior`: which logical dates that already have a run are run again."""

    NONE = "none"  # dates with any run are skipped
    FAILED = "failed"  # dates whose runs all failed are run again
    COMPLETED = "completed"  # dates whose runs all finished (success or failed) are run again


class BackfillState(enum.StrEnum):
    RUNNING = "running"
    PAUSED = "paused"
    COMPLETED = "completed"
    DRY_RUN = "dry_run"
    FAILED = "failed"  # cannot start: the DAG is missing or invalid, or the dates are wrong


class BackfillSpec(CrdModel):
    """Airflow's backfill: runs of `dagName` for every logical date from `fromDate` to `toDate`."""

    dag_name: str = Field(min_length=1)
    from_date: datetime = Field(description="First logical date (inclusive).")
    to_date: datetime = Field(description="Last logical date (inclusive).")
    reprocess_behavior: ReprocessBehavior = ReprocessBehavior.NONE
    max_active_runs: int = Field(default=10, ge=1, description="This backfill's runs unfinished at once.")
    run_backwards: bool = Field(default=False, description="Newest logical date first.")
    dry_run: bool = Field(default=False, description="List the logical dates in status; create no run.")
    paused: bool = Field(default=False, description="Create no more runs (those running go on).")
    conf: JsonObject = Field(default_factory=dict, description="Each run's conf.")


class BackfillStatus(CrdModel):
    observed_generation: int | None = None
    state: BackfillState | None = None
    total: int = Field(default=0, description="Logical dates to run (skipped ones not counted).")
    created: int = 0
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    skipped: int = Field(default=0, description="Dates left alone under reprocessBehavior.")
    progress: str | None = Field(default=None, description="finished/total, as kubectl shows it.")
    next_logical_date: datetime | None = None
    planned: list[datetime] = Field(default_factory=list, description="The dates to run, in run order.")
    message: str | None = None
    conditions: list[Condition] = Field(
        default_factory=list,
        description="Ready=False while the DAG's custom timetable does not list the dates (TimetableTimeout, "
        "TimetableError); True again once it does.",
    )
