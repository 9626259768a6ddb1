"""The execution context an operator receives (Airflow's `Context`).

`zonda.tries.task_context.build_context` makes it from a `TaskInvocation`: the same keys as Airflow's template
variables (`ds`, `ti`, `params`, `data_interval_end`...), plus `task`, the operator itself. It is
mutable because Airflow's `PythonOperator` merges `op_kwargs` and `templates_dict` into it.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any, TypeAlias

Context: TypeAlias = MutableMapping[str, Any]
