"""Kubernetes-native sensors: `WaitForObjectSensor` waits for an object's condition or field.

Deferrable by default: the try hands the wait to an `ObjectConditionTrigger` and frees its Pod; the
triggerer polls the object and the task resumes in `execute_complete` with the event. With
``deferrable=False`` it pokes like any Airflow sensor (``mode="poke"`` or ``"reschedule"``), which
needs API access from the task's own Pod.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from controller.kube import Kube
from controller.providers.kubernetes.triggers import ObjectConditionTrigger, get_object, match_object
from zonda.context import Context
from zonda.sensors.base import BaseSensorOperator

#: Where a Pod finds its own namespace (the default namespace of the awaited object).
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def default_namespace() -> str:
    """The namespace this task runs in, or "default" outside a Pod."""
    try:
        return SERVICE_ACCOUNT_NAMESPACE.read_text().strip() or "default"
    except OSError:
        return "default"


def run_namespace(context: Context) -> str:
    """The namespace of the task's DagRun (from its context), else the one this task runs in."""
    return getattr(context.get("dag_run"), "namespace", None) or default_namespace()


class WaitForObjectSensor(BaseSensorOperator):
    """Wait until an object has `condition` True, or its `field_path` equals `value`.

    :param api_version: e.g. ``batch/v1``.
    :param kind: kind or plural, e.g. ``Job``.
    :param name: the object's name. (templated)
    :param namespace: its namespace; defaults to the task's own. (templated)
    :param condition: a condition type such as ``Complete``; exclusive with `field_path`.
    :param field_path: a dotted path such as ``status.succeeded``, compared with `value`. (templated)
    :param deferrable: wait in the triggerer (the default) rather than in the task's Pod.
    """

    template_fields: Sequence[str] = ("name", "namespace", "field_path", "value")

    def __init__(
        self,
        *,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None = None,
        condition: str | None = None,
        field_path: str | None = None,
        value: Any = None,
        deferrable: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if (condition is None) == (field_path is None):
            raise ValueError("Pass exactly one of `condition` and `field_path`")
        self.api_version = api_version
        self.kind = kind
        self.name = name
        self.namespace = namespace
        self.condition = condition
        self.field_path = field_path
        self.value = value
        self.deferrable = deferrable

    def _trigger(self) -> ObjectConditionTrigger:
        return ObjectConditionTrigger(
            api_version=self.api_version,
            kind=self.kind,
            name=self.name,
            namespace=self.namespace or default_namespace(),
            condition=self.condition,
            field_path=self.field_path,
            value=self.value,
            poll_interval=self.poke_interval,
        )

    def execute(self, context: Context) -> Any:
        if not self.deferrable:
            return super().execute(context)
        self.defer(
            trigger=self._trigger(),
            method_name="execute_complete",
            timeout=timedelta(seconds=self.timeout),
        )

    def execute_complete(self, context: Context, event: Any = None) -> Any:
        """The trigger fired: the object is in the awaited state; its event is the XCom."""
        self.log.info("%s %s is ready: %s", self.kind, self.name, event)
        return event

    def poke(self, context: Context) -> bool:
        trigger = self._trigger()
        return asyncio.run(_matches_now(trigger))


async def _matches_now(trigger: ObjectConditionTrigger) -> bool:
    async with await Kube.connect() as kube:
        obj = await get_object(kube, trigger.api_version, trigger.kind, trigger.namespace, trigger.name)
    return (
        obj is not None
        and match_object(obj, condition=trigger.condition, field_path=trigger.field_path, value=trigger.value)
        is not None
    )
