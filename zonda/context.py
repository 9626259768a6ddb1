"""The execution context an operator receives (Airflow's `Context`).

`zonda.tries.task_context.build_context` makes it from a `TaskInvocation`: the same keys as Airflow's template
variables (`ds`, `ti`, `params`, `data_interval_end`...), plus `task`, the operator itself. It is
mutable because Airflow's `PythonOperator` merges `op_kwargs` and `templates_dict` into it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, MutableMapping
from typing import Any, TypeAlias

Context: TypeAlias = MutableMapping[str, Any]


_current: list[Context] = []


def get_current_context() -> Context:
    """The context of the task running now (Airflow's `get_current_context`), inside its `execute`.

    Outside a running task it raises, as Airflow does: a DAG file calls it only inside a task's code.
    """
    if not _current:
        from zonda.exceptions import AirflowException

        raise AirflowException(
            "Current context was requested but no context was found! Are you running within an airflow task?"
        )
    return _current[-1]


@contextlib.contextmanager
def set_current_context(context: Context) -> Iterator[Context]:
    """Make `context` what `get_current_context()` returns inside the block (the runner's `execute`)."""
    _current.append(context)
    try:
        yield context
    finally:
        _current.pop()


def logical_date_or_run_after(context: Context, what: str = "use_task_logical_date") -> Any:
    """The run's logical date, or its `dag_run.run_after` in a run without one (an Airflow 3 manual
    run), as the standard provider's operators take it on Airflow 3 (`BranchDateTimeOperator`,
    `BranchDayOfWeekOperator`, `DayOfWeekSensor`, `ExternalTaskSensor._get_logical_date`)."""
    logical_date = context.get("logical_date")
    if logical_date:
        return logical_date
    run_after = getattr(context.get("dag_run"), "run_after", None)
    if run_after:
        return run_after
    raise ValueError(f"{what}: the context has neither `logical_date` nor `dag_run.run_after`")
