"""The simplified `DateTimeTrigger` from Airflow's guide; only the imports (and the class path it
serializes to, which names where to import it from) differ from the original."""

import asyncio

from zonda.triggers import BaseTrigger, TriggerEvent, timezone


class DateTimeTrigger(BaseTrigger):
    def __init__(self, moment):
        super().__init__()
        self.moment = moment

    def serialize(self):
        return ("examples.triggers.temporal.DateTimeTrigger", {"moment": self.moment})

    async def run(self):
        while self.moment > timezone.utcnow():  # noqa: ASYNC110 - Airflow's example, kept as written
            await asyncio.sleep(1)
        yield TriggerEvent(self.moment)
