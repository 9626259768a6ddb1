"""What a run's pass reads again on every pass, and what it keeps: its Triggers come from the Trigger
watch (one list per namespace to start), its DAG snapshot is parsed and resolved once per run, and
a pass is composed once.

Real: the reconcilers, the pure core, `LabelledObjects` fed as the controller's Trigger watch feeds
it. Fake: the API (`FakeKube`, its lists counted here) and the executor.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from controller.kube import DAGRUNS, DAGS, TRIGGERS
from controller.kube.cache import LabelledObjects
from controller.kube.fake import FakeKube
from controller.reconcilers import runs
from controller.reconcilers.reconcilers import Reconcilers
from tests.unit.fake_world import NS, FakeExecutor, dag_body, run_body, settle
from zonda.resources.wire import LABEL_DAGRUN_UID


class CountingKube(FakeKube):
    def __init__(self) -> None:
        super().__init__()
        self.lists: list[tuple[str, str | None]] = []

    async def list_custom(
        self, plural: str, namespace: str | None, label_selector: str | None = None
    ) -> list[dict[str, Any]]:
        self.lists.append((plural, label_selector))
        return await super().list_custom(plural, namespace, label_selector)


def trigger(run: dict[str, Any], task_id: str) -> dict[str, Any]:
    meta = run["metadata"]
    return {
        "apiVersion": "zonda.dev/v1alpha1",
        "kind": "Trigger",
        "metadata": {"name": f"{meta['name']}-{task_id}", "labels": {LABEL_DAGRUN_UID: meta["uid"]}},
        "spec": {"dagRun": meta["name"], "taskId": task_id, "tryNumber": 1, "deferralCount": 1},
    }


def test_the_passes_read_triggers_from_the_watch_and_list_them_once_per_namespace() -> None:
    kube, executor = CountingKube(), FakeExecutor()
    reconcilers = Reconcilers(kube, executor)
    kept = reconcilers.runs.triggers = LabelledObjects(LABEL_DAGRUN_UID)

    async def scenario() -> None:
        await kube.create_custom(DAGS, NS, dag_body("etl"))
        await kube.create_custom(DAGRUNS, NS, run_body("etl-1", "etl"))
        await reconcilers.reconcile("run", NS, "etl-1")
        executor.finish(executor.launched[0])
        # a Trigger the watch reports for a task that is not deferred: a stray the next pass deletes
        run = kube.objects[(DAGRUNS, NS, "etl-1")]
        stray = await kube.create_custom(TRIGGERS, NS, trigger(run, "load"))
        kept.observed(stray)
        await reconcilers.reconcile("run", NS, "etl-1")
        assert kube.writes.get("delete triggers") == 1, "the pass saw the Trigger the watch kept"
        kept.deleted({**stray, "metadata": {**stray["metadata"], "resourceVersion": "999999"}})
        executor.finish(executor.launched[1])
        await reconcilers.reconcile("run", NS, "etl-1")
        await settle()

    asyncio.run(scenario())
    assert kube.objects[(DAGRUNS, NS, "etl-1")]["status"]["state"] == "success"
    assert [entry for entry in kube.lists if entry[0] == TRIGGERS] == [(TRIGGERS, LABEL_DAGRUN_UID)], (
        "three passes: one list of the namespace's Triggers, to start"
    )
    assert kube.writes.get("delete triggers") == 1


def test_without_the_watch_each_pass_lists_its_runs_triggers() -> None:
    kube, executor = CountingKube(), FakeExecutor()
    reconcilers = Reconcilers(kube, executor)

    async def scenario() -> None:
        await kube.create_custom(DAGS, NS, dag_body("etl"))
        await kube.create_custom(DAGRUNS, NS, run_body("etl-1", "etl"))
        await reconcilers.reconcile("run", NS, "etl-1")
        executor.finish(executor.launched[0])
        await reconcilers.reconcile("run", NS, "etl-1")
        await settle()

    asyncio.run(scenario())
    uid = kube.objects[(DAGRUNS, NS, "etl-1")]["metadata"]["uid"]
    assert [e for e in kube.lists if e[0] == TRIGGERS] == [(TRIGGERS, f"{LABEL_DAGRUN_UID}={uid}")] * 2


def test_a_runs_dag_snapshot_is_resolved_once_for_all_its_passes(
    world: tuple[FakeKube, FakeExecutor, Reconcilers], monkeypatch: pytest.MonkeyPatch
) -> None:
    kube, executor, reconcilers = world
    resolved: list[str] = []

    def counting(name: str, spec: Any) -> Any:
        resolved.append(name)
        return resolve(name, spec)

    resolve = runs.resolve_dag
    monkeypatch.setattr(runs, "resolve_dag", counting)

    async def scenario() -> None:
        await kube.create_custom(DAGS, NS, dag_body("etl"))
        for name in ("etl-1", "etl-2"):
            await kube.create_custom(DAGRUNS, NS, run_body(name, "etl"))
        for _ in range(2):
            for name in ("etl-1", "etl-2"):
                await reconcilers.reconcile("run", NS, name)
            for attempt in list(executor.attempts):
                executor.finish(attempt)
        await settle()

    asyncio.run(scenario())
    assert resolved == ["etl", "etl"], "one resolve per run, whatever the number of its passes"
    assert kube.objects[(DAGRUNS, NS, "etl-2")]["status"]["taskInstances"]["load"]["state"] == "queued"


def test_a_pass_is_composed_once_launching_or_not(
    world: tuple[FakeKube, FakeExecutor, Reconcilers], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Unsharded, a pass is composed once, inside the admission lock with the pools' occupancy: a
    first compose without it, to learn whether it would launch, made every launching pass compose
    twice (11 % of the busy loop with 100 runs at once, docs/benchmarks.md, fifteenth round)."""
    kube, executor, reconcilers = world
    composed: list[bool] = []  # whether each compose had the pools' occupancy

    def counting(gathered: Any) -> Any:
        composed.append(gathered.concurrency is not None)
        return compose(gathered)

    compose = runs.compose.compose_pass
    monkeypatch.setattr(runs.compose, "compose_pass", counting)

    async def scenario() -> None:
        await kube.create_custom(DAGS, NS, dag_body("etl"))
        await kube.create_custom(DAGRUNS, NS, run_body("etl-1", "etl"))
        await reconcilers.reconcile("run", NS, "etl-1")  # starts the run, launches extract
        await reconcilers.reconcile("run", NS, "etl-1")  # nothing new: launches nothing
        executor.finish(executor.launched[0])
        await reconcilers.reconcile("run", NS, "etl-1")  # extract done: launches load
        await settle()

    asyncio.run(scenario())
    assert len(executor.launched) == 2, "a positive control: two passes launched"
    assert composed == [True, True, True], "one compose per pass, each with the pools' occupancy"
