"""A user's code in the controller runs with a time limit: DAGs whose custom timetable hangs are told
so (`Ready=False`, `TimetableTimeout`, a Warning Event naming the class and the limit) and the other
DAGs keep being scheduled and run.

More hanging DAGs than reconcile workers (`--workers 2`, 3 hanging): inline calls would hold every
worker, and the event loop itself. The normal DAG is applied only after every hanging DAG was seen
reported (their calls are stuck by then), so its runs prove the passes go on beside them.

Real: the apiserver, the controller process (local executor), `tests.faulty_timetables`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from controller.devtools.devcluster import Cluster
from tests.cluster.zonda_processes import apply, controller, get, runs_of, wait_for, wait_run_finished

API = "zonda.dev/v1alpha1"
HANGING = "tests.faulty_timetables.HangingTimetable"
STUCK = [f"stuck-{i}" for i in range(3)]


def dag(name: str, **spec: Any) -> dict[str, Any]:
    tasks = [{"id": "noop", "operator": "EmptyOperator"}]
    return {"apiVersion": API, "kind": "DAG", "metadata": {"name": name}, "spec": {"tasks": tasks} | spec}


def ready(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    conds = (get(cluster, namespace, "dag", name).get("status") or {}).get("conditions") or []
    return next((c for c in conds if c["type"] == "Ready"), {})


def test_dags_whose_timetable_hangs_are_reported_and_the_other_dags_still_run(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    extra = ["--workers", "2", "--timetable-timeout", "1"]
    with controller(cluster, namespace, tmp_path, executor="local", extra=extra):
        for name in STUCK:
            apply(cluster, namespace, dag(name, timetable={"class": HANGING, "params": {}},
                                          startDate="2026-01-01T00:00:00Z"))  # fmt: skip
        for name in STUCK:
            cond = wait_for(
                lambda name=name: (
                    (c := ready(cluster, namespace, name)).get("reason") == "TimetableTimeout" and c
                ),
                f"{name} to be reported TimetableTimeout",
            )
            assert cond["status"] == "False" and HANGING in cond["message"] and "1 s" in cond["message"]
        apply(cluster, namespace, dag("normal", schedule="@daily", startDate="2026-01-01T00:00:00Z",
                                      catchup=False))  # fmt: skip
        first = wait_for(lambda: runs_of(cluster, namespace, "normal"), "the normal DAG's run", 60)[0]
        done = wait_run_finished(cluster, namespace, first["metadata"]["name"])
        assert done["status"]["state"] == "success"
        assert ready(cluster, namespace, "normal")["status"] == "True"
        events = get(cluster, namespace, "events")["items"]
    for name in STUCK:  # the positive control above: runs are created in this namespace
        assert runs_of(cluster, namespace, name) == [], f"{name}: no run from a timetable that never answered"
        told = [
            e
            for e in events
            if e["involvedObject"]["name"] == name
            and (e["reason"], e["type"]) == ("TimetableTimeout", "Warning")
        ]
        assert told and HANGING in told[0]["message"], name
