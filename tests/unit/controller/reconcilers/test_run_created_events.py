"""A scheduled run created on time posts no `DagRunCreated` Event on its DAG; a late one does.

Real: the DAG reconciler, the status writer, the pure core. Fake: the API (`FakeKube`), which counts
the Events posted. On time the run is its own record (and `status.lastRun`); one Event per run on
every boundary was a third of a DAG pass's writes with 1,000 DAGs on `* * * * *`.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from controller.kube import DAGRUNS, DAGS
from controller.kube.fake import FakeKube
from controller.reconcilers.reconcilers import Reconcilers
from tests.unit.fake_world import NS, FakeExecutor, dag_body, settle


def created(kube: FakeKube, now: datetime) -> tuple[list[str], list[str]]:
    """One DAG pass at `now` of the DAG `every-day`: the runs it holds, the Events it posted."""

    async def scenario() -> None:
        reconcilers = Reconcilers(kube, FakeExecutor())
        dag = await kube.get_custom(DAGS, NS, "every-day")
        assert dag is not None
        await reconcilers.dags.reconcile_object(dag, now)
        await settle()

    asyncio.run(scenario())
    runs = sorted(name for kind, _, name in kube.objects if kind == DAGRUNS)
    return runs, [f"{e.reason}: {e.message}" for e in kube.events if e.reason == "DagRunCreated"]


def a_dag() -> FakeKube:
    kube = FakeKube()
    body = dag_body("every-day", schedule="@daily", startDate="2026-01-01T00:00:00Z", catchup=False)
    asyncio.run(kube.create_custom(DAGS, NS, body))
    return kube


def test_a_scheduled_run_created_on_time_posts_no_event_and_a_late_one_says_how_late() -> None:
    on_time = a_dag()
    runs, events = created(on_time, datetime(2026, 1, 3, 0, 0, 5, tzinfo=UTC))
    assert runs == ["every-day-scheduled-20260102t000000z"], "the run was created"
    assert events == [], "created 5 s after it became runnable: the run is the record"
    assert on_time.writes.get("create events", 0) == 0

    late = a_dag()  # the positive control: the same DAG, its run created 5 minutes late
    runs, events = created(late, datetime(2026, 1, 3, 0, 5, 0, tzinfo=UTC))
    assert runs == ["every-day-scheduled-20260102t000000z"]
    assert len(events) == 1 and "300 s after it became runnable" in events[0], events
