"""A user's code in the controller runs with a time limit: DAGs whose custom timetable hangs are told
so (`Ready=False`, `TimetableTimeout`, a Warning Event naming the class and the limit) and the other
DAGs keep being scheduled and run.

More hanging DAGs than reconcile workers (`--workers 2`, 3 hanging): inline calls would hold every
worker, and the event loop itself. The normal DAG is applied only after every hanging DAG was seen
reported (their calls are stuck by then), so its runs prove the passes go on beside them.

Every other call of a custom timetable by the controller is bounded too, and one that raises is named
(the second test): a run's start, a run's LatestOnlyOperator window, a Backfill's dates, and
`zonda dags next-runs`; a normal DAG's run and Backfill, and next-runs of it, are the positive controls.

Real: the apiserver, the controller process (local executor), the CLI, `tests.faulty_timetables`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from controller.devtools.devcluster import Cluster
from tests.cluster.zonda_processes import (
    apply,
    controller,
    get,
    runs_of,
    wait_for,
    wait_run_finished,
    zonda,
)
from tests.faulty_timetables import DOWN
from zonda.resources.dagrun_models import dagrun_labels
from zonda.resources.run_types import RunType

API = "zonda.dev/v1alpha1"
HANGING = "tests.faulty_timetables.HangingTimetable"
RAISING = "tests.faulty_timetables.RaisingTimetable"
STUCK = [f"stuck-{i}" for i in range(3)]
START = "2026-01-01T00:00:00Z"
#: DAG -> (its timetable class, the reason its objects are given, words of the message)
FAULTY = {
    "hangs": (HANGING, "TimetableTimeout", "did not answer within the controller's limit of 1 s"),
    "raises": (RAISING, "TimetableError", f"raised RuntimeError: {DOWN}"),
}


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


def condition(cluster: Cluster, namespace: str, resource: str, name: str, kind: str) -> dict[str, Any]:
    conds = (get(cluster, namespace, resource, name).get("status") or {}).get("conditions") or []
    return next((c for c in conds if c["type"] == kind), {})


def ti_state(cluster: Cluster, namespace: str, run: str, task: str) -> str | None:
    tis = (get(cluster, namespace, "dagrun", run).get("status") or {}).get("taskInstances") or {}
    state: str | None = (tis.get(task) or {}).get("state")
    return state


def latest_only_dag(name: str, **spec: Any) -> dict[str, Any]:
    body = dag(name, startDate=START, **spec)
    body["spec"]["tasks"] = [
        {"id": "latest", "operator": "LatestOnlyOperator"},
        {
            "id": "after",
            "operator": "BashOperator",
            "args": {"bash_command": "true"},
            "dependsOn": ["latest"],
        },
        {"id": "beside", "operator": "BashOperator", "args": {"bash_command": "true"}},
    ]
    return body


def dagrun(name: str, dag_name: str, run_type: RunType, **spec: Any) -> dict[str, Any]:
    meta = {"name": name, "labels": dagrun_labels(dag_name, run_type)}
    spec = {"dagName": dag_name, "runType": run_type.value, "logicalDate": "2026-01-01T00:00:00+00:00"} | spec
    return {"apiVersion": API, "kind": "DagRun", "metadata": meta, "spec": spec}


def backfill(name: str, dag_name: str) -> dict[str, Any]:
    spec = {"dagName": dag_name, "fromDate": "2026-01-01T00:00:00Z", "toDate": "2026-01-02T00:00:00Z"}
    return {"apiVersion": API, "kind": "Backfill", "metadata": {"name": name}, "spec": spec}


def test_every_call_of_a_custom_timetable_is_bounded_and_one_that_raises_is_named(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    extra = ["--workers", "2", "--timetable-timeout", "1"]
    interval = {"start": "2026-01-01T00:00:00+00:00", "end": "2026-01-02T00:00:00+00:00"}
    with controller(cluster, namespace, tmp_path, executor="local", extra=extra):
        for name, (class_path, _, _) in FAULTY.items():
            apply(cluster, namespace, latest_only_dag(name, timetable={"class": class_path, "params": {}}))
            apply(cluster, namespace, dagrun(f"{name}-manual", name, RunType.MANUAL))  # asks at start
            apply(cluster, namespace, dagrun(f"{name}-sched", name, RunType.SCHEDULED, dataInterval=interval))
            apply(cluster, namespace, backfill(f"bf-{name}", name))
        apply(cluster, namespace, latest_only_dag("normal", schedule="@daily", catchup=False))
        apply(cluster, namespace, backfill("bf-normal", "normal"))
        told: list[tuple[str, str, str]] = []  # (object, condition) -> checked below with its Event
        for name, (class_path, reason, words) in FAULTY.items():
            for resource, obj, kind in (
                ("dag", name, "Ready"),
                ("dagrun", f"{name}-manual", "Ready"),
                ("dagrun", f"{name}-sched", "Timetable"),
                ("backfill", f"bf-{name}", "Ready"),
            ):
                cond = wait_for(
                    lambda resource=resource, obj=obj, kind=kind, reason=reason: (
                        (c := condition(cluster, namespace, resource, obj, kind)).get("reason") == reason
                        and c
                    ),
                    f"{resource} {obj} to say {kind}={reason}",
                )
                assert cond["status"] == "False", cond
                assert class_path in cond["message"] and words in cond["message"], cond["message"]
                told.append((obj, reason, class_path))
            # the rest of the started run goes on: the task that needs no timetable succeeds
            wait_for(
                lambda name=name: ti_state(cluster, namespace, f"{name}-sched", "beside") == "success",
                f"{name}-sched's beside task to succeed beside the waiting LatestOnly",
            )
            sched = get(cluster, namespace, "dagrun", f"{name}-sched")["status"]["taskInstances"]
            assert sched["latest"]["state"] == "none", "LatestOnly is not decided from a guess"
            manual = get(cluster, namespace, "dagrun", f"{name}-manual")["status"]
            assert manual["state"] == "queued" and "dagSpec" not in manual, "not started from a guess"
        # the positive controls: the normal DAG's run and backfill are created and finish meanwhile
        first = wait_for(
            lambda: [r for r in runs_of(cluster, namespace, "normal") if r["spec"]["runType"] == "scheduled"],
            "the normal DAG's scheduled run",
        )[0]
        assert (
            wait_run_finished(cluster, namespace, first["metadata"]["name"])["status"]["state"] == "success"
        )
        filled = wait_for(
            lambda: (
                (get(cluster, namespace, "backfill", "bf-normal").get("status") or {}).get("state")
                == "completed"
            ),
            "the normal DAG's backfill to complete",
            90,
        )
        assert filled
        listed = zonda(cluster, "dags", "next-runs", "normal", "-n", namespace, "--count", "2")
        assert len(listed.stdout.strip().splitlines()) == 3, listed.stdout  # the header and two runs
        for name, (class_path, _, words) in FAULTY.items():
            refused = zonda(
                cluster, "dags", "next-runs", name, "-n", namespace, "--timetable-timeout", "1", check=False
            )
            said = words.replace("the controller's", "this command's")
            assert refused.returncode == 1 and class_path in refused.stderr and said in refused.stderr, (
                refused
            )
        events = get(cluster, namespace, "events")["items"]
    backfill_runs = {r["metadata"]["name"] for r in get(cluster, namespace, "dagruns")["items"]}
    assert not [r for r in backfill_runs if r.startswith(("bf-hangs", "bf-raises"))], backfill_runs
    assert [r for r in backfill_runs if r.startswith("bf-normal")], "the positive control's runs"
    for obj, reason, class_path in told:
        warned = [
            e
            for e in events
            if e["involvedObject"]["name"] == obj and (e["reason"], e["type"]) == (reason, "Warning")
        ]
        assert len(warned) == 1 and class_path in warned[0]["message"], (obj, warned)


#: A nested repetition: `re` backtracks for hours on 40 `a`s and a `!`, holding the interpreter lock.
PATTERNED = {"type": "object", "properties": {"code": {"type": "string", "pattern": "^(a+)+$"}}}
WORKDAY = "examples.timetables.workday.AfterWorkdayTimetable"


def test_a_backtracking_pattern_met_in_a_custom_timetables_thread_is_stopped(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    """A custom timetable's DAG starts its runs in a thread (for the timetable's limit), where no signal
    can stop `re`: the conf check is handed to the controller's main thread and stopped there after
    2 s. Before, the run was never judged and every DAG stopped (the thread held the lock for hours).
    The positive control: a conf that matches starts its run and it succeeds."""
    timetable = {"class": WORKDAY, "params": {}}
    apply(cluster, namespace, dag("workday", timetable=timetable, startDate=START, paused=True,
                                  params={"code": "aaa"}, paramsSchema=PATTERNED))  # fmt: skip
    with controller(cluster, namespace, tmp_path):
        apply(cluster, namespace, dagrun("evil", "workday", RunType.MANUAL, conf={"code": "a" * 40 + "!"}))
        apply(cluster, namespace, dagrun("fine", "workday", RunType.MANUAL, conf={"code": "aaaa"}))
        evil = wait_run_finished(cluster, namespace, "evil", timeout=60)
        fine = wait_run_finished(cluster, namespace, "fine", timeout=60)
    assert evil["status"]["state"] == "failed", evil["status"]
    assert "took more than 2 s and was stopped" in evil["status"]["message"], evil["status"]["message"]
    assert fine["status"]["state"] == "success", fine["status"]
