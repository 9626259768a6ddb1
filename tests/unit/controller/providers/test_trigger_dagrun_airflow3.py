"""`TriggerDagRunOperator`'s logical date in each dialect, and the run it creates without one.

Expected values: apache-airflow-providers-standard 1.21.0 `operators/trigger_dagrun.py`
`TriggerDagRunOperator.execute` (Airflow 3) and apache-airflow 2.10's `TriggerDagRunOperator.execute`.
"""

from __future__ import annotations

import asyncio
import copy
import pickle
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest

from controller.kube import DAGRUNS, DAGS
from controller.kube.fake import FakeKube
from controller.providers.kubernetes.external_task import ExternalTaskSensor
from controller.providers.kubernetes.trigger_dagrun import TriggerDagRunOperator
from zonda.passes import plans
from zonda.resources.dagrun_models import DagRunSpec, DagRunStatus
from zonda.schedules.dag_dependencies import Parent

NOW = datetime(2026, 3, 1, 12, tzinfo=UTC)
GIVEN = datetime(2026, 1, 1, tzinfo=UTC)
PARENT = Parent(dag_name="parent", run_name="parent-manual-20260301t000000z", task_id="trigger")


@pytest.mark.parametrize(
    ("kwargs", "airflow3", "expected"),
    [
        # Airflow 3: NOTSET -> utcnow(); None -> no logical date; run_after without logical_date -> none
        ({}, True, NOW),
        ({"logical_date": None}, True, None),
        ({"run_after": "2026-02-01T00:00:00+00:00"}, True, None),
        ({"logical_date": "2026-01-01T00:00:00+00:00"}, True, GIVEN),
        # Airflow 2.10: a datetime or a string is parsed, anything else is utcnow()
        ({}, False, NOW),
        ({"logical_date": None}, False, NOW),
        ({"logical_date": GIVEN}, False, GIVEN),
    ],
)
def test_the_logical_date_is_the_one_the_dialects_operator_takes(
    kwargs: dict[str, object], airflow3: bool, expected: datetime | None
) -> None:
    operator = TriggerDagRunOperator(task_id="trigger", trigger_dag_id="child", **kwargs)  # type: ignore[arg-type]
    assert operator._logical_date(NOW, airflow3=airflow3) == expected


def test_without_a_logical_date_the_run_has_none_and_a_retry_adopts_it() -> None:
    """The created run names no logical date, so an Airflow 3 child DAG starts it without one
    (`plans.run_dates`); its name comes from the parent run and task, so a retry (a later `now`) finds
    it instead of creating a second run."""
    kube = FakeKube()
    spec = {"airflowVersion": "3", "tasks": [{"id": "a", "operator": "EmptyOperator"}]}
    child = {"apiVersion": "zonda.dev/v1alpha1", "kind": "DAG", "metadata": {"name": "child"}, "spec": spec}
    asyncio.run(kube.create_custom(DAGS, "ns", child))
    operator = TriggerDagRunOperator(task_id="trigger", trigger_dag_id="child", logical_date=None)
    first = asyncio.run(operator.create_or_adopt(kube, "ns", "child", PARENT, None, run_after=NOW))
    later = datetime(2026, 3, 1, 12, 5, tzinfo=UTC)
    again = asyncio.run(operator.create_or_adopt(kube, "ns", "child", PARENT, None, run_after=later))
    assert again["metadata"]["uid"] == first["metadata"]["uid"]
    assert len(asyncio.run(kube.list_custom(DAGRUNS, "ns"))) == 1
    assert "logicalDate" not in first["spec"]
    started = plans.start_run(
        DagRunSpec.model_validate(first["spec"]),
        DagRunStatus(),
        plans.DagRef(child["spec"], 1),
        namespace="ns",
        created_at=later,
        generation=1,
        now=later,
    )
    assert started.status.logical_date is None
    assert started.status.run_after == NOW


def test_an_external_task_sensor_in_a_run_without_a_logical_date_looks_at_its_run_after() -> None:
    """Standard provider 1.21.0 `sensors/external_task.py` `ExternalTaskSensor._get_logical_date`:
    ``context.get("logical_date")``, else ``dag_run.run_after``, else a ValueError."""
    sensor = ExternalTaskSensor(task_id="s", external_dag_id="parent", execution_delta=timedelta(hours=1))
    context = {"dag_run": SimpleNamespace(run_after=NOW), "run_id": "r"}
    assert sensor._logical_dates(context) == [NOW - timedelta(hours=1)]
    with pytest.raises(ValueError, match="neither"):
        sensor._logical_dates({"dag_run": SimpleNamespace(run_after=None)})


def test_an_operator_copied_as_rendering_and_mapping_copy_it_still_knows_logical_date_was_not_given() -> None:
    operator = TriggerDagRunOperator(task_id="trigger", trigger_dag_id="child")
    copied = copy.deepcopy(operator)
    assert copied._logical_date(NOW, airflow3=True) == NOW
    assert pickle.loads(pickle.dumps(copied.logical_date)) is copied.logical_date
