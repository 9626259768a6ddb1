"""A DAG pass that creates its scheduled run leaves the DAG's status write to a later pass.

Real: the DAG reconciler, the status writer, the pure core (`dag_plans.status_written_later`). Fake:
the API (`FakeKube`), which counts the writes. At a minute boundary of 1,000 DAGs the status PUT was
the largest part of a creating pass, so the minute's last run waited for 999 of them; the later pass
writes the same status, and creates nothing twice.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from controller.kube import DAGRUNS, DAGS
from controller.kube.fake import FakeKube
from controller.reconcilers.reconcilers import Reconcilers
from tests.unit.fake_world import NS, FakeExecutor, dag_body, settle

NOW = datetime(2026, 1, 3, 0, 0, 5, tzinfo=UTC)
RUN = "every-day-scheduled-20260102t000000z"


def test_a_creating_pass_asks_for_a_later_pass_which_writes_the_status_and_creates_nothing_twice() -> None:
    kube = FakeKube()
    body = dag_body("every-day", schedule="@daily", startDate="2026-01-01T00:00:00Z", catchup=False)
    later: list[tuple[str, str]] = []
    statuses: list[dict[str, object]] = []

    async def scenario() -> None:
        await kube.create_custom(DAGS, NS, body)
        reconcilers = Reconcilers(kube, FakeExecutor())
        reconcilers.dags.later = lambda namespace, name: later.append((namespace, name))
        for _ in range(2):  # the creating pass, then the one it asked for
            dag = await kube.get_custom(DAGS, NS, "every-day")
            assert dag is not None
            await reconcilers.dags.reconcile_object(dag, NOW)
            statuses.append(dict((await kube.get_custom(DAGS, NS, "every-day") or {}).get("status") or {}))
        await settle()

    asyncio.run(scenario())
    assert sorted(name for kind, _, name in kube.objects if kind == DAGRUNS) == [RUN]
    assert kube.writes.get("create dagruns") == 1, "created once"
    assert later == [(NS, "every-day")], "the creating pass asked for one later pass; that pass, none"
    assert statuses[0] == {}, "the creating pass wrote no status"
    assert statuses[1].get("lastAutomatedDataIntervalEnd") == "2026-01-03T00:00:00Z", statuses[1]
    assert statuses[1].get("nextRunAfter") == "2026-01-04T00:00:00Z", statuses[1]
    assert kube.writes.get("replace-status dags") == 1, kube.writes


def test_without_a_later_pass_to_ask_for_the_creating_pass_writes_its_status() -> None:
    kube = FakeKube()
    body = dag_body("every-day", schedule="@daily", startDate="2026-01-01T00:00:00Z", catchup=False)

    async def scenario() -> None:
        await kube.create_custom(DAGS, NS, body)
        dag = await kube.get_custom(DAGS, NS, "every-day")
        assert dag is not None
        await Reconcilers(kube, FakeExecutor()).dags.reconcile_object(dag, NOW)
        await settle()

    asyncio.run(scenario())
    status = kube.objects[(DAGS, NS, "every-day")]["status"]
    assert status["lastAutomatedDataIntervalEnd"] == "2026-01-03T00:00:00Z", status
