"""Airflow 2.10.5's own example DAGs, run by Airflow 2.10.5: the reference Zonda's tests compare with.

Run with the Python of a venv holding `apache-airflow==2.10.5` (never Zonda's):

    python3 -m venv /work/venvs/af2 && /work/venvs/af2/bin/pip install apache-airflow==2.10.5
    /work/venvs/af2/bin/python hack/airflow_reference/af2_examples.py

It copies `airflow/example_dags` out of the installed wheel, unchanged, with Airflow's LICENSE and
NOTICE, into tests/airflow_examples/af2/dags (Apache-2.0, as Zonda), loads them with a DagBag and, for
each DAG records its structure (task ids with group prefixes, upstream ids, trigger rules, the
display name); for each DAG whose file does not use Datasets it runs `dag.test(execution_date=
LOGICAL_DATE)` in its own process against a fresh SQLite metadata database, recording each task
instance's final state (one per map index); for each that does, it records the data-aware parts
(`datasets`: the schedule's `as_expression()`, the timetable's class, each task's outlets and inlets).
The JSON (tests/airflow_examples/af2/reference.json) is what Zonda must match.

    .../python hack/airflow_reference/af2_examples.py --only    # keep every dag.test() entry as it is
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "tests" / "airflow_examples" / "af2"
#: A fixed Monday: outcomes that depend on the logical date are the same on every run of this script.
LOGICAL_DATE = "2024-06-03T00:00:00+00:00"
#: Seconds one `dag.test()` may take (ExternalTaskSensor waits up to 600 s for its parent).
TEST_TIMEOUT = 900


def dataset_file(path: Path) -> bool:
    """Whether a DAG file belongs to data-aware scheduling (issue 21's corpus, not this one)."""
    source = path.read_text()
    return "airflow.datasets" in source


def _environment(home: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        AIRFLOW_HOME=str(home),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__CORE__UNIT_TEST_MODE="False",
        AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=f"sqlite:///{home}/airflow.db",
        AIRFLOW__CORE__DAGS_FOLDER=str(home / "dags"),
        AIRFLOW__LOGGING__LOGGING_LEVEL="WARNING",
    )
    return env


def copy_examples(destination: Path) -> Path:
    """airflow/example_dags, unchanged, with the distribution's LICENSE and NOTICE."""
    import importlib.metadata

    import airflow.example_dags

    source = Path(airflow.example_dags.__file__).parent
    if destination.exists():
        shutil.rmtree(destination)
    shutil.copytree(source, destination, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    distribution = importlib.metadata.distribution("apache-airflow")
    for name in ("LICENSE", "NOTICE"):
        found = [f for f in distribution.files or [] if f.name == name]
        if found:
            shutil.copy(Path(str(distribution.locate_file(found[0]))), destination.parent / name)
    return source


def structure(dag: Any) -> dict[str, Any]:
    tasks = {}
    for task in dag.tasks:
        tasks[task.task_id] = {
            "operator": type(task).__name__,
            "trigger_rule": str(
                task.trigger_rule.value if hasattr(task.trigger_rule, "value") else task.trigger_rule
            ),
            "upstream": sorted(task.upstream_task_ids),
            "is_setup": bool(getattr(task, "is_setup", False)),
            "is_teardown": bool(getattr(task, "is_teardown", False)),
            "mapped": type(task).__name__ == "MappedOperator" or hasattr(task, "expand_input"),
        }
    return {"dag_display_name": dag.dag_display_name, "tasks": tasks}


def _reference(obj: Any) -> Any:
    """A Dataset as its URI, a DatasetAlias as {"alias": name} (as `as_expression()` writes them)."""
    from airflow.datasets import DatasetAlias

    return {"alias": obj.name} if isinstance(obj, DatasetAlias) else getattr(obj, "uri", repr(obj))


def datasets(dag: Any) -> dict[str, Any]:
    """The data-aware parts of a DAG, as Airflow holds them."""
    condition = getattr(dag.timetable, "dataset_condition", None)
    return {
        "schedule": condition.as_expression() if condition is not None else None,
        "timetable": type(dag.timetable).__name__,
        "outlets": {t.task_id: [_reference(o) for o in t.outlets] for t in dag.tasks if t.outlets},
        "inlets": {t.task_id: [_reference(i) for i in t.inlets] for t in dag.tasks if t.inlets},
    }


def run_one(dag_id: str, folder: str, logical_date: str) -> None:
    """In a child process: `dag.test()` one DAG, print {task_id: {map_index: state}} as JSON."""
    import logging

    import pendulum
    from airflow.models.dagbag import DagBag

    logging.disable(logging.CRITICAL)
    bag = DagBag(dag_folder=folder, include_examples=False)
    dag = bag.get_dag(dag_id)
    run = dag.test(execution_date=pendulum.parse(logical_date))
    states: dict[str, dict[str, str | None]] = {}
    for ti in run.get_task_instances():
        states.setdefault(ti.task_id, {})[str(ti.map_index)] = ti.state
    print("REFERENCE-JSON " + json.dumps({"state": run.state, "tasks": states}, sort_keys=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    parser.add_argument("--logical-date", default=LOGICAL_DATE)
    parser.add_argument(
        "--only", nargs="*", help="dag.test() these dag ids only (the others keep their entries)."
    )
    args = parser.parse_args()
    if args.one:
        run_one(args.one, args.folder, args.logical_date)
        return

    home = Path(tempfile.mkdtemp(prefix="af2-reference-"))
    os.environ.update(_environment(home))
    import airflow

    dags_copy = OUT / "dags"
    copy_examples(dags_copy)
    shutil.copytree(dags_copy, home / "dags")  # DAG files run from a folder as in a deployment
    subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], check=True, capture_output=True)

    from airflow.models.dagbag import DagBag

    bag = DagBag(dag_folder=str(home / "dags"), include_examples=False)
    reference_path = OUT / "reference.json"
    previous = json.loads(reference_path.read_text())["dags"] if reference_path.exists() else {}
    dags: dict[str, Any] = {}
    for dag_id, dag in sorted(bag.dags.items()):
        relative = str(Path(dag.fileloc).relative_to(home / "dags"))
        entry: dict[str, Any] = {"file": relative, "dataset": dataset_file(Path(dag.fileloc))}
        entry["structure"] = structure(dag)
        if entry["dataset"]:
            entry["datasets"] = datasets(dag)
            dags[dag_id] = entry
            continue
        if args.only is not None and dag_id not in args.only and dag_id in previous:
            dags[dag_id] = previous[dag_id]
            continue
        print(f"dag.test {dag_id}", file=sys.stderr, flush=True)
        try:
            done = subprocess.run(
                [sys.executable, __file__, "--one", dag_id, "--folder", str(home / "dags"),
                 "--logical-date", args.logical_date],
                capture_output=True, text=True, timeout=TEST_TIMEOUT, env=os.environ, cwd=home,
            )  # fmt: skip
            lines = [line for line in done.stdout.splitlines() if line.startswith("REFERENCE-JSON ")]
            if lines:
                entry["test"] = json.loads(lines[-1].removeprefix("REFERENCE-JSON "))
            else:
                entry["test"] = {"error": (done.stderr or done.stdout).strip().splitlines()[-5:]}
        except subprocess.TimeoutExpired:
            entry["test"] = {"error": [f"dag.test took more than {TEST_TIMEOUT} s"]}
        dags[dag_id] = entry
    reference = {
        "airflow": airflow.__version__,
        "logical_date": args.logical_date,
        "python": sys.version.split()[0],
        "import_errors": {
            str(Path(k).relative_to(home / "dags")): v.strip().splitlines()[-1]
            for k, v in bag.import_errors.items()
        },
        "dags": dags,
    }
    reference_path.write_text(json.dumps(reference, indent=1, sort_keys=True) + "\n")
    print(f"{len(dags)} DAGs -> {reference_path.relative_to(REPO)}", file=sys.stderr)


if __name__ == "__main__":
    main()
