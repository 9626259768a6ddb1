"""A try sees Airflow's run id (`status.runId`), not the DagRun object's name, in each dialect's format.

Airflow's own runs (hack/airflow_reference/run_ids.py, 2026-12-05): 2.10.5's `dag.test(execution_date=
2024-01-01)` gives every task `manual__2024-01-01T00:00:00+00:00` as `{{ run_id }}`, `context["run_id"]`,
`dag_run.run_id` and `ti.run_id` alike; 3.3.2's `dag.test(logical_date=2024-01-01)` gives
`manual__<now>` (its `run_after`); `DagRun.generate_run_id` gives ``<type>__<logical date>`` in 2.10.5
(``dataset_triggered__...``) and ``<type>__<run_after>`` in 3.3.2.
"""

from __future__ import annotations

import textwrap
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import pendulum
import pytest

from controller.devtools import dag_runs
from zonda.passes import plans
from zonda.resources.dagrun_models import DagRunSpec, DagRunStatus, DataIntervalSpec, TaskInstanceStatus
from zonda.resources.run_types import RunType
from zonda.specs.dags import parse_dag_spec, resolve_dag
from zonda.tries.invocation_builder import task_invocation
from zonda.tries.task_context import build_context
from zonda.tries.templating import render

DAY = datetime(2024, 1, 1, tzinfo=UTC)
NEXT_DAY = datetime(2024, 1, 2, tzinfo=UTC)
CREATED = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)


def dag_wire(version: str) -> dict[str, object]:
    return {
        "schedule": "@daily",
        "airflowVersion": version,
        "tasks": [{"id": "t", "operator": "BashOperator", "args": {"bash_command": "echo {{ run_id }}"}}],
    }


def start(spec: DagRunSpec, version: str) -> DagRunStatus:
    result = plans.start_run(
        spec, DagRunStatus(), plans.DagRef(dag_wire(version), 1), namespace="ns", created_at=CREATED,
        generation=1, now=CREATED,
    )  # fmt: skip
    assert result.started
    return result.status


def scheduled(run_type: RunType = RunType.SCHEDULED) -> DagRunSpec:
    return DagRunSpec(
        dag_name="d", run_type=run_type, data_interval=DataIntervalSpec(start=DAY, end=NEXT_DAY)
    )


@pytest.mark.parametrize(
    ("spec", "version", "expected"),
    [
        pytest.param(
            scheduled(), "2", "scheduled__2024-01-01T00:00:00+00:00", id="2: scheduled, logical date"
        ),
        pytest.param(scheduled(), "3", "scheduled__2024-01-02T00:00:00+00:00", id="3: scheduled, run_after"),
        pytest.param(
            scheduled(RunType.BACKFILL), "2", "backfill__2024-01-01T00:00:00+00:00", id="2: backfill"
        ),
        pytest.param(
            scheduled(RunType.BACKFILL), "3", "backfill__2024-01-02T00:00:00+00:00", id="3: backfill"
        ),
        pytest.param(
            DagRunSpec(dag_name="d", run_type=RunType.DATASET_TRIGGERED, logical_date=DAY),
            "2",
            "dataset_triggered__2024-01-01T00:00:00+00:00",
            id="2: dataset_triggered",
        ),
        pytest.param(
            DagRunSpec(dag_name="d", run_type=RunType.ASSET_TRIGGERED, run_after=NEXT_DAY),
            "3",
            "asset_triggered__2024-01-02T00:00:00+00:00",
            id="3: asset_triggered, no logical date",
        ),
        pytest.param(
            DagRunSpec(dag_name="d", logical_date=DAY, run_after=NEXT_DAY),
            "3",
            "manual__2024-01-02T00:00:00+00:00",
            id="3: manual given a logical date: run_after",
        ),
        pytest.param(
            DagRunSpec(dag_name="d", logical_date=DAY),
            "2",
            "manual__2024-01-01T00:00:00+00:00",
            id="2: manual",
        ),
    ],
)
def test_the_run_id_has_the_format_of_the_dialects_airflow(
    spec: DagRunSpec, version: str, expected: str
) -> None:
    assert start(spec, version).run_id == expected


def context_of(version: str) -> dict[str, object]:
    spec = scheduled()
    status = start(spec, version)
    status.task_instances["t"] = TaskInstanceStatus(try_number=1, max_tries=0)
    dag_spec = parse_dag_spec(dag_wire(version))
    invocation = task_invocation(
        run_name="d-scheduled-20240101", spec=spec, status=status, dag_spec=dag_spec,
        task=resolve_dag("d", dag_spec).tasks["t"], try_number=1, namespace="ns",
    )  # fmt: skip
    return build_context(invocation)


@pytest.mark.parametrize(
    ("version", "expected"),
    [("2", "scheduled__2024-01-01T00:00:00+00:00"), ("3", "scheduled__2024-01-02T00:00:00+00:00")],
)
def test_every_place_a_try_sees_the_run_id_gives_airflows(version: str, expected: str) -> None:
    context = context_of(version)
    assert (
        render("{{ run_id }} {{ dag_run.run_id }} {{ ti.run_id }}", context)
        == f"{expected} {expected} {expected}"
    )
    assert context["run_id"] == expected
    # the object's name, where Zonda keys links and triggered runs by it
    assert (context["dag_run"].name, context["ti"].run_name) == (
        "d-scheduled-20240101",
        "d-scheduled-20240101",
    )


def test_a_hitl_link_names_the_runs_object_not_its_run_id() -> None:
    from zonda.operators.hitl import HITLOperator

    task = HITLOperator(task_id="t", subject="Choose", options=["a", "b"])
    context = context_of("3")
    link = HITLOperator.generate_link_to_ui_from_context(
        context={**context, "task": task}, base_url="http://ui"
    )
    assert link.startswith("http://ui/runs/ns/d-scheduled-20240101/tasks/t?")
    # positive control: a task instance without Zonda's name (Airflow's own) still gets its run id
    bare = SimpleNamespace(run_id="r1", task_id="t", map_index=-1)
    assert "/runs/ns/r1/tasks/t" in task.generate_link_to_ui(
        task_instance=bare, base_url="http://ui", namespace="ns"
    )


DAG_FILE = textwrap.dedent(
    """
    import pendulum
    {imports}

    with DAG("ids", start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), schedule="@daily"):
        BashOperator(
            task_id="templated",
            bash_command="echo {{{{ run_id }}}} {{{{ dag_run.run_id }}}} {{{{ ti.run_id }}}}",
        )

        @task
        def keys(**context):
            return [context["run_id"], context["dag_run"].run_id, context["ti"].run_id]

        keys()
    """
)
IMPORTS = {
    "2": "from airflow import DAG; from airflow.decorators import task; from airflow.operators.bash import "
    "BashOperator",
    "3": "from airflow.providers.standard.operators.bash import BashOperator; "
    "from airflow.sdk import DAG, task",
}


@pytest.mark.parametrize("dialect", ["2", "3"])
def test_dags_test_gives_airflows_run_id(tmp_path: Path, dialect: str) -> None:
    path = tmp_path / "ids.py"
    path.write_text(DAG_FILE.format(imports=IMPORTS[dialect]))
    before = pendulum.now("UTC")
    outcome = dag_runs.test_file(path, logical_date="2024-01-01T00:00:00+00:00", airflow_compat=True)
    assert outcome.task_states == {"templated": "success", "keys": "success"}
    run_id = outcome.status.run_id
    assert run_id is not None
    if dialect == "2":  # Airflow 2.10.5's dag.test(execution_date=...): the logical date
        assert run_id == "manual__2024-01-01T00:00:00+00:00"
    else:  # Airflow 3.3.2's dag.test(logical_date=...): its run_after, now
        assert run_id.startswith("manual__") and pendulum.parse(run_id.removeprefix("manual__")) >= before
    assert outcome.xcoms["templated"] == f"{run_id} {run_id} {run_id}"
    assert outcome.xcoms["keys"] == [run_id, run_id, run_id]
