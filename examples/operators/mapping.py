"""Callables of the dynamic task mapping example (`examples/dags/example_dynamic_task_mapping.py`).

Importable, so the rendered YAML runs without the DAG file: the task runner imports them by path.
"""

from __future__ import annotations

from typing import Any


def make_numbers(count: int = 3) -> list[int]:
    """The list to map over, known only when the task runs."""
    return list(range(1, count + 1))


def add(x: int, y: int) -> int:
    return x + y


def total(values: list[int]) -> int:
    """The reduce step: Airflow hands it the mapped results in map-index order."""
    return sum(values)


def describe(number: int, ti: Any = None) -> str:
    return f"instance {ti.map_index} got {number}"


def double(number: int) -> int:
    """An `XComArg.map()` function: runs in each mapped instance on its own item."""
    return number * 2
