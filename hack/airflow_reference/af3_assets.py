"""Record the data-aware parts of Airflow 3's own asset example DAGs, as Airflow 3 itself loads them.

Run with the Python of a venv holding apache-airflow 3.x and apache-airflow-providers-standard (NOT
Zonda's environment; Airflow is never a Zonda dependency):

    /work/venvs/af3/bin/python hack/airflow_reference/af3_assets.py tests/airflow_examples/af3/assets.json

For every DAG of the files of `airflow/example_dags` that use assets (their source names `Asset`), as
Airflow's DagBag loads them and its scheduler deserializes them: the schedule's asset condition (an
asset as its URI, an alias as `{"alias": name}`, a reference by name as the URI of the asset of that
name a DAG of the files declares (the active asset Airflow's scheduler resolves it to), `AssetAll`
as `{"all": [...]}`, `AssetAny` as `{"any": [...]}`), the timetable's class, and each task's outlets
and inlets written the same way. `tests/unit/zonda/authoring/test_airflow3_examples.py` compares
Zonda's render with it (the Airflow 2.10.5 corpus has the same parts in its reference.json).
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any


def _written(item: Any, names: dict[str, str]) -> Any:
    from airflow.sdk import Asset, AssetAlias
    from airflow.sdk.definitions.asset import AssetAll, AssetAny, AssetNameRef, AssetUriRef

    if isinstance(item, AssetAll):
        return {"all": [_written(o, names) for o in item.objects]}
    if isinstance(item, AssetAny):
        return {"any": [_written(o, names) for o in item.objects]}
    if isinstance(item, AssetAlias):
        return {"alias": item.name}
    if isinstance(item, Asset):
        return item.uri
    if isinstance(item, AssetNameRef):  # as the scheduler resolves it: the active asset of that name
        return names.get(item.name, {"name": item.name})
    if isinstance(item, AssetUriRef):
        return item.uri
    return {"unknown": type(item).__name__}


def _leaves(condition: Any) -> list[Any]:
    if condition is None:
        return []
    if hasattr(condition, "objects"):
        return [leaf for o in condition.objects for leaf in _leaves(o)]
    return [condition]


def _asset_names(dags: Any) -> dict[str, str]:
    """Name -> URI of every asset a DAG of the bag declares (Airflow's active assets)."""
    from airflow.sdk import Asset

    found: dict[str, str] = {}
    for dag in dags:
        condition = getattr(dag.timetable, "asset_condition", None)
        declared = [*_leaves(condition), *(o for t in dag.tasks for o in [*t.outlets, *t.inlets])]
        found.update({a.name: a.uri for a in declared if isinstance(a, Asset)})
    return found


def facts(dag: Any, names: dict[str, str]) -> dict[str, Any]:
    from airflow.serialization.serialized_objects import DagSerialization

    timetable = DagSerialization.from_dict(DagSerialization.to_dict(dag)).timetable  # the scheduler's
    condition = getattr(dag.timetable, "asset_condition", None)
    return {
        "schedule": _written(condition, names) if condition is not None else None,
        "timetable": type(timetable).__name__,
        "outlets": {t.task_id: [_written(o, names) for o in t.outlets] for t in dag.tasks if t.outlets},
        "inlets": {t.task_id: [_written(i, names) for i in t.inlets] for t in dag.tasks if t.inlets},
    }


def main(output: Path) -> None:
    import airflow
    from airflow.dag_processing.dagbag import DagBag

    source = Path(airflow.__file__).parent / "example_dags"
    home = Path(tempfile.mkdtemp(prefix="af3-assets-"))
    folder = home / "core"
    folder.mkdir()
    files = sorted(p.name for p in source.glob("*.py") if "Asset" in p.read_text())
    for name in files:
        shutil.copy(source / name, folder / name)
    for helper in ("__init__.py", "libs", "plugins"):
        if (source / helper).is_dir():
            shutil.copytree(source / helper, folder / helper, ignore=shutil.ignore_patterns("__pycache__"))
        elif (source / helper).exists():
            shutil.copy(source / helper, folder / helper)
    bag = DagBag(str(folder))
    names = _asset_names(bag.dags.values())
    result = {
        "airflow_version": airflow.__version__,
        "files": [f"core/{name}" for name in files],
        "import_errors": {Path(k).name: v.splitlines()[-1] for k, v in bag.import_errors.items()},
        "dags": {
            dag_id: {"file": f"core/{Path(dag.fileloc).name}", **facts(dag, names)}
            for dag_id, dag in sorted(bag.dags.items())
        },
    }
    output.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
