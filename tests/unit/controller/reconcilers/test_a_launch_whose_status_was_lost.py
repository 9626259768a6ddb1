"""A controller that dies between a launch and the status write that records it (launches come first,
on purpose: `controller.reconcilers.runs`), and the controller after it.

Real: the reconcilers, the status writer, the pure core. Fake: the API (`FakeKube`, here refusing the
write as a crash would leave it: unwritten) and the executor, whose attempts outlive the controller
as a local executor's files and processes or a Kubernetes pod do. The next controller's pass decides
the same launch; the attempt name is deterministic, so its launch finds the try already running: it
is that try, to adopt, never a stray to kill (`zonda.passes.run_pass`: a local try killed so exited
-15 and its task failed, seen once in `tests/cluster/test_pools.py` ...across_a_restart).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from controller.kube import DAGRUNS, DAGS
from controller.kube.fake import FakeKube
from controller.reconcilers.reconcilers import Reconcilers
from tests.unit.fake_world import NS, FakeExecutor, dag_body, run_body, settle


class Crash(Exception):
    """The controller died here."""


class CrashOnFirstRunWrite(FakeKube):
    crashed = False

    async def replace_custom_status(
        self, plural: str, namespace: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        if plural == DAGRUNS and not self.crashed:
            self.crashed = True
            raise Crash
        return await super().replace_custom_status(plural, namespace, body)


def test_a_try_launched_just_before_a_crash_is_adopted_by_the_next_controller_not_killed() -> None:
    kube, executor = CrashOnFirstRunWrite(), FakeExecutor()

    async def scenario() -> None:
        await kube.create_custom(DAGS, NS, dag_body("etl"))
        await kube.create_custom(DAGRUNS, NS, run_body("etl-1", "etl"))
        with pytest.raises(Crash):
            await Reconcilers(kube, executor).reconcile("run", NS, "etl-1")
        assert len(executor.launched) == 1 and "status" not in kube.objects[(DAGRUNS, NS, "etl-1")]
        restarted = Reconcilers(kube, executor)  # a new process: nothing in memory
        await restarted.reconcile("run", NS, "etl-1")
        assert executor.killed == [], "the try launched before the crash is the one this pass launches"
        executor.finish(executor.launched[0])
        await restarted.reconcile("run", NS, "etl-1")
        executor.finish(executor.launched[-1])
        await restarted.reconcile("run", NS, "etl-1")
        await settle()

    asyncio.run(scenario())
    status = kube.objects[(DAGRUNS, NS, "etl-1")]["status"]
    assert status["state"] == "success"
    assert {t: ti["tryNumber"] for t, ti in status["taskInstances"].items()} == {"extract": 1, "load": 1}
    assert executor.killed == []
