"""A DAG's spec is parsed, resolved and its timetable built once per version of the spec
(`PreparedDags`, keyed by uid and generation), never used for another version.

Real: the DAG reconciler, the status writer, the pure core. Fake: the API (`FakeKube`, which does not
bump a generation itself: the test changes a spec and its generation as the apiserver does).
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from controller.kube import DAGRUNS, DAGS
from controller.kube.fake import FakeKube
from controller.reconcilers.dags import DagRunRefs
from controller.reconcilers.reconcilers import Reconcilers
from tests.unit.fake_world import NS, FakeExecutor, dag_body, settle


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def run_names(kube: FakeKube) -> list[str]:
    return sorted(name for kind, _, name in kube.objects if kind == DAGRUNS)


def test_a_spec_is_prepared_once_per_generation_and_a_changed_spec_is_prepared_again() -> None:
    kube = FakeKube()
    reconcilers = Reconcilers(kube, FakeExecutor())
    reconcilers.dags.keep_runs(DagRunRefs())
    kept = reconcilers.dags.prepared.kept

    async def dag_pass(now: str) -> None:
        body = await kube.get_custom(DAGS, NS, "hourly")
        assert body is not None
        await reconcilers.dags.reconcile_object(body, at(now))

    async def scenario() -> None:
        spec: dict[str, Any] = {"schedule": "0 * * * *", "catchup": False}
        spec["startDate"] = "2026-01-01T00:00:00Z"
        await kube.create_custom(DAGS, NS, dag_body("hourly", **spec))
        await dag_pass("2026-01-01T05:00:30")
        assert run_names(kube) == ["hourly-scheduled-20260101t040000z"]
        (first,) = kept.values()
        await dag_pass("2026-01-01T05:00:40")
        assert list(kept.values()) == [first] and next(iter(kept.values())) is first, "kept, not rebuilt"

        stored = kube.objects[(DAGS, NS, "hourly")]
        stored["spec"]["schedule"] = "*/30 * * * *"  # the user's change: the apiserver bumps generation
        stored["metadata"]["generation"] = 2
        await dag_pass("2026-01-01T05:30:10")
        assert run_names(kube) == [
            "hourly-scheduled-20260101t040000z",
            "hourly-scheduled-20260101t050000z",  # due at 05:30 only on the new schedule
        ]
        assert [key[3] for key in kept] == [1, 2]
        await settle()

    asyncio.run(scenario())


def test_an_invalid_spec_is_not_kept_and_is_reported_on_every_pass() -> None:
    kube = FakeKube()
    reconcilers = Reconcilers(kube, FakeExecutor())
    reconcilers.dags.keep_runs(DagRunRefs())

    async def scenario() -> None:
        body = dag_body("broken", schedule="0 * * * *", startDate="2026-01-01T00:00:00Z")
        body["spec"]["tasks"][1]["dependsOn"] = ["nowhere"]
        await kube.create_custom(DAGS, NS, body)
        for now in ("2026-01-01T05:00:30", "2026-01-01T06:00:30"):
            stored = await kube.get_custom(DAGS, NS, "broken")
            assert stored is not None
            await reconcilers.dags.reconcile_object(stored, at(now))
            status = kube.objects[(DAGS, NS, "broken")]["status"]
            valid = {c["type"]: c for c in status["conditions"]}["Valid"]
            assert valid["status"] == "False" and "nowhere" in valid["message"]
        assert not reconcilers.dags.prepared.kept
        assert run_names(kube) == []
        await settle()

    asyncio.run(scenario())
