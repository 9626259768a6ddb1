"""The one get-or-gone head (`AsReconciler`) in front of the object reconcilers, against `FakeKube`."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from controller.kube import DAGS
from controller.kube.fake import FakeKube
from controller.reconcilers.protocol import AsReconciler
from tests.unit.fake_world import NS, dag_body


@dataclass
class Recording:
    """An object reconciler that records what it was given and asks to be woken at `now`."""

    plural: str = DAGS
    seen: list[tuple[str, datetime]] = field(default_factory=list)

    async def reconcile_object(self, obj: Mapping[str, Any], now: datetime) -> datetime | None:
        self.seen.append((obj["metadata"]["name"], now))
        return now


def test_an_existing_object_is_reconciled_with_the_pass_clock_and_its_wake_up_returned() -> None:
    kube, inner = FakeKube(), Recording()

    async def scenario() -> datetime | None:
        await kube.create_custom(DAGS, NS, dag_body("daily"))
        return await AsReconciler(kube, inner)(NS, "daily")

    wake = asyncio.run(scenario())
    assert [name for name, _ in inner.seen] == ["daily"]
    assert wake == inner.seen[0][1]  # the reconciler's answer, unchanged


def test_a_missing_object_or_one_being_deleted_is_not_reconciled() -> None:
    kube, inner = FakeKube(), Recording()

    async def scenario() -> list[datetime | None]:
        head = AsReconciler(kube, inner)
        await kube.create_custom(DAGS, NS, dag_body("present"))
        gone = await head(NS, "never-created")
        body = dag_body("leaving")
        body["metadata"]["deletionTimestamp"] = "2026-12-02T00:00:00Z"
        await kube.create_custom(DAGS, NS, body)
        leaving = await head(NS, "leaving")
        present = await head(NS, "present")  # positive control: the same head reconciles one that exists
        return [gone, leaving, present]

    gone, leaving, present = asyncio.run(scenario())
    assert (gone, leaving) == (None, None)
    assert present is not None and [name for name, _ in inner.seen] == ["present"]
