"""Record what Airflow 3 itself does with its own example DAG files: the reference Zonda is compared to.

Run with the Python of a venv holding apache-airflow 3.x and apache-airflow-providers-standard (NOT
Zonda's environment; Airflow is never a Zonda dependency):

    /work/venvs/af3/bin/python hack/airflow_reference/af3_reference.py \
        tests/airflow_examples/af3/reference.json [--resume] [--timeout SECONDS] [--only DAG,DAG]

It copies `airflow/example_dags` and the standard provider's `example_dags`, unchanged, into a
temporary DAGs folder, parses them with Airflow's DagBag (structure: task ids, upstream edges, trigger
rules), then runs each DAG's `dag.test()` in its own process with a timeout (outcome: the run's state
and each task instance's state) and writes one JSON document. Only the JSON is committed.

`dag.test()` parses and writes every DAG of its DAGs folder to the database before it runs, so each run
gets a folder with only its own file (and the helper folders beside it), unless the file names another
DAG (`TriggerDagRunOperator`, `ExternalTask*`): those see the whole folder. `--resume` keeps the
outcomes an earlier run of the script recorded in the output and runs only the DAGs without one (or
whose `dag.test()` timed out, or that an earlier version skipped); the machine is shared, so a run can
be done in parts, and the DAGs that timed out can be given a longer `--timeout` alone (`--only`: run
these DAG ids only, the others keep what the output has).

`--names` writes, instead, the public names of `airflow.sdk` and of the standard provider's modules
(`tests/airflow_examples/af3/names.json`): Zonda provides each or refuses it with a reason.

`--partitions` adds (or replaces) only the `partitions` section of an existing output: for each DAG of
`example_asset_partition.py`, as Airflow's scheduler deserializes it, the partition key its
CronPartitionTimetable gives sample firings, and what its PartitionedAssetTimetable's mapper for each
asset makes of sample upstream keys (`to_downstream`, a rollup's `to_upstream`, `to_partition_date`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

TEST_TIMEOUT_SECONDS = 150
#: A file naming one of these needs the DAGs it names beside it.
NEEDS_OTHER_DAGS = ("TriggerDagRunOperator", "ExternalTaskSensor", "ExternalTaskMarker")
#: What a DAG file of the examples may import from beside it.
HELPERS = ("__init__.py", "libs", "plugins", "sql")
#: DAG files whose runs are not recorded: none. `dag.test()` runs Assets, retry policies and state stores
#: in Airflow 3 with its in-process execution API; a file whose run waits for something that never
#: comes (a human, a file, another DAG) is recorded as not finishing within the timeout.
NOT_RUN_MARKERS: tuple[str, ...] = ()


def dialect_imports(airflow_version: str) -> str:
    """The import lines a small reference DAG needs (DAG, task, BashOperator) in the dialect of the
    Airflow running it, so one DAG text serves both venvs."""
    if airflow_version.startswith("3"):
        lines = [
            "from airflow.providers.standard.operators.bash import BashOperator",
            "from airflow.sdk import DAG, task",
        ]
    else:
        lines = [
            "from airflow import DAG",
            "from airflow.decorators import task",
            "from airflow.operators.bash import BashOperator",
        ]
    return "\n".join(lines)


def prepare_home(home: Path, dags_folder: Path) -> dict[str, str]:
    """Point this process (before it imports Airflow) and its children at a fresh AIRFLOW_HOME with
    `dags_folder`, no example DAGs, and its database migrated; the environment it set."""
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags_folder),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
    }
    os.environ.update(env)
    subprocess.run(
        [sys.executable, "-m", "airflow", "db", "migrate"], check=True, env=env, stdout=subprocess.DEVNULL
    )
    return env


def _to_run_again(error: str) -> bool:
    """An outcome `--resume` does not keep: a timeout, or a DAG an earlier version of this script
    skipped (its NOT_RUN_MARKERS were wider)."""
    return "did not finish" in error or error.startswith("not run:")


def _airflow_paths() -> dict[str, Path]:
    import airflow
    import airflow.providers.standard

    return {
        "core": Path(airflow.__file__).parent / "example_dags",
        "standard": Path(airflow.providers.standard.__file__).parent / "example_dags",
    }


def _structure(dag) -> dict:
    tasks = {}
    for task in dag.tasks:
        tasks[task.task_id] = {
            "upstream": sorted(task.upstream_task_ids),
            "trigger_rule": str(getattr(task.trigger_rule, "value", task.trigger_rule)),
            "operator": type(task).__name__,
        }
    return {"tasks": tasks}


def _test_one(dag_id: str, dags_folder: str) -> None:
    """In a child process: run `dag.test()` and print the outcome as one JSON line."""
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dags_folder)
    dag = bag.get_dag(dag_id)
    run = dag.test()
    from airflow.utils.session import create_session

    with create_session() as session:
        instances = run.get_task_instances(session=session)
        states = {
            (ti.task_id if ti.map_index < 0 else f"{ti.task_id}[{ti.map_index}]"): str(ti.state)
            for ti in instances
        }
        print("REFERENCE " + json.dumps({"state": str(run.state), "tasks": states}, sort_keys=True))


def _own_folder(home: Path, dags_folder: Path, file: str) -> Path:
    """A DAGs folder holding only `file` (relative to `dags_folder`) and its helpers."""
    own = home / "single" / file.replace("/", "__").removesuffix(".py")
    if own.exists():
        return own
    target = own / Path(file).parent
    target.mkdir(parents=True)
    for helper in HELPERS:
        source = dags_folder / Path(file).parent / helper
        if source.is_dir():
            shutil.copytree(source, target / helper, ignore=shutil.ignore_patterns("__pycache__"))
        elif source.exists():
            shutil.copy(source, target / helper)
    shutil.copy(dags_folder / file, own / file)
    return own


PARTITIONED_FILE = "core/example_asset_partition.py"
#: Upstream keys tried against every mapper of the partitioned examples.
SAMPLE_KEYS = (
    "2026-06-14T03:00:00",
    "2026-06-14T03:42:15",
    "2026-06-15T00:00:00",
    "2026-06-14",
    "2026-02-01",
    "us",
    "xx",
    "us|2026-06-14T03:00:00",
    "eu|2026-06-14T23:00:00",
)
#: Instants whose next firing's partition key a CronPartitionTimetable is asked.
SAMPLE_TIMES = ("2026-06-14T02:59:00+00:00", "2026-06-14T23:59:00+00:00")


def _mapped(mapper, key: str) -> dict:
    try:
        found = mapper.to_downstream(key)
    except Exception as error:  # what Airflow's scheduler catches: the event is not mapped
        return {"error": type(error).__name__}
    keys = [found] if isinstance(found, str) else list(found)
    entry: dict = {"keys": keys}
    dates = {}
    for target in keys:
        try:
            date = mapper.to_partition_date(target)
        except Exception as error:
            date = type(error).__name__
        dates[target] = date.isoformat() if hasattr(date, "isoformat") else date
    entry["partition_dates"] = dates
    if getattr(mapper, "is_rollup", False):
        entry["upstream"] = {target: sorted(mapper.to_upstream(target)) for target in keys}
    return entry


def _partition_facts(output: Path) -> None:
    import pendulum
    from airflow.dag_processing.dagbag import DagBag
    from airflow.serialization.serialized_objects import DagSerialization

    home = Path(tempfile.mkdtemp(prefix="af3-partitions-"))
    source = _airflow_paths()["core"] / Path(PARTITIONED_FILE).name
    (home / "dags").mkdir()
    shutil.copy(source, home / "dags")
    bag = DagBag(str(home / "dags"))
    facts: dict = {}
    for dag_id, dag in sorted(bag.dags.items()):
        timetable = DagSerialization.from_dict(DagSerialization.to_dict(dag)).timetable  # the scheduler's
        entry: dict = {"timetable": type(timetable).__name__}
        if hasattr(timetable, "_get_partition_info"):
            keys = {}
            for when in SAMPLE_TIMES:
                firing = timetable._align_to_next(pendulum.parse(when))
                date, key = timetable._get_partition_info(firing)
                keys[firing.isoformat()] = {"key": key, "date": date.isoformat()}
            entry["firings"] = keys
        if hasattr(timetable, "get_partition_mapper"):
            assets = {}
            condition = timetable.asset_condition
            for key, _ in condition.iter_assets():
                mapper = timetable.get_partition_mapper(name=key.name, uri=key.uri)
                assets[key.uri] = {k: _mapped(mapper, k) for k in SAMPLE_KEYS}
            for ref in condition.iter_asset_refs():  # `Asset.ref(name=...)`: by name (or uri)
                name, uri = getattr(ref, "name", ""), getattr(ref, "uri", "")
                mapper = timetable.get_partition_mapper(name=name, uri=uri)
                assets[f"name:{name}" if name else uri] = {k: _mapped(mapper, k) for k in SAMPLE_KEYS}
            if assets:
                entry["assets"] = assets
        facts[dag_id] = entry
    reference = json.loads(output.read_text())
    reference["partitions"] = facts
    output.write_text(json.dumps(reference, indent=1, sort_keys=True) + "\n")
    shutil.rmtree(home, ignore_errors=True)


def _public_names(output: Path) -> None:
    """`--names`: every name `airflow.sdk` exports and every public name of each standard provider
    module (operators, sensors, triggers, decorators, utils), for the test that each is provided by
    Zonda or refused with a reason."""
    import importlib
    import pkgutil

    import airflow.sdk

    names: dict[str, list[str]] = {"airflow.sdk": sorted(airflow.sdk.__all__)}
    for package in ("operators", "sensors", "triggers", "decorators", "utils"):
        parent = importlib.import_module(f"airflow.providers.standard.{package}")
        for found in pkgutil.iter_modules(parent.__path__):
            name = f"airflow.providers.standard.{package}.{found.name}"
            module = importlib.import_module(name)
            public = getattr(module, "__all__", None) or [
                attribute
                for attribute, value in vars(module).items()
                if not attribute.startswith("_")
                and getattr(value, "__module__", None) == name
                and (isinstance(value, type) or callable(value))
            ]
            names[name] = sorted(public)
    import airflow.providers.standard

    document = {
        "airflow_version": airflow.__version__,
        "providers_standard_version": airflow.providers.standard.__version__,
        "names": names,
    }
    output.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")


def main(
    output: Path, *, resume: bool = False, timeout: float = TEST_TIMEOUT_SECONDS, only: set[str] | None = None
) -> None:
    import airflow

    earlier: dict = {}
    kept: dict = {}  # sections other modes wrote (`--partitions`), kept by a resumed run
    if resume and output.exists():
        kept = {k: v for k, v in json.loads(output.read_text()).items() if k == "partitions"}
        earlier = {
            dag_id: entry["outcome"]
            for dag_id, entry in json.loads(output.read_text())["dags"].items()
            if "state" in (entry.get("outcome") or {})
            or not _to_run_again((entry.get("outcome") or {}).get("error", "did not finish"))
        }

    home = Path(tempfile.mkdtemp(prefix="af3-reference-"))
    dags_folder = home / "dags"
    for name, source in _airflow_paths().items():
        shutil.copytree(source, dags_folder / name, ignore=shutil.ignore_patterns("__pycache__"))
    env = prepare_home(home, dags_folder)
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(str(dags_folder))
    # dag.test() writes every DAG of the folder to the database: a DAG Airflow itself cannot serialize
    # (one needing a plugin) would fail them all, so it is left out of the folder and recorded.
    from airflow.serialization.serialized_objects import DagSerialization

    unserializable: dict[str, str] = {}
    for dag in bag.dags.values():
        try:
            DagSerialization.serialize_dag(dag)
        except Exception as error:  # Airflow's own reason is what is recorded
            unserializable[Path(dag.fileloc).relative_to(dags_folder).as_posix()] = str(error)
    (dags_folder / ".airflowignore").write_text(
        "".join(file + "\n" for file in sorted(unserializable))  # glob: Airflow 3's default syntax
    )
    result: dict = {
        "not_serializable": unserializable,
        "airflow_version": airflow.__version__,
        "import_errors": {
            Path(k).relative_to(dags_folder).as_posix(): v.splitlines()[-1]
            for k, v in bag.import_errors.items()
        },
        "dags": {},
        **kept,
    }
    for dag_id in sorted(bag.dags):  # the structure first: it needs no run
        dag = bag.dags[dag_id]
        result["dags"][dag_id] = {
            "file": Path(dag.fileloc).relative_to(dags_folder).as_posix(),
            **_structure(dag),
        }
    output.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    for dag_id in sorted(bag.dags):
        dag = bag.dags[dag_id]
        entry = {"file": Path(dag.fileloc).relative_to(dags_folder).as_posix(), **_structure(dag)}
        source = (dags_folder / entry["file"]).read_text()
        if any(marker in source for marker in NOT_RUN_MARKERS):
            entry["outcome"] = {"error": "not run: " + ", ".join(NOT_RUN_MARKERS)}
            result["dags"][dag_id] = entry
            continue
        if dag_id in earlier or (only is not None and dag_id not in only):
            entry["outcome"] = earlier.get(dag_id, {"error": "not run: not among --only"})
            result["dags"][dag_id] = entry
            continue
        if entry["file"] in unserializable:
            entry["outcome"] = {"error": "not serializable by Airflow: " + unserializable[entry["file"]]}
            result["dags"][dag_id] = entry
            continue
        folder = dags_folder
        if not any(name in source for name in NEEDS_OTHER_DAGS):
            folder = _own_folder(home, dags_folder, entry["file"])
        try:
            child = subprocess.run(
                [sys.executable, __file__, "--test", dag_id, str(folder)],
                env={**env, "AIRFLOW__CORE__DAGS_FOLDER": str(folder)},
                capture_output=True,
                text=True,
                timeout=timeout,
            )
            lines = [line for line in child.stdout.splitlines() if line.startswith("REFERENCE ")]
            if lines:
                entry["outcome"] = json.loads(lines[-1][len("REFERENCE ") :])
            else:
                entry["outcome"] = {"error": (child.stderr.strip().splitlines() or ["no output"])[-1]}
        except subprocess.TimeoutExpired:
            entry["outcome"] = {"error": f"dag.test() did not finish in {timeout:g}s"}
        print(dag_id, entry["outcome"].get("state") or entry["outcome"].get("error"), flush=True)
        result["dags"][dag_id] = entry
        output.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")  # progress, if stopped
    output.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    if sys.argv[1] == "--test":
        _test_one(sys.argv[2], sys.argv[3])
    elif "--partitions" in sys.argv[2:]:
        _partition_facts(Path(sys.argv[1]))
    elif "--names" in sys.argv[2:]:
        _public_names(Path(sys.argv[1]))
    else:
        arguments = sys.argv[2:]
        seconds = float(arguments[arguments.index("--timeout") + 1]) if "--timeout" in arguments else None
        only = set(arguments[arguments.index("--only") + 1].split(",")) if "--only" in arguments else None
        main(
            Path(sys.argv[1]),
            resume="--resume" in arguments,
            timeout=seconds or TEST_TIMEOUT_SECONDS,
            only=only,
        )
