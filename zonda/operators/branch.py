"""Airflow's `BaseBranchOperator`: subclass it and implement `choose_branch(context)`."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from zonda.context import Context
from zonda.operators.base import BaseOperator, SkipMixin


class BaseBranchOperator(BaseOperator, SkipMixin):
    """Follow the downstream task id(s) `choose_branch` returns, skip the others (None: skip them all)."""

    def choose_branch(self, context: Context) -> str | Iterable[str] | None:
        raise NotImplementedError(f"{self.task_type} must implement choose_branch(context)")

    def execute(self, context: Context) -> Any:
        branch = self.choose_branch(context)
        self.skip_all_except(context.get("ti"), branch)
        return branch
