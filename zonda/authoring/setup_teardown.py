"""Setup and teardown tasks as context managers: `with outer_setup() >> outer_teardown(): ...`.

As Airflow's `SetupTeardownContext`: the work tasks created inside the block (not setups or
teardowns themselves) are wired between them. Entering with a teardown, the block's leaves become its
upstreams and the setups upstream of it (found through its relatives) come before the block's roots;
entering with a setup, the block's roots follow it and its teardowns follow the block's leaves. A task
with no root or leaf in the block gets the first or last task created in it.
"""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING, Any

from zonda.authoring import contexts
from zonda.exceptions import AirflowException

if TYPE_CHECKING:
    from zonda.operators.base import BaseOperator


class SetupTeardownContext:
    """The block of one `with` over a setup or teardown task (or its `XComArg`)."""

    def __init__(self, operator: BaseOperator) -> None:
        if not operator.is_setup and not operator.is_teardown:
            raise AirflowException("Only setup/teardown tasks can be used as context managers.")
        self.operator = operator
        self.dag: Any = getattr(operator, "authoring_dag", None) or contexts.current_dag()
        self.before: set[int] = set()

    def __enter__(self) -> SetupTeardownContext:
        self.before = {id(task) for task in self._tasks()}
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if error is not None:
            return
        inside = [
            task
            for task in self._tasks()
            if id(task) not in self.before and not task.is_setup and not task.is_teardown
        ]
        if not inside:
            return
        roots = [task for task in inside if not task.upstream_edges] or [inside[0]]
        leaves = [task for task in inside if not self._downstream(task)] or [inside[-1]]
        if self.operator.is_teardown:
            self.operator.set_upstream(leaves)
            for setup in self._relatives(self.operator, setups=True):
                setup.set_downstream(roots)
        else:
            self.operator.set_downstream(roots)
            for teardown in self._relatives(self.operator, setups=False):
                teardown.set_upstream(leaves)

    def _tasks(self) -> list[BaseOperator]:
        return list(self.dag.tasks) if self.dag is not None else []

    def _downstream(self, task: BaseOperator) -> list[BaseOperator]:
        return [other for other in self._tasks() if task in other.upstream_edges]

    def _upstream(self, task: BaseOperator) -> list[BaseOperator]:
        return [node for node in task.upstream_edges if hasattr(node, "is_setup")]  # type: ignore[misc]

    def _relatives(self, start: BaseOperator, *, setups: bool) -> list[BaseOperator]:
        """The setups upstream of a teardown (or teardowns downstream of a setup), nearest first found."""
        seen = {id(start)}
        level = self._upstream(start) if setups else self._downstream(start)
        while level:
            found = [task for task in level if (task.is_setup if setups else task.is_teardown)]
            if found:
                return found
            seen |= {id(task) for task in level}
            level = [
                other
                for task in level
                for other in self._upstream(task) + self._downstream(task)
                if id(other) not in seen
            ]
        return []
