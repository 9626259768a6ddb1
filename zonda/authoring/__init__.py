"""Write DAGs in Python as in Airflow 2.x, and compile them to DAG manifests.

`from zonda import DAG, dag, task` (or `from zonda.authoring import ...`) gives Airflow's authoring API:
`DAG` (context manager, `dag=`, `@dag`), `TaskGroup`/`@task_group`, `Label`, `chain`,
`cross_downstream`, TaskFlow's `@task` (and `.branch`, `.short_circuit`, `.sensor`, `.kubernetes`),
`Param`. Every operator in `zonda.operators`/`zonda.sensors` is the same class the task runner executes.
`zonda.authoring.manifests` turns a DAG object into the `DAG` resource; `zonda.authoring.dag_files`
loads a folder of DAG files as Airflow's DagBag does.

Names are exported lazily: `zonda.operators.base` imports `zonda.authoring.contexts`, and importing it
must not pull in the operators it is being imported by.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "DAG": "zonda.authoring.dags",
    "dag": "zonda.authoring.dags",
    "TaskGroup": "zonda.authoring.task_groups",
    "task_group": "zonda.authoring.task_groups",
    "task": "zonda.authoring.taskflow",
    "XComArg": "zonda.authoring.taskflow",
    "Param": "zonda.authoring.params",
    "Label": "zonda.authoring.relations",
    "chain": "zonda.authoring.relations",
    "cross_downstream": "zonda.authoring.relations",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'zonda.authoring' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
