"""Act on the callback tries a pass leaves due (`zonda.passes.compose.PassPlan.callback_tries`): launch
them through the run's executor.

A callback try is a try of the task whose context it carries, run by the same executor (a pod or a
local process) under the callback's deterministic name, so launching it again is a no-op. A
container task's callback runs in the runner (Zonda's image), since the task's own image may not
have Python nor Zonda (`zonda.passes.callbacks.callback_task`); its invocation is built with the
pass's, by `zonda.passes.compose.compose_pass`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from controller.executors.base import Executor
from controller.reconcilers import metrics
from zonda.passes.compose import CallbackTry


async def launch_callbacks(executor: Executor, run: Mapping[str, Any], tries: Iterable[CallbackTry]) -> bool:
    """Launch each; whether the apiserver refused any for good (the next pass records it failed)."""
    refused = False
    for each in tries:
        words = await executor.launch(
            run, task=each.task, invocation=each.invocation, attempt_name=each.callback.name
        )
        if words is None:
            metrics.CALLBACKS_LAUNCHED.labels(each.callback.request.kind).inc()
        refused = refused or words is not None
    return refused
