"""A run past the DAG's history limits is deleted as it was read: the delete carries the
resourceVersion the decision was made from (DeleteOptions.preconditions), so a run changed since (a
user's clear, a stale controller's old view of it) is refused by the API (409) and kept.

Real: the DAG reconciler and its run index, the status writer. Fake: the API (`FakeKube`), which
honours delete preconditions as the apiserver does (`tests.kube_contract`).
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from controller.kube import DAGRUNS, DAGS
from controller.kube.fake import FakeKube
from controller.reconcilers.dags import DagRunRefs
from controller.reconcilers.reconcilers import Reconcilers
from tests.unit.fake_world import NS, FakeExecutor, dag_body, run_body, settle

NOW = datetime(2026, 1, 3, tzinfo=UTC)


def test_a_run_cleared_after_it_was_read_is_not_deleted_past_the_history_limit() -> None:
    kube = FakeKube()

    async def scenario() -> None:
        await kube.create_custom(DAGS, NS, dag_body("etl", successfulRunsHistoryLimit=1))
        for age, name in ((3, "etl-a"), (2, "etl-b"), (1, "etl-c")):  # a oldest, c newest
            kube.now = lambda age=age: NOW - timedelta(hours=age)  # type: ignore[misc]
            await kube.create_custom(DAGRUNS, NS, run_body(name, "etl"))
            await kube.patch_custom_status(DAGRUNS, NS, name, {"state": "success"})
        reconcilers = Reconcilers(kube, FakeExecutor())
        refs = DagRunRefs()
        reconcilers.dags.keep_runs(refs)
        await refs.seed(kube, NS)  # the index read a, b, c finished
        # then a user clears a (no watch here: the index still holds a as it read it, finished)
        await kube.patch_custom_status(DAGRUNS, NS, "etl-a", {"state": "queued"})
        dag = await kube.get_custom(DAGS, NS, "etl")
        assert dag is not None
        await reconcilers.dags.reconcile_object(dag, NOW)
        await settle()

    asyncio.run(scenario())
    runs = sorted(name for kind, _, name in kube.objects if kind == DAGRUNS)
    assert "etl-b" not in runs, "the positive control: b, finished and past the limit, is deleted"
    assert runs == ["etl-a", "etl-c"], "a was cleared since read: its delete is refused, a kept"
    said = [e.message for e in kube.events if e.reason == "RunsDeleted"]
    assert said == ["deleted 1 run(s) past the history limits: etl-b"], said
