"""Airflow's `HITLTrigger` (the standard provider's `triggers.hitl`): a human-in-the-loop task's wait.

Airflow's trigger polls its database for the answer; here the answer is not polled for: a human's
`zonda tasks respond` (or the UI) writes it into this trigger's `Trigger` status, which ends the
wait the way any fired event does (the triggerer cancels its copy, the task resumes). What the
trigger itself does is the response timeout: at `timeout_datetime` it fires the defaults as the
answer (`timedout: true`), or Airflow's timeout error when there are none
(`zonda.resources.hitl.timeout_event`). Whichever write comes first wins (see `zonda.resources.hitl`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

from zonda.resources import hitl
from zonda.triggers import timezone
from zonda.triggers.base import BaseTrigger, TriggerEvent

#: The longest single sleep, as `DateTimeTrigger`'s: the clock is re-read at least this often.
MAX_SLEEP_SECONDS = 60.0


class HITLTrigger(BaseTrigger):
    """Wait for a human's answer (written to the Trigger's status) until `timeout_datetime`, if any."""

    def __init__(
        self,
        *,
        options: list[str],
        params: dict[str, Any] | None = None,
        defaults: list[str] | None = None,
        multiple: bool = False,
        timeout_datetime: datetime | str | None = None,
        subject: str = "",
        body: str | None = None,
        assigned_users: list[dict[str, str]] | None = None,
        poke_interval: float = 5.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.options = list(options)
        self.params = dict(params or {})
        self.defaults = list(defaults) if defaults is not None else None
        self.multiple = multiple
        if isinstance(timeout_datetime, str):
            timeout_datetime = datetime.fromisoformat(timeout_datetime)
        self.timeout_datetime = timezone.convert_to_utc(timeout_datetime) if timeout_datetime else None
        self.subject = subject
        self.body = body
        self.assigned_users = list(assigned_users or [])
        self.poke_interval = poke_interval  # Airflow's argument; nothing is polled here

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            hitl.TRIGGER_CLASSPATH,
            {
                "subject": self.subject,
                "body": self.body,
                "options": self.options,
                "defaults": self.defaults,
                "multiple": self.multiple,
                "params": self.params,
                "assigned_users": self.assigned_users,
                "timeout_datetime": self.timeout_datetime.isoformat() if self.timeout_datetime else None,
                "poke_interval": self.poke_interval,
            },
        )

    def request(self) -> hitl.Request:
        return hitl.Request.from_kwargs(self.serialize()[1])

    async def run(self) -> AsyncIterator[TriggerEvent]:
        """Sleep until the response timeout (for good without one), then fire the timeout's event."""
        while True:
            if self.timeout_datetime is None:
                await asyncio.sleep(MAX_SLEEP_SECONDS)
                continue
            remaining = (self.timeout_datetime - timezone.utcnow()).total_seconds()
            if remaining <= 0:
                break
            await asyncio.sleep(min(remaining, MAX_SLEEP_SECONDS))
        event = hitl.timeout_event(self.request(), now=timezone.utcnow())
        if "error" in event:
            self.log.info("[HITL] timeout reached before receiving response, and no defaults")
        else:
            self.log.info(
                "[HITL] timeout reached before receiving response, fallback to default %s", self.defaults
            )
        yield TriggerEvent(event)
