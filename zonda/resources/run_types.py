"""How a DagRun came to be (Airflow's `DagRunType`), apart from `zonda.resources.models` so that the task
runner
reads it without importing pydantic and the resource models."""

from __future__ import annotations

import enum


class RunType(enum.StrEnum):
    MANUAL = "manual"
    SCHEDULED = "scheduled"
    BACKFILL = "backfill"
