"""Airflow's cross-DAG operators, under the one import path Zonda's DAG files and docs use.

`TriggerDagRunOperator` lives in `trigger_dagrun`, `ExternalTaskSensor` in `external_task` (as in
Airflow's two modules); `ExternalTaskMarker` needs no API and lives in `zonda.sensors.external_task`.
This module keeps `from controller.providers.kubernetes.dag_dependencies import ...` (documented in
docs/dag-dependencies.md, and the entry points of installs made before the split) working.
"""

from controller.providers.kubernetes.external_task import ExternalTaskMarker, ExternalTaskSensor
from controller.providers.kubernetes.trigger_dagrun import (
    DagNotFound,
    DagRunAlreadyExists,
    TriggerDagRunOperator,
)

__all__ = [
    "DagNotFound",
    "DagRunAlreadyExists",
    "ExternalTaskMarker",
    "ExternalTaskSensor",
    "TriggerDagRunOperator",
]
