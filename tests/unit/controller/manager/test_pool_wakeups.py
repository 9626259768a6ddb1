"""Which Pool passes a run's pass wakes, through the controller process's work queue.

A run's pass wakes the Pools whose numbers it moved. A task that names no pool is in Airflow's
`default_pool` (`default-pool`), which has 128 slots while no such resource exists: a pass of it
then only read a 404 and wrote nothing, on every launch and every end (773 such passes, each a GET,
on the Pools' replica with `--shards 2` and 100 runs at once). Real: the reconcilers, the admission,
the run index, the controller process's enqueue and work queue (not started: what it holds is what
would run). Fake: the API and the executor.
"""

from __future__ import annotations

import asyncio
from typing import Any

from controller.kube import DAGRUNS, DAGS
from controller.kube.cache import ObjectCache
from controller.kube.fake import FakeKube
from controller.manager.main import ControllerProcess, Services
from controller.manager.settings import DEFAULTS
from controller.manager.workqueue import WorkQueue
from controller.reconcilers.pools import POOLS
from controller.reconcilers.reconcilers import Reconcilers
from tests.unit.controller.reconcilers.test_pool_reconcilers import SlowExecutor
from tests.unit.fake_world import dag_body, run_body

NS = "team"
POOL_KEY = ("pool", NS, "default-pool")


def process(kube: FakeKube, executor: SlowExecutor) -> tuple[ControllerProcess, ObjectCache]:
    proc = ControllerProcess(DEFAULTS)
    cache = ObjectCache(frozenset({DAGS, DAGRUNS, POOLS}), listable=frozenset({POOLS}))
    kube.cache = cache  # type: ignore[attr-defined]  # what the process's watches keep
    reconcilers = Reconcilers(kube, executor, enqueue=proc.enqueue)
    proc.services = Services(
        kube=kube,  # type: ignore[arg-type]
        executor=executor,
        reconcilers=reconcilers,
        queue=WorkQueue(proc.reconcile),
    )
    return proc, cache


def queued(proc: ControllerProcess) -> set[Any]:
    assert proc.services is not None
    return set(proc.services.queue._waiting)


def test_a_pass_wakes_the_default_pool_only_once_a_pool_resource_of_that_name_exists() -> None:
    kube, executor = FakeKube(), SlowExecutor()
    proc, cache = process(kube, executor)
    assert proc.services is not None
    reconcilers = proc.services.reconcilers

    async def scenario() -> None:
        await kube.create_custom(DAGS, NS, dag_body("d"))  # its tasks name no pool: default-pool
        await kube.create_custom(DAGRUNS, NS, run_body("d-1", "d"))
        await reconcilers.reconcile("run", NS, "d-1")  # launches extract: default-pool's numbers move
        assert [h.pool for h in reconcilers.index.runs[(NS, "d-1")].holders] == ["default-pool"]
        assert POOL_KEY not in queued(proc), "no Pool resource: nothing for a Pool pass to write"

        # positive control: once a Pool named default-pool exists (the watch delivered it), a pass
        # that moves its numbers wakes its pass
        body = {"apiVersion": "zonda.dev/v1alpha1", "kind": "Pool", "metadata": {"name": "default-pool"}}
        pool = await kube.create_custom(POOLS, NS, body | {"spec": {"slots": 8}})
        cache.observed(POOLS, pool)
        await reconcilers.reconcile("run", NS, "d-1")  # extract's pod runs: queued -> running
        assert POOL_KEY in queued(proc)

    asyncio.run(scenario())
