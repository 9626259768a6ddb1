"""The limits one pass over a run applies, as one frozen value with one default each.

The controller's settings (`controller.manager.settings.ControllerSettings.pass_limits`) build it
from its options, and it is carried unchanged to `zonda.passes.compose.compose_pass` and
`zonda.passes.run_pass.decide`, so a new limit is one field here and one option there. `DAG.test()`
runs with the defaults, which are the controller's.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from zonda.passes.status_budget import DEFAULT_STATUS_BUDGET_BYTES
from zonda.resources.run_shards import DEFAULT_INLINE_TASK_INSTANCES
from zonda.specs.mapping import DEFAULT_MAX_MAP_LENGTH

#: Airflow's `[kubernetes_executor] worker_pods_pending_timeout` default: 300 seconds.
DEFAULT_PENDING_TIMEOUT = timedelta(seconds=300)


@dataclass(frozen=True)
class PassLimits:
    """What a pass may not exceed."""

    #: Airflow's `[core] max_map_length`: a mapped task with more instances fails.
    max_map_length: int = DEFAULT_MAX_MAP_LENGTH
    #: The most bytes a run's status may be expected to reach: a wider expansion fails.
    status_budget_bytes: int = DEFAULT_STATUS_BUDGET_BYTES
    #: Airflow's `worker_pods_pending_timeout`: a try whose attempt stays Pending this long fails
    #: (None: it waits forever).
    pending_timeout: timedelta | None = DEFAULT_PENDING_TIMEOUT
    #: Task instances a run keeps in its own status; past that they are stored in DagRunShards
    #: (`zonda.resources.run_shards`) and the budget applies to each object, not their sum.
    inline_task_instances: int = DEFAULT_INLINE_TASK_INSTANCES

    @classmethod
    def from_options(
        cls,
        *,
        max_map_length: int,
        status_budget_bytes: int,
        pending_timeout_seconds: float,
        inline_task_instances: int = DEFAULT_INLINE_TASK_INSTANCES,
    ) -> PassLimits:
        """The limits as command-line options give them: a pending timeout in seconds, 0 for never."""
        return cls(
            max_map_length=max_map_length,
            status_budget_bytes=status_budget_bytes,
            pending_timeout=timedelta(seconds=pending_timeout_seconds)
            if pending_timeout_seconds > 0
            else None,
            inline_task_instances=inline_task_instances,
        )


#: The limits of a pass nobody configured: the controller's defaults.
DEFAULT_LIMITS = PassLimits()

__all__ = ["DEFAULT_LIMITS", "DEFAULT_PENDING_TIMEOUT", "PassLimits"]
