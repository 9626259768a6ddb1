"""A DAG's passes read its runs from the watch (`DagRunRefs`), and the watch lags our own writes.

Real: the reconcilers, the status writer, `DagRunRefs`, the pure core. Fake: the API (`FakeKube`)
and the watch, which here delivers nothing until the test says so: the worst lag there is. A run's
pass that writes `success` wakes its DAG at once (`on_run_state_change`), before the watch has that
write; the DAG's pass must count what our own writes did (the runs it created, the states the run
passes wrote), or it exceeds maxActiveRuns (a create missed) or stalls at it (a success missed: the
watch event, our own write, wakes nobody again).
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from controller.kube import DAGRUNS, DAGS
from controller.kube.fake import FakeKube
from controller.reconcilers.dags import DagRunRefs
from controller.reconcilers.reconcilers import Reconcilers
from tests.unit.fake_world import NS, FakeExecutor, dag_body, settle

FIRST, SECOND, THIRD = (f"backlog-scheduled-2026010{day}t000000z" for day in (1, 2, 3))


def run_names(kube: FakeKube) -> list[str]:
    return sorted(name for kind, _, name in kube.objects if kind == DAGRUNS)


def test_a_dag_pass_counts_its_own_creates_and_the_successes_written_before_the_watch_has_them() -> None:
    kube, executor = FakeKube(), FakeExecutor()
    reconcilers = Reconcilers(kube, executor)
    refs = DagRunRefs()
    reconcilers.dags.keep_runs(refs)  # the watch never delivers below: all it knows is our writes
    as_created: dict[str, Any] = {}

    async def finish(run: str) -> None:
        while (kube.objects[(DAGRUNS, NS, run)].get("status") or {}).get("state") != "success":
            await reconcilers.reconcile("run", NS, run)
            for attempt in [a for a, seen in executor.attempts.items() if seen.result is None]:
                executor.finish(attempt)

    async def scenario() -> None:
        await kube.create_custom(
            DAGS,
            NS,
            dag_body("backlog", schedule="@daily", startDate="2026-01-01T00:00:00Z", maxActiveRuns=2),
        )
        await reconcilers.reconcile("dag", NS, "backlog")
        assert run_names(kube) == [FIRST, SECOND]
        as_created.update(copy.deepcopy(kube.objects[(DAGRUNS, NS, FIRST)]))
        await reconcilers.reconcile("dag", NS, "backlog")  # right after: the watch has neither run yet
        assert run_names(kube) == [FIRST, SECOND], "two active: a third would exceed maxActiveRuns"

        await finish(FIRST)
        await reconcilers.reconcile("dag", NS, "backlog")  # the pass the success woke, before the watch
        assert run_names(kube) == [FIRST, SECOND, THIRD], "one finished: the next run is created"

        refs.observed(as_created)  # the watch catches up late: its ADDED event is older than our write
        await reconcilers.reconcile("dag", NS, "backlog")
        assert run_names(kube) == [FIRST, SECOND, THIRD], "a late watch event is not news"
        await settle()

    asyncio.run(scenario())
    assert kube.writes["create dagruns"] == 3
