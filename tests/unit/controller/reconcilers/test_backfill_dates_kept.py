"""`BackfillReconciler` lists a past range's dates once per spec and DAG generation, not on every
change of the DAG's runs (10,000 daily dates cost seconds of CPU a pass). Against `FakeKube`."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest

from controller.kube import BACKFILLS, DAGS
from controller.kube.fake import FakeKube
from controller.reconcilers.backfills import BackfillReconciler
from controller.reconcilers.common import StatusWriter
from tests.unit.fake_world import NS, dag_body
from zonda.schedules import backfills

NOW = datetime(2024, 6, 1, tzinfo=UTC)


def backfill_body(to_date: str, from_date: str = "2024-01-01T00:00:00Z") -> dict[str, Any]:
    spec = {"dagName": "etl", "fromDate": from_date, "toDate": to_date, "dryRun": True}
    return {"apiVersion": "zonda.dev/v1alpha1", "kind": "Backfill", "metadata": {"name": "bf"}, "spec": spec}


@pytest.mark.parametrize(
    ("to_date", "listings", "total"),
    [
        ("2024-01-30T00:00:00Z", 1, 30),
        ("2024-12-31T00:00:00Z", 3, 152),  # due by June 1: Jan 1..May 31
        # past MAX_DATES: the first 10,001 dates from a fixed start are all due, no later `now` changes
        # them (listing year 1 to 9999 again on every pass cost ~3.4 s of CPU each: the run fuzzer's CPU
        # check failed on it); the range fails, total 0
        ("9999-12-31T00:00:00Z", 1, 0),
    ],
)
def test_a_past_range_is_listed_once_and_a_range_reaching_the_future_every_pass(
    monkeypatch: pytest.MonkeyPatch, to_date: str, listings: int, total: int
) -> None:
    from_date = "0001-01-01T00:00:00Z" if to_date.startswith("9999") else "2024-01-01T00:00:00Z"
    calls: list[str] = []
    listed = backfills.backfill_dates

    def counting(*args: Any, **kwargs: Any) -> backfills.BackfillDates:
        calls.append("listed")
        return listed(*args, **kwargs)

    monkeypatch.setattr(backfills, "backfill_dates", counting)
    kube = FakeKube()
    reconciler = BackfillReconciler(kube, StatusWriter(kube))

    async def scenario() -> list[int]:
        await kube.create_custom(
            DAGS, NS, dag_body("etl", schedule="@daily", startDate="2023-01-01T00:00:00Z")
        )
        await kube.create_custom(BACKFILLS, NS, backfill_body(to_date, from_date))
        totals = []
        for _ in range(3):
            body = await kube.get_custom(BACKFILLS, NS, "bf")
            assert body is not None
            await reconciler.reconcile_object(body, NOW)
            written = await kube.get_custom(BACKFILLS, NS, "bf")
            assert written is not None
            totals.append(written["status"]["total"])
        return totals

    totals = asyncio.run(scenario())
    assert len(calls) == listings  # the future range: the positive control that passes list anew
    assert totals == [total] * 3
