"""Custom priority weight strategies (`weight_rule=` a `PriorityWeightStrategy`), as Airflow 3 applies them.

Expected weights come from Airflow's code (`airflow.task.priority_strategy`, `TaskInstance.insert_mapping`
and `refresh_from_task`): a task instance's weight is `get_weight(ti)` at try number 0 when it is created,
at its try number then when it is cleared, kept across retries; a built-in `downstream` task's weight
sums the *own* `priority_weight` of the tasks below it (a custom task counts as its `priority_weight`).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.airflow_examples import compare
from zonda.authoring import rendering
from zonda.passes import pools, run_slots
from zonda.resources.models import TaskInstanceState
from zonda.specs.dags import DagInvalid, ResolvedDag, parse_dag_spec, resolve_dag
from zonda.specs.priority_strategies import PriorityWeightStrategy

S = TaskInstanceState
EXAMPLE = compare.AF3 / "dags" / "core" / "example_custom_weight.py"


class TenfoldStrategy(PriorityWeightStrategy):
    """A strategy with a serialized parameter, so `serialize`/`deserialize` carry it to admission."""

    def __init__(self, factor: int = 10) -> None:
        self.factor = factor

    def get_weight(self, ti: Any) -> int:
        return self.factor * ti.task.priority_weight + (ti.map_index if ti.map_index >= 0 else 0)

    def serialize(self) -> dict[str, Any]:
        return {"factor": self.factor}


class RaisingStrategy(PriorityWeightStrategy):
    def get_weight(self, ti: Any) -> int:
        raise RuntimeError("no weight")


_HERE = __name__


def _example() -> ResolvedDag:
    report = rendering.render_paths([EXAMPLE], airflow_compat=True)
    assert report.file_errors == {}
    (dag,) = report.dags
    assert dag.manifest is not None, dag.errors
    return resolve_dag(dag.dag_id, parse_dag_spec(dag.manifest["spec"]))


def _weights(dag: ResolvedDag, max_tries: dict[str, int | None] | None = None) -> dict[str, int]:
    states = dict.fromkeys(dag.tasks, S.SCHEDULED)
    found = run_slots.candidates(dag, "run-1", states, None, max_tries=max_tries)
    return {candidate.task_id: candidate.weight for candidate in found}


def test_airflows_example_custom_weight_renders_its_strategy_by_instance_and_by_path() -> None:
    dag = _example()
    path = "plugins.decreasing_priority_weight_strategy.DecreasingPriorityStrategy"
    for task_id in ("task_1", "task_2"):
        assert dag.tasks[task_id].weight_strategy is not None
        assert dag.tasks[task_id].weight_strategy.class_ == path
    assert dag.tasks["task_non_custom"].weight_strategy is None


def test_a_new_task_instance_weighs_get_weight_at_try_number_0_as_airflows_insert_mapping() -> None:
    # DecreasingPriorityStrategy: max(3 - try_number + 1, 1) -> 4 at try 0; start is downstream:
    # 1 + the own weights below it (1 + 1 + 2) = 5; task_non_custom: priority_weight=2, nothing below.
    dag = _example()
    retries = {task_id: task.retries for task_id, task in dag.tasks.items()}  # max_tries at creation
    assert _weights(dag, retries) == {"start": 5, "task_1": 4, "task_2": 4, "task_non_custom": 2}
    assert _weights(dag) == _weights(dag, retries)  # no max_tries yet: a new instance


@pytest.mark.parametrize(("tries_at_clear", "weight"), [(1, 3), (2, 2), (3, 1), (7, 1)])
def test_a_cleared_task_instance_weighs_get_weight_at_its_try_number_then(
    tries_at_clear: int, weight: int
) -> None:
    dag = _example()  # a clear sets max_tries = try_number + retries (Airflow's clear_task_instances)
    assert _weights(dag, {"task_1": tries_at_clear + dag.tasks["task_1"].retries})["task_1"] == weight


def test_a_retry_keeps_the_weight_its_task_instance_was_created_with() -> None:
    spec = {
        "tasks": [
            {"id": "t", "operator": "EmptyOperator", "retries": 2, "priorityWeight": 3,
             "weightStrategy": {"class": f"{_HERE}.TenfoldStrategy", "params": {"factor": 7}}},
        ]
    }  # fmt: skip
    dag = resolve_dag("d", parse_dag_spec(spec))
    assert _weights(dag, {"t": 2}) == {"t": 21}  # max_tries = retries: created, whatever try it is on
    assert _weights(dag, {"t": 4}) == {"t": 21}  # TenfoldStrategy ignores the try number


def test_admission_takes_the_heavier_custom_weight_first() -> None:
    dag = _example()
    states = {"task_1": S.SCHEDULED, "task_non_custom": S.SCHEDULED}
    found = run_slots.candidates(dag, "run-1", states, None)
    limits = pools.pool_limits({"default-pool": pools.PoolLimit(1)})
    admitted = pools.admit(found, [], limits).admitted
    assert [candidate.task_id for candidate in admitted] == ["task_1"]  # 4 over 2


def test_a_mapped_instance_gives_its_map_index_and_params_reach_deserialize() -> None:
    spec = {
        "tasks": [
            {"id": "t", "operator": "EmptyOperator", "priorityWeight": 2,
             "weightStrategy": {"class": f"{_HERE}.TenfoldStrategy", "params": {"factor": 5}}},
        ]
    }  # fmt: skip
    dag = resolve_dag("d", parse_dag_spec(spec))
    found = run_slots.candidates(dag, "run-1", {"t[0]": S.SCHEDULED, "t[3]": S.SCHEDULED}, None)
    assert {c.task_id: c.weight for c in found} == {"t[0]": 10, "t[3]": 13}


def test_the_inner_layers_weight_rule_wins_over_a_default_strategy() -> None:
    strategy = {"class": f"{_HERE}.TenfoldStrategy"}
    spec = {
        "defaultArgs": {"weightStrategy": strategy},
        "tasks": [
            {"id": "a", "operator": "EmptyOperator"},
            {"id": "b", "operator": "EmptyOperator", "weightRule": "absolute", "priorityWeight": 4},
        ],
    }
    dag = resolve_dag("d", parse_dag_spec(spec))
    assert dag.tasks["a"].weight_strategy is not None and dag.tasks["b"].weight_strategy is None
    assert _weights(dag) == {"a": 10, "b": 4}


def test_a_strategy_that_raises_leaves_the_tasks_own_weight_as_airflows_refresh_from_task() -> None:
    spec = {
        "tasks": [
            {"id": "t", "operator": "EmptyOperator", "priorityWeight": 6,
             "weightStrategy": {"class": f"{_HERE}.RaisingStrategy"}},
        ]
    }  # fmt: skip
    assert _weights(resolve_dag("d", parse_dag_spec(spec))) == {"t": 6}


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("no_such_module.Strategy", "cannot be imported (ModuleNotFoundError"),
        (f"{_HERE}.NoSuchClass", "cannot be imported (AttributeError"),
        (f"{_HERE}._example", "is not a PriorityWeightStrategy"),
    ],
)
def test_a_strategy_that_does_not_load_makes_the_dag_invalid(path: str, message: str) -> None:
    spec = {"tasks": [{"id": "t", "operator": "EmptyOperator", "weightStrategy": {"class": path}}]}
    with pytest.raises(DagInvalid) as caught:
        resolve_dag("d", parse_dag_spec(spec))
    assert any(error.startswith("task 't': priority weight strategy") and message in error
               for error in caught.value.errors), caught.value.errors  # fmt: skip


def _render(tmp_path: Any, weight_rule: str) -> rendering.RenderReport:
    (tmp_path / "weights.py").write_text(
        "import pendulum\n"
        "from airflow.sdk import DAG\n"
        "from airflow.providers.standard.operators.empty import EmptyOperator\n"
        "from airflow.task.priority_strategy import PriorityWeightStrategy\n"
        "class InFile(PriorityWeightStrategy):\n"
        "    def get_weight(self, ti):\n"
        "        return 1\n"
        "with DAG('weights', schedule=None, start_date=pendulum.datetime(2024, 1, 1)):\n"
        f"    EmptyOperator(task_id='t', weight_rule={weight_rule})\n"
    )
    return rendering.render_paths([tmp_path / "weights.py"], airflow_compat=True)


@pytest.mark.parametrize(
    ("weight_rule", "error"),
    [
        ("'no_such.Strategy'", "task 't' weight_rule: unknown priority strategy 'no_such.Strategy'"),
        ("'upward'", "unknown priority strategy 'upward'"),
        ("InFile()", "priority weight strategy class InFile must live in an importable module"),
    ],
)
def test_a_weight_rule_zonda_cannot_load_fails_the_render(
    tmp_path: Any, weight_rule: str, error: str
) -> None:
    report = _render(tmp_path, weight_rule)
    (dag,) = report.dags
    assert dag.manifest is None and any(error in message for message in dag.errors), dag.errors


def test_a_weight_rule_path_renders_as_the_strategy_it_names(tmp_path: Any) -> None:
    (dag,) = _render(tmp_path, f"'{_HERE}.TenfoldStrategy'").dags
    assert dag.manifest is not None, dag.errors
    (task,) = dag.manifest["spec"]["tasks"]
    assert task["weightStrategy"] == {"class": f"{_HERE}.TenfoldStrategy", "params": {"factor": 10}}
    (dag,) = _render(tmp_path, "'upstream'").dags
    assert dag.manifest is not None and dag.manifest["spec"]["tasks"][0]["weightRule"] == "upstream"
