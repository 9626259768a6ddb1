"""Functions the example DAGs name as `python_callable: examples.operators.callables:<name>`.

Each receives the context variables its signature names, as in Airflow (`ds`, `params`, `ti`...).
"""

from __future__ import annotations

from pprint import pprint
from typing import Any


def print_context(ds: str | None = None, **kwargs: Any) -> str:
    """Print the Airflow context and ds variable from the context (Airflow's example_python_operator)."""
    pprint(kwargs)
    print(ds)
    return "Whatever you return gets printed in the logs"


def choose_branch(follow: str | list[str] | None = None) -> str | list[str] | None:
    """For BranchPythonOperator: follow the task id(s) given in `op_kwargs` (templated, e.g. from params).

    None follows no downstream task at all.
    """
    return follow


def always_fail() -> None:
    """Fail every try, to show retries and `upstream_failed`."""
    raise RuntimeError("This task always fails")


def return_value(value: Any = None) -> Any:
    """Return `value` (from `op_kwargs`), which becomes the task's XCom."""
    return value
