"""The asset events a pass decides from the successes it saw: one composition for the controller and
`zonda dags test` (`compose_pass` -> `PassPlan.asset_events`).

Real: the DAG-file loader with Airflow 3 imports, `compose_pass` pass after pass, the task runner in
process (`zonda dags test`); and the run reconciler against `FakeKube` creating what the pass decided.
Expected (Airflow 3.x `TaskInstance._register_asset_changes`): one event per outlet asset of a task
that succeeded, with the extra it set through `outlet_events`; none for a task without outlets.
"""

from __future__ import annotations

import asyncio
import textwrap
from pathlib import Path

from controller.devtools import dag_runs
from controller.kube import DAGRUNS, DAGS
from controller.kube.fake import FakeKube
from controller.reconcilers.reconcilers import Reconcilers
from tests.unit.fake_world import NS, FakeExecutor, dag_body, run_body, settle
from zonda.resources.asset_models import ASSETEVENTS, ASSETS

PRODUCER = textwrap.dedent(
    """
    import pendulum
    from airflow.sdk import Asset, dag, task

    orders = Asset("s3://bucket/orders")

    @dag(schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC"))
    def producer():
        @task(outlets=[orders])
        def write(*, outlet_events=None):
            outlet_events[orders].extra = {"rows": 42}

        @task
        def report():
            return "done"

        write() >> report()

    producer()
    """
)


def test_dags_test_reports_the_events_a_producing_try_made(tmp_path: Path) -> None:
    path = tmp_path / "producer.py"
    path.write_text(PRODUCER)
    outcome = dag_runs.test_file(path, airflow_compat=True)
    assert outcome.state == "success"
    assert [(e.spec.uri, e.spec.source_task, dict(e.spec.extra)) for e in outcome.asset_events] == [
        ("s3://bucket/orders", "write", {"rows": 42})
    ]


def test_the_run_reconciler_records_what_the_pass_decided_once() -> None:
    kube, executor = FakeKube(), FakeExecutor()
    reconcilers = Reconcilers(kube, executor)
    dag = dag_body("producer")
    dag["spec"]["tasks"][0]["outlets"] = [{"uri": "s3://bucket/orders"}]

    async def scenario() -> None:
        await kube.create_custom(DAGS, NS, dag)
        await kube.create_custom(DAGRUNS, NS, run_body("producer-1", "producer"))
        await reconcilers.reconcile("run", NS, "producer-1")
        assert not [k for k in kube.objects if k[0] == ASSETEVENTS]  # positive control below
        executor.finish(executor.launched[0])
        await reconcilers.reconcile("run", NS, "producer-1")  # extract succeeded: its event
        executor.finish(executor.launched[1])
        await reconcilers.reconcile("run", NS, "producer-1")  # load has no outlets: none more
        await settle()

    asyncio.run(scenario())
    events = [body for (plural, _, _), body in kube.objects.items() if plural == ASSETEVENTS]
    assert [(e["spec"]["uri"], e["spec"]["sourceTask"]) for e in events] == [
        ("s3://bucket/orders", "extract")
    ]
    assets = [body for (plural, _, _), body in kube.objects.items() if plural == ASSETS]
    assert events[0]["metadata"]["ownerReferences"][0]["uid"] == assets[0]["metadata"]["uid"]
    assert kube.objects[(DAGRUNS, NS, "producer-1")]["status"]["state"] == "success"
