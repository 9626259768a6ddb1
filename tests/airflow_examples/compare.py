"""Airflow's example DAGs under Zonda, compared with what Airflow itself gave (`reference.json`).

Two corpora side by side, each its Airflow's example DAG files vendored unchanged in `dags/` (with
Airflow's LICENSE and NOTICE) and the `reference.json` a script made by running that Airflow:
`af2/` (Airflow 2.10.5, `hack/airflow_reference/af2_examples.py`) and `af3/` (Airflow 3.3.2's
`airflow/example_dags` in `dags/core` and the standard provider's in `dags/standard`,
`hack/airflow_reference/af3_reference.py`). This module renders the Airflow 2 files with
`--airflow-compat` and describes each DAG the way its reference does, so a test (and `python -m
tests.airflow_examples.compare`) can diff them; the Airflow 3 corpus is compared by
`tests/unit/zonda/authoring/test_airflow3_examples.py`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
AF2 = HERE / "af2"
AF3 = HERE / "af3"


def reference(corpus: Path = AF2) -> dict[str, Any]:
    return json.loads((corpus / "reference.json").read_text())  # type: ignore[no-any-return]


def non_dataset_dags(corpus: Path = AF2) -> dict[str, Any]:
    return {dag_id: entry for dag_id, entry in reference(corpus)["dags"].items() if not entry["dataset"]}


def dataset_dags(corpus: Path = AF2) -> dict[str, Any]:
    """The DAGs of the files that use `airflow.datasets` (issue 21's 23), with their data-aware parts."""
    return {dag_id: entry for dag_id, entry in reference(corpus)["dags"].items() if entry["dataset"]}


#: Airflow's timetable class of a DAG -> how it is scheduled, in words both sides can be read as.
_SCHEDULED_BY = {
    "DatasetTriggeredTimetable": "datasets",
    "DatasetOrTimeSchedule": "datasets or time",
    "NullTimetable": "nothing",
    # Airflow 3's
    "AssetTriggeredTimetable": "datasets",
    "PartitionedAssetTimetable": "datasets",
    "AssetOrTimeSchedule": "datasets or time",
    "PartitionedAtRuntime": "nothing",
}


def _expression(raw: Any) -> Any:
    """A schedule expression as Airflow's `as_expression()` writes it, with an `all`/`any` of one
    item read as that item (Airflow's `schedule=[d]` is `DatasetAll(d)`, Zonda writes `d`)."""
    if isinstance(raw, dict) and len(raw) == 1 and next(iter(raw)) in ("all", "any"):
        items = [_expression(item) for item in next(iter(raw.values()))]
        return items[0] if len(items) == 1 else {next(iter(raw)): items}
    if isinstance(raw, dict) and "alias" in raw:
        return {"alias": raw["alias"]}
    if isinstance(raw, dict) and "uri" in raw:
        return raw["uri"]
    return raw


def airflow_datasets(entry: dict[str, Any]) -> dict[str, Any]:
    parts = entry["datasets"]
    return {
        "schedule": _expression(parts["schedule"]),
        "scheduled_by": _SCHEDULED_BY.get(parts["timetable"], "time"),
        "outlets": parts["outlets"],
        "inlets": parts["inlets"],
    }


def airflow3_assets(corpus: Path = AF3) -> dict[str, Any]:
    """DAG id -> the data-aware parts of each DAG of Airflow 3's asset example files, as Airflow loaded
    them (`assets.json`, written by `hack/airflow_reference/af3_assets.py`), read as `airflow_datasets`."""
    written = json.loads((corpus / "assets.json").read_text())
    return {dag_id: {"file": entry["file"], "datasets": entry} for dag_id, entry in written["dags"].items()}


def zonda_datasets(spec: dict[str, Any]) -> dict[str, Any]:
    """The same parts of a rendered manifest's spec."""
    timed = spec.get("schedule") is not None or spec.get("timetable") is not None
    assets = spec.get("assetSchedule")
    scheduled_by = (
        ("datasets or time" if timed else "datasets") if assets else ("time" if timed else "nothing")
    )
    tasks = spec.get("tasks") or []
    return {
        "schedule": _expression(assets),
        "scheduled_by": scheduled_by,
        "outlets": {t["id"]: [_expression(o) for o in t["outlets"]] for t in tasks if t.get("outlets")},
        "inlets": {t["id"]: [_expression(i) for i in t["inlets"]] for t in tasks if t.get("inlets")},
    }


def dataset_differences(expected: dict[str, Any], got: dict[str, Any] | None) -> list[str]:
    if got is None or "datasets" not in got:
        return ["not rendered"]
    return [
        f"{part}: {got['datasets'][part]!r}, Airflow {want!r}"
        for part, want in expected.items()
        if got["datasets"][part] != want
    ]


def airflow_structure(entry: dict[str, Any]) -> dict[str, Any]:
    """The parts of the reference's structure Zonda must match: ids, upstream ids, trigger rules."""
    tasks = entry["structure"]["tasks"]
    return {
        "dag_display_name": entry["structure"]["dag_display_name"],
        "tasks": {
            task_id: {"upstream": task["upstream"], "trigger_rule": task["trigger_rule"]}
            for task_id, task in tasks.items()
        },
    }


def render_corpus(corpus: Path = AF2) -> dict[str, dict[str, Any]]:
    """dag id -> its structure as Zonda renders it, or {"error": ...} when it does not render."""
    from zonda.authoring import rendering
    from zonda.specs.dags import parse_dag_spec, resolve_dag

    report = rendering.render_paths([corpus / "dags"], airflow_compat=True)
    found: dict[str, dict[str, Any]] = {}
    for dag in report.dags:
        if dag.manifest is None:
            found[dag.dag_id] = {"error": "; ".join(dag.errors)}
            continue
        resolved = resolve_dag(dag.manifest["metadata"]["name"], parse_dag_spec(dag.manifest["spec"]))
        found[dag.dag_id] = {
            "file": dag.file,
            "dag_display_name": dag.manifest["spec"].get("displayName") or dag.dag_id,
            "tasks": {
                task.task_id: {"upstream": sorted(task.upstream), "trigger_rule": task.trigger_rule.value}
                for task in resolved.tasks.values()
            },
            "datasets": zonda_datasets(dag.manifest["spec"]),
        }
    for file, message in report.file_errors.items():
        found.setdefault(f"<file {file}>", {"error": message.splitlines()[-1], "file": file})
    return found


def structure_differences(expected: dict[str, Any], got: dict[str, Any] | None) -> list[str]:
    if got is None:
        return ["not rendered"]
    if "error" in got:
        return [f"render failed: {got['error']}"]
    problems = []
    if expected["dag_display_name"] != got["dag_display_name"]:
        problems.append(f"display name {got['dag_display_name']!r}, Airflow {expected['dag_display_name']!r}")
    missing = sorted(set(expected["tasks"]) - set(got["tasks"]))
    extra = sorted(set(got["tasks"]) - set(expected["tasks"]))
    if missing:
        problems.append(f"tasks missing: {missing}")
    if extra:
        problems.append(f"tasks Airflow does not have: {extra}")
    for task_id in sorted(set(expected["tasks"]) & set(got["tasks"])):
        want, have = expected["tasks"][task_id], got["tasks"][task_id]
        if want["upstream"] != have["upstream"]:
            problems.append(f"{task_id}: upstream {have['upstream']}, Airflow {want['upstream']}")
        if want["trigger_rule"] != have["trigger_rule"]:
            problems.append(f"{task_id}: trigger rule {have['trigger_rule']}, Airflow {want['trigger_rule']}")
    return problems


def run_one(file: Path, dag_id: str, logical_date: str) -> dict[str, Any]:
    """`zonda dags test` of one DAG, in this process: {"state", "tasks": {task_id: {map_index: state}}}."""
    from controller.devtools import dag_runs

    outcome = dag_runs.test_file(file, dag_id=dag_id, logical_date=logical_date, airflow_compat=True)
    tasks: dict[str, dict[str, str]] = {}
    for key, state in outcome.task_states.items():
        task_id, _, index = key.partition("[")
        tasks.setdefault(task_id, {})[index.rstrip("]") or "-1"] = state
    return {"state": outcome.state, "tasks": tasks}


def test_corpus(dag_ids: list[str] | None = None, corpus: Path = AF2, timeout: float = 900) -> dict[str, Any]:
    """Each DAG's `zonda dags test` outcome, each in a process of its own (as each `dag.test()` was)."""
    import subprocess

    ref = reference(corpus)
    found: dict[str, Any] = {}
    for dag_id, entry in sorted(non_dataset_dags(corpus).items()):
        if dag_ids and dag_id not in dag_ids:
            continue
        file = str(corpus / "dags" / entry["file"])
        command = [
            sys.executable,
            "-m",
            "tests.airflow_examples.compare",
            "--run",
            file,
            dag_id,
            ref["logical_date"],
        ]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            found[dag_id] = {"error": f"more than {timeout} s"}
            continue
        lines = [line for line in done.stdout.splitlines() if line.startswith("OUTCOME-JSON ")]
        if lines:
            found[dag_id] = json.loads(lines[-1].removeprefix("OUTCOME-JSON "))
        else:
            found[dag_id] = {"error": (done.stderr or done.stdout).strip().splitlines()[-1:]}
    return found


def outcome_differences(expected: dict[str, Any], got: dict[str, Any]) -> list[str]:
    if "ParamValidationError" in str(expected.get("error")) and "param" in str(got.get("error")).lower():
        return []  # neither made a run: a required Param without a value
    if "error" in expected:
        return [f"Airflow's dag.test failed: {expected['error'][-1:]}"]
    if "error" in got:
        return [f"zonda dags test failed: {got['error']}"]
    problems = []
    for task_id in sorted(set(expected["tasks"]) | set(got["tasks"])):
        want, have = expected["tasks"].get(task_id), got["tasks"].get(task_id)
        if want != have:
            problems.append(f"{task_id}: {have}, Airflow {want}")
    return problems


def main() -> None:
    if sys.argv[1:2] == ["--run"]:
        file, dag_id, logical_date = sys.argv[2:5]
        print("OUTCOME-JSON " + json.dumps(run_one(Path(file), dag_id, logical_date), sort_keys=True))
        return
    rendered = render_corpus()
    dags = non_dataset_dags()
    matched = 0
    for dag_id, entry in sorted(dags.items()):
        problems = structure_differences(airflow_structure(entry), rendered.get(dag_id))
        matched += not problems
        print(f"{'ok  ' if not problems else 'DIFF'} {dag_id}" + "".join(f"\n       {p}" for p in problems))
    print(f"structure: {matched}/{len(dags)}")
    if "--outcomes" not in sys.argv:
        return
    only = [a for a in sys.argv[1:] if not a.startswith("--")] or None
    outcomes = test_corpus(only)
    same = 0
    for dag_id, got in sorted(outcomes.items()):
        problems = outcome_differences(dags[dag_id].get("test", {"error": "not run"}), got)
        same += not problems
        print(f"{'ok  ' if not problems else 'DIFF'} {dag_id}" + "".join(f"\n       {p}" for p in problems))
    print(f"outcomes: {same}/{len(outcomes)}")


if __name__ == "__main__":
    main()
