"""`xcom_pull(..., include_prior_dates=True)`, as Airflow's `XCom.get_many` answers it: the runs whose
logical date is at or before this run's, latest first (this run's own value first of all)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from zonda.resources.dagrun_models import DagRunStatus, TaskInstanceStatus
from zonda.resources.invocations import TaskInvocation
from zonda.resources.models import TaskInstanceState
from zonda.resources.run_types import RunType
from zonda.tries import xcoms
from zonda.tries.task_context import build_context
from zonda.tries.templating import render

S = TaskInstanceState


def day(n: int) -> datetime:
    return datetime(2024, 3, n, tzinfo=UTC)


def run(name: str, n: int, tis: dict[str, TaskInstanceStatus], created: str = "") -> xcoms.EarlierRun:
    return xcoms.EarlierRun(
        name, day(n), created or f"2024-03-{n:02d}T00:00:00Z", DagRunStatus(task_instances=tis)
    )


def ti(state: TaskInstanceState = S.SUCCESS, xcom: Any = None, **keyed: Any) -> TaskInstanceStatus:
    return TaskInstanceStatus(state=state, xcom=xcom, xcoms=keyed or None)


RUNS = [
    run(
        "etl-1",
        1,
        {"extract": ti(xcom="day 1", path="/d1"), "count[0]": ti(xcom=10), "count[1]": ti(xcom=11)},
    ),
    run("etl-2", 2, {"extract": ti(S.FAILED)}),  # failed without a value: nothing to find
    run("etl-3", 3, {"extract": ti(xcom="day 3"), "count[0]": ti(xcom=30)}),
    run("etl-4", 4, {"extract": ti(S.RUNNING)}),  # this run (day 4): its value comes from the invocation
    run("etl-5", 5, {"extract": ti(xcom="day 5, later than this run")}),
    run("etl-3-again", 3, {"extract": ti(xcom="day 3, created later")}, created="2024-03-09T00:00:00Z"),
]


def test_earlier_runs_are_read_latest_first_up_to_this_runs_logical_date() -> None:
    found = xcoms.earlier_xcoms(RUNS, "extract", "return_value", at=day(4), this_run="etl-4")
    assert found == ["day 3, created later", "day 3", "day 1"]
    assert xcoms.earlier_xcoms(RUNS, "extract", "path", at=day(4), this_run="etl-4") == ["/d1"]
    assert xcoms.earlier_xcoms(RUNS, "count[0]", "return_value", at=day(4), this_run="etl-4") == [30, 10]
    assert xcoms.earlier_xcoms(RUNS, "extract", "return_value", at=day(1), this_run="etl-1") == []


def invocation(**fields: Any) -> TaskInvocation:
    defaults: dict[str, Any] = {
        "dag_name": "etl", "run_name": "etl-4", "namespace": "team-a", "run_type": RunType.SCHEDULED,
        "task_id": "load", "try_number": 1, "operator": "PythonOperator", "logical_date": day(4),
        "data_interval_start": day(3), "data_interval_end": day(4),
    }  # fmt: skip
    return TaskInvocation(**{**defaults, **fields})


def pull(template: str, **fields: Any) -> str:
    current = invocation(**fields)

    def earlier(ti_key: str, key: str) -> list[Any]:
        return xcoms.earlier_xcoms(RUNS, ti_key, key, at=current.logical_date, this_run=current.run_name)

    return render(template, build_context(current, earlier_reader=earlier), field="op_kwargs")


@pytest.mark.parametrize(
    ("template", "fields", "expected"),
    [
        pytest.param("{{ ti.xcom_pull('extract', include_prior_dates=True) }}",
                     {"xcoms": {"extract": "day 4"}}, "day 4", id="this run's value is the latest"),
        pytest.param("{{ ti.xcom_pull('extract', include_prior_dates=True) }}", {},
                     "day 3, created later", id="without one, the latest earlier run's"),
        pytest.param("{{ ti.xcom_pull('extract', key='path', include_prior_dates=True) }}", {},
                     "/d1", id="a pushed key, from the run that pushed it"),
        pytest.param("{{ ti.xcom_pull('nothing', include_prior_dates=True, default='-') }}", {},
                     "-", id="none anywhere: the default"),
        pytest.param("{{ ti.xcom_pull('extract', include_prior_dates=True) }}", {"logical_date": day(2)},
                     "day 1", id="only runs at or before this run's logical date"),
        pytest.param("{{ ti.xcom_pull(['extract', 'count'], include_prior_dates=True) }}",
                     {"xcoms": {"count": 7}}, "['day 3, created later', 'day 3', 'day 1', 7]",
                     id="several task ids: every value found, task by task, each latest first"),
        pytest.param("{{ ti.xcom_pull('count', map_indexes=0, include_prior_dates=True) }}", {},
                     "30", id="one map index of a mapped task"),
        pytest.param("{{ ti.xcom_pull('count', map_indexes=[0, 1], include_prior_dates=True) }}", {},
                     "[30, 10, 11]", id="several map indexes: a list"),
    ],
)  # fmt: skip
def test_include_prior_dates_pulls(template: str, fields: dict[str, Any], expected: str) -> None:
    assert pull(template, **fields) == expected
