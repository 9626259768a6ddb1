"""How a DagRun came to be (Airflow's `DagRunType`), apart from `zonda.resources.models` so that the task
runner
reads it without importing pydantic and the resource models."""

from __future__ import annotations

import enum


class RunType(enum.StrEnum):
    MANUAL = "manual"
    SCHEDULED = "scheduled"
    BACKFILL = "backfill"
    #: Airflow 3's run of a DAG scheduled on assets; `DATASET_TRIGGERED` is Airflow 2's name for it.
    ASSET_TRIGGERED = "asset_triggered"
    DATASET_TRIGGERED = "dataset_triggered"


#: The run types of runs made by asset events.
ASSET_RUN_TYPES = frozenset({RunType.ASSET_TRIGGERED, RunType.DATASET_TRIGGERED})
