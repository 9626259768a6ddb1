"""The run reconciler's callback tries and SLA misses against `FakeKube`, without a cluster.

Real: the reconciler, the pure core, status writes with resourceVersion checks, the Prometheus
registry. Fake: the API and the executor (tests/unit/controller/reconcilers/test_reconcilers.py's
`FakeExecutor`).
"""

from __future__ import annotations

import asyncio
from typing import Any

from prometheus_client import REGISTRY

from controller.kube import DAGRUNS, DAGS
from controller.kube.fake import FakeKube
from controller.reconcilers.reconcilers import Reconcilers
from tests.unit.fake_world import NS, FakeExecutor, dag_body, settle
from zonda.resources.names import is_callback_name

TARGET = "tests.unit.zonda.passes.test_callbacks:on_dag"


def scheduled_run(name: str, dag: str) -> dict[str, Any]:
    interval = {"start": "2026-01-01T00:00:00+00:00", "end": "2026-01-02T00:00:00+00:00"}
    return {
        "apiVersion": "zonda.dev/v1alpha1",
        "kind": "DagRun",
        "metadata": {"name": name},
        "spec": {
            "dagName": dag,
            "runType": "scheduled",
            "logicalDate": interval["start"],
            "dataInterval": interval,
        },
    }


def test_an_sla_miss_and_the_dag_callback_are_launched_once_and_never_taken_for_strays() -> None:
    kube, executor = FakeKube(), FakeExecutor()
    reconcilers = Reconcilers(kube, executor)
    body = dag_body("slas", onSuccessCallback=[TARGET], slaMissCallback=[TARGET])
    body["spec"]["tasks"][0]["sla"] = "1h"  # long past: the interval ended in January

    def misses() -> float:
        return REGISTRY.get_sample_value("zonda_sla_misses_total", {"namespace": NS, "dag": "slas"}) or 0.0

    async def scenario() -> None:
        before = misses()
        await kube.create_custom(DAGS, NS, body)
        await kube.create_custom(DAGRUNS, NS, scheduled_run("slas-1", "slas"))
        await reconcilers.reconcile("run", NS, "slas-1")
        await settle()
        (sla_try,) = [name for name in executor.launched if is_callback_name(name)]
        run = await kube.get_custom(DAGRUNS, NS, "slas-1")
        assert [miss["taskId"] for miss in run["status"]["slaMisses"]] == ["extract"]
        assert [(r["kind"], r["name"], r["state"]) for r in run["status"]["callbacks"]] == [
            ("sla_miss", sla_try, "launched")
        ]
        assert misses() == before + 1
        assert [e.reason for e in kube.events if e.reason.startswith(("Sla", "Callback"))] == [
            "SlaMissed",
            "CallbackLaunched",
        ]
        await reconcilers.reconcile("run", NS, "slas-1")  # the pending callback try is no stray
        assert executor.killed == [] and misses() == before + 1
        executor.finish(sla_try)
        for name in [n for n in executor.launched if not is_callback_name(n)]:
            executor.finish(name)
        await reconcilers.reconcile("run", NS, "slas-1")
        executor.finish(executor.launched[-1])
        await reconcilers.reconcile("run", NS, "slas-1")
        await reconcilers.reconcile("run", NS, "slas-1")
        run = await kube.get_custom(DAGRUNS, NS, "slas-1")
        assert run["status"]["state"] == "success"
        kinds = [(r["kind"], r["state"]) for r in run["status"]["callbacks"]]
        assert kinds == [("sla_miss", "succeeded"), ("dag_success", "launched")], kinds
        assert len([name for name in executor.launched if is_callback_name(name)]) == 2
        assert executor.killed == []

    asyncio.run(scenario())
