"""Airflow 3's own example DAG files, unchanged, against what Airflow 3 itself does with them.

`tests/airflow_examples/af3/dags/` holds `airflow/example_dags` (`core/`) and the standard provider's
`example_dags` (`standard/`) of the Airflow in its `reference.json`, copied unchanged;
`hack/airflow_reference/af3_reference.py` wrote that JSON from Airflow's DagBag (structure) and each
DAG's `dag.test()` (outcomes), run under that Airflow in its own venv. Structure (task ids with group
prefixes, upstream edges, trigger rules) is compared for every DAG Airflow loads, outcomes (each task
instance's state under `zonda dags test`) for every DAG Airflow ran; what differs is listed below with
why, and a listed DAG must still differ (the lists stay honest). `summary` prints N/M.
"""

from __future__ import annotations

import contextlib
import datetime
import os
from typing import Any

import pytest
import time_machine

from tests.airflow_examples import compare
from zonda.authoring import rendering
from zonda.specs.dags import parse_dag_spec, resolve_dag

EXAMPLES = compare.AF3 / "dags"
REFERENCE: dict[str, Any] = compare.reference(compare.AF3)

#: DAG id -> why Zonda does not give it Airflow 3's structure (it does not render, or renders otherwise).
STRUCTURE_DIFFERENCES: dict[str, str] = {
    "example_task_state_store": "task state stores: not supported",
    "example_task_state_store_async": "task state stores: not supported",
}
#: DAGs with Airflow's structure, of all Airflow loads: the figure issue 20 reports, pinned.
STRUCTURE_SAME = (111, 113)

#: DAG id -> why its `zonda dags test` outcome differs from Airflow 3's `dag.test()`, or is not compared.
#: "[not run]": the outcome depends on when or how either side ran, so it is never compared.
OUTCOME_DIFFERENCES: dict[str, str] = {
    # `BranchDateTimeOperator` without `use_task_logical_date`, a 15:00-00:00 window
    "example_branch_datetime_operator_2": "[not run] wall clock: branches on the time of day",
    # dag.test()'s logical date is the moment it starts: the branch is that minute's parity
    "example_branch_dop_operator_v3": "[not run] wall clock: branches on the logical date's minute",
    "example_branch_operator": "[not run] random: the branch is random.choice's",
    "example_branch_python_operator_decorator": "[not run] random: the branch is random.choice's",
    # Zonda's TriggerDagRunOperator creates a DagRun resource: `dags test` has no cluster to create it in
    "example_trigger_controller_dag": "test_trigger_dagrun fails: dags test has no Kubernetes API",
    "example_dag_decorator": "[not run] network: its first task fetches https://httpbingo.org/get",
    # refused by design: task and asset state stores need Airflow's API server (their imports are refused
    # where the file imports airflow.sdk.execution_time; these reach the store through the context)
    "example_asset_state_store_consumer": "asset state stores: not supported, the task fails",
    "example_asset_state_store_producer": "asset state stores: not supported, the task fails",
    "example_task_state_store_mapped": "task state stores: not supported, the tasks fail",
    # Airflow's reference ran every DAG against one database: the asset's events that earlier DAGs
    # (example_outlet_event_extra's) wrote, one without "hi", were this DAG's inlet_events; alone, in a
    # fresh database, Airflow 3.3.2's dag.test() succeeds (checked), as `zonda dags test`, which reads
    # the run's own events only
    "read_asset_event": "history: Airflow's reference read other DAGs' events of the asset",
}
#: Compared only with ZONDA_AIRFLOW3_OUTCOMES=all (slow, or needing the network), each equal when last run.
SLOW_OUTCOMES: dict[str, str] = {
    "example_python_operator": "builds virtualenvs with pip (needs the index), ~25 s",
    "example_python_decorator": "builds virtualenvs with pip (needs the index), ~25 s",
    "example_time_delta_sensor_async": "its sensor defers for 30 s",
    # serializer="dill": dill from the zonda[dill] extra (the image's), "dill" added to its virtualenv
    "tutorial_taskflow_api_virtualenv": "builds a virtualenv with pip (needs the index), ~16 s",
}
#: DAG id -> the wall clock its `zonda dags test` runs under, for DAGs that branch on today's date with
#: no record of the day Airflow's reference ran. BranchDayOfWeekOperator reads the wall clock
#: (`use_task_logical_date` is off): Airflow's run took `branch_false` (not Monday) and
#: `branch_mid_week` (not a weekend), so it ran on a Tuesday to Friday; a Wednesday gives the same
#: answer, and the comparison no longer turns on the day CI runs (it failed on a Saturday).
WALL_CLOCK: dict[str, datetime.datetime] = {
    "example_weekday_branch_operator": datetime.datetime(2026, 12, 2, 12, 0, tzinfo=datetime.UTC),
}
#: (equal, compared) outcomes in the unit tier, pinned; `summary` in the report adds the slow ones.
OUTCOMES_SAME = (89, 94)


def _rendered() -> dict[str, dict[str, Any] | str]:
    """DAG id -> its structure under Zonda, or the render error of its file."""
    found: dict[str, dict[str, Any] | str] = {}
    for file in sorted({entry["file"] for entry in REFERENCE["dags"].values()}):
        report = rendering.render_paths([EXAMPLES / file], airflow_compat=True)
        for message in report.file_errors.values():
            for dag_id, entry in REFERENCE["dags"].items():
                if entry["file"] == file:
                    found.setdefault(dag_id, message.splitlines()[0] + " " + message.splitlines()[-1])
        for dag in report.dags:
            if dag.manifest is None:
                found[dag.dag_id] = "; ".join(dag.errors)
                continue
            resolved = resolve_dag(dag.dag_id, parse_dag_spec(dag.manifest["spec"]))
            found[dag.dag_id] = {
                task_id: {"upstream": sorted(task.upstream), "trigger_rule": str(task.trigger_rule.value)}
                for task_id, task in resolved.tasks.items()
            }
    return found


def _reference_structure(dag_id: str) -> dict[str, Any]:
    tasks = REFERENCE["dags"][dag_id]["tasks"]
    return {task_id: {k: v for k, v in task.items() if k != "operator"} for task_id, task in tasks.items()}


@pytest.fixture(scope="module")
def rendered() -> dict[str, dict[str, Any] | str]:
    return _rendered()


def structure_results(rendered: dict[str, dict[str, Any] | str]) -> dict[str, str | None]:
    """DAG id -> None if Zonda's structure is Airflow's, else how it differs."""
    results: dict[str, str | None] = {}
    for dag_id in REFERENCE["dags"]:
        ours = rendered.get(dag_id, "not rendered")
        if isinstance(ours, str):
            results[dag_id] = ours
        elif ours != _reference_structure(dag_id):
            theirs = _reference_structure(dag_id)
            diff = sorted(k for k in set(ours) | set(theirs) if ours.get(k) != theirs.get(k))
            results[dag_id] = f"tasks differ: {diff[:5]}"
        else:
            results[dag_id] = None
    return results


def test_airflow3_examples_have_airflow3s_structure(rendered: dict[str, dict[str, Any] | str]) -> None:
    results = structure_results(rendered)
    same = sorted(d for d, why in results.items() if why is None)
    print(f"\nAirflow {REFERENCE['airflow_version']} examples: structure {len(same)}/{len(results)}")
    for dag_id, why in sorted(results.items()):
        if why is not None:
            print(f"  {dag_id}: {why}")
    unexpected = {d: why for d, why in results.items() if why is not None and d not in STRUCTURE_DIFFERENCES}
    assert unexpected == {}
    stale = [d for d in STRUCTURE_DIFFERENCES if results.get(d) is None]
    assert stale == [], "listed as different but now equal: remove them from STRUCTURE_DIFFERENCES"
    assert (len(same), len(results)) == STRUCTURE_SAME


def _zonda_outcome(dag_id: str) -> dict[str, Any] | str:
    from controller.devtools import dag_runs

    clock = WALL_CLOCK.get(dag_id)
    pinned = time_machine.travel(clock, tick=True) if clock else contextlib.nullcontext()
    try:
        with pinned:
            outcome = dag_runs.test_file(
                EXAMPLES / REFERENCE["dags"][dag_id]["file"], dag_id=dag_id, airflow_compat=True
            )
    except dag_runs.DagTestError as error:
        return str(error).splitlines()[-1]
    return {"state": outcome.state, "tasks": dict(outcome.task_states)}


def outcome_results(rendered: dict[str, dict[str, Any] | str]) -> dict[str, str | None]:
    """DAG id -> None if `zonda dags test` gives every task instance Airflow's state, else how not.

    Only DAGs Airflow's `dag.test()` finished are compared, and not those listed as depending on the
    network or the wall clock (they are not run)."""
    results: dict[str, str | None] = {}
    every = os.environ.get("ZONDA_AIRFLOW3_OUTCOMES") == "all"
    for dag_id, entry in REFERENCE["dags"].items():
        theirs = entry.get("outcome") or {}
        if "state" not in theirs or "[not run]" in OUTCOME_DIFFERENCES.get(dag_id, ""):
            continue
        if dag_id in SLOW_OUTCOMES and not every:
            continue
        if isinstance(rendered.get(dag_id), str) or dag_id not in rendered:
            continue  # does not render: listed in STRUCTURE_DIFFERENCES, and not equal here
        ours = _zonda_outcome(dag_id)
        if isinstance(ours, str):
            results[dag_id] = ours
        elif ours != {"state": theirs["state"], "tasks": theirs["tasks"]}:
            diff = {
                k: (ours["tasks"].get(k), theirs["tasks"].get(k))
                for k in sorted(set(ours["tasks"]) | set(theirs["tasks"]))
                if ours["tasks"].get(k) != theirs["tasks"].get(k)
            }
            results[dag_id] = (
                f"run {ours['state']} (Airflow: {theirs['state']}), tasks (zonda, airflow): {diff}"
            )
        else:
            results[dag_id] = None
    return results


def test_airflow3_examples_end_as_under_airflow3s_dag_test(rendered: dict[str, dict[str, Any] | str]) -> None:
    results = outcome_results(rendered)
    same = sorted(d for d, why in results.items() if why is None)
    ran = [d for d, e in REFERENCE["dags"].items() if "state" in (e.get("outcome") or {})]
    version = REFERENCE["airflow_version"]
    print(f"\nAirflow {version} examples: outcomes {len(same)}/{len(ran)} of those Airflow ran")
    for dag_id, why in sorted(results.items()):
        if why is not None:
            print(f"  {dag_id}: {why}")
    unexpected = {d: why for d, why in results.items() if why is not None and d not in OUTCOME_DIFFERENCES}
    assert unexpected == {}
    stale = [d for d in OUTCOME_DIFFERENCES if results.get(d, "not compared") is None]
    assert stale == [], "listed as different but now equal: remove them from OUTCOME_DIFFERENCES"
    if os.environ.get("ZONDA_AIRFLOW3_OUTCOMES") != "all":
        assert (len(same), len(results)) == OUTCOMES_SAME


#: Airflow 3.3.2's asset example DAGs (of the files naming `Asset`) whose schedule, outlets and inlets
#: Zonda renders as Airflow loads them, of all of them: pinned, and printed with any difference.
ASSETS_SAME = (52, 52)


def test_airflow3_asset_examples_schedule_outlets_and_inlets_are_airflows() -> None:
    """The DAGs of Airflow 3's asset example files: the schedule's condition (as Airflow's asset
    condition, a name reference as the asset it resolves to), how the DAG is scheduled (assets, assets
    or time, time, nothing), and each task's outlets and inlets, as Airflow 3.3.2 loaded them."""
    expected = compare.airflow3_assets()
    got: dict[str, dict[str, Any] | None] = {}
    for file in sorted({entry["file"] for entry in expected.values()}):
        report = rendering.render_paths([EXAMPLES / file], airflow_compat=True)
        for dag in report.dags:
            got[dag.dag_id] = None if dag.manifest is None else compare.zonda_datasets(dag.manifest["spec"])
    results = {
        dag_id: compare.dataset_differences(
            compare.airflow_datasets(entry),
            None if got.get(dag_id) is None else {"datasets": got[dag_id]},
        )
        for dag_id, entry in expected.items()
    }
    same = sorted(d for d, problems in results.items() if not problems)
    print(f"\nAirflow 3 asset examples: schedule, outlets and inlets {len(same)}/{len(results)}")
    for dag_id, problems in sorted(results.items()):
        if problems:
            print(f"  {dag_id}: {problems}")
    assert (len(same), len(results)) == ASSETS_SAME, {d: p for d, p in results.items() if p}


def test_tutorial_taskflow_templates_renders_its_sql_file_in_the_try(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """Airflow 3.3.2's tutorial_taskflow_templates names `sql/tutorial_taskflow_template.sql` with
    `templates_exts=[".sql"]`: the task gets the file rendered with the task's params (Airflow's tutorial
    prints the same lines), not the file's name."""
    from controller.devtools import dag_runs

    outcome = dag_runs.test_file(
        EXAMPLES / "core" / "tutorial_taskflow_templates.py",
        dag_id="tutorial_taskflow_templates",
        airflow_compat=True,
    )
    assert outcome.task_states == {"template_test": "success"}
    printed = capfd.readouterr().out
    assert "sql: /*" in printed and "sql/tutorial_taskflow_template.sql" not in printed
    run_id = outcome.status.run_id  # Airflow 3's manual__<run_after>, not the DagRun's name
    assert f"select * from test_data\nwhere 1=1\n    and run_id = '{run_id}'" in printed
    assert "    and something_else = 'param_from_task'" in printed
