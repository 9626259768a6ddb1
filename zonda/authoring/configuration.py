"""`airflow.configuration.conf` for DAG files that read Airflow's configuration while they load.

Zonda has no airflow.cfg: an option is read from its `AIRFLOW__{SECTION}__{KEY}` environment variable
(Airflow's own override), else the `fallback` given, else Airflow 2.10's default for the few options
DAG files read, else `AirflowConfigException` as Airflow raises for an option it does not know.
"""

from __future__ import annotations

import os
from typing import Any

from zonda.exceptions import AirflowConfigException

_NOT_GIVEN: Any = object()

#: Airflow 2.10's defaults of options DAG files read at import time (its `config.yml`).
DEFAULTS: dict[tuple[str, str], str] = {
    ("kubernetes_executor", "worker_container_repository"): "",
    ("kubernetes_executor", "worker_container_tag"): "",
    ("core", "default_timezone"): "utc",
    ("core", "load_examples"): "True",
    ("core", "executor"): "LocalExecutor",
    ("core", "dags_are_paused_at_creation"): "True",
    ("core", "max_active_runs_per_dag"): "16",
    ("core", "max_active_tasks_per_dag"): "16",
    ("core", "default_task_retries"): "0",
}


class AirflowConfigParser:
    """The read side of Airflow's configuration parser: `get`, `getboolean`, `getint`, `getfloat`."""

    def get(self, section: str, key: str, fallback: Any = _NOT_GIVEN, **_: Any) -> Any:
        name = f"AIRFLOW__{section.upper()}__{key.upper()}"
        if name in os.environ:
            return os.environ[name]
        if fallback is not _NOT_GIVEN:
            return fallback
        if (section.lower(), key.lower()) in DEFAULTS:
            return DEFAULTS[(section.lower(), key.lower())]
        raise AirflowConfigException(f"section/key [{section}/{key}] not found in config")

    def has_option(self, section: str, key: str) -> bool:
        try:
            self.get(section, key)
        except AirflowConfigException:
            return False
        return True

    def getboolean(self, section: str, key: str, fallback: Any = _NOT_GIVEN, **_: Any) -> bool:
        value = self.get(section, key, fallback)
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower().split("#")[0].strip()
        if text in ("t", "true", "1"):
            return True
        if text in ("f", "false", "0"):
            return False
        raise AirflowConfigException(
            f'Failed to convert value to bool. Please check "{key}" key in "{section}"'
        )

    def getint(self, section: str, key: str, fallback: Any = _NOT_GIVEN, **_: Any) -> int:
        return int(self.get(section, key, fallback))

    def getfloat(self, section: str, key: str, fallback: Any = _NOT_GIVEN, **_: Any) -> float:
        return float(self.get(section, key, fallback))


conf = AirflowConfigParser()
