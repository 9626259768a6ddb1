"""The controller end to end on a real apiserver: Airflow's documented outcomes, both executors.

Kubernetes executor tests run container tasks on kwok nodes (exit codes from pod annotations);
local executor tests run real task code (branch callables, Bash) as subprocesses.
"""

from __future__ import annotations

import itertools
import signal
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from controller.devtools.devcluster import Cluster
from tests.cluster.zonda_processes import (
    CreationOrder,
    apply,
    controller,
    get,
    load_example,
    runs_of,
    ti_states,
    trigger,
    wait_for,
    wait_run_finished,
    zonda,
)


def container_task(
    task_id: str,
    *,
    exit_code: int = 0,
    depends_on: list[str] | None = None,
    duration_ms: int = 200,
    hold: bool = False,
    **extra: Any,
) -> dict[str, Any]:
    annotations = {"kwok.zonda.dev/exit-code": str(exit_code), "kwok.zonda.dev/duration-ms": str(duration_ms)}
    if hold:
        annotations["kwok.zonda.dev/hold"] = "true"
    return {
        "id": task_id,
        "container": {"image": "busybox", "command": ["sh", "-c", "true"]},
        "podOverride": {"metadata": {"annotations": annotations}},
        "dependsOn": depends_on or [],
        **extra,
    }


def dag(name: str, tasks: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "zonda.dev/v1alpha1",
        "kind": "DAG",
        "metadata": {"name": name},
        "spec": {"schedule": None, "tasks": tasks, **spec},
    }


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# ------------------------------------------------------------------------- kubernetes executor


def test_container_tasks_succeed_fail_with_retries_and_skip_on_kwok(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    apply(
        cluster,
        namespace,
        dag(
            "pods",
            [
                container_task("ok"),
                container_task("skipper", exit_code=99),
                container_task("flaky", exit_code=3, retries=2, retryDelay="1s"),
                container_task("after_flaky", depends_on=["flaky"]),
            ],
        ),
    )
    with controller(cluster, namespace, tmp_path):
        run = trigger(cluster, namespace, "pods")
        body = wait_run_finished(cluster, namespace, run)
        # A run's Events are posted in the background after the status write that finished it, and a
        # stopped controller does not post them: wait for them while it runs.
        wanted = {"TaskUpForRetry", "TaskFailed", "RunFailed"}
        wait_for(lambda: wanted <= set(reasons_about(cluster, namespace, run)), f"the Events {wanted}")
    tis = body["status"]["taskInstances"]
    assert ti_states(body) == {
        "ok": "success",
        "skipper": "skipped",
        "flaky": "failed",
        "after_flaky": "upstream_failed",
    }
    assert body["status"]["state"] == "failed"
    assert tis["flaky"]["tryNumber"] == 3, "retries=2 means three tries"
    pods = get(cluster, namespace, "pods")["items"]
    flaky_pods = sorted(
        p["metadata"]["labels"]["zonda.dev/try"]
        for p in pods
        if p["metadata"]["annotations"].get("zonda.dev/task-id") == "flaky"
    )
    assert flaky_pods == ["1", "2", "3"], "one pod per try, named deterministically"
    pod = next(p for p in pods if p["metadata"]["name"] == tis["ok"]["podName"])
    assert pod["metadata"]["labels"]["zonda.dev/dag"] == "pods"
    assert pod["metadata"]["ownerReferences"][0]["kind"] == "DagRun"
    assert pod["spec"]["restartPolicy"] == "Never"


def test_a_kwok_pod_runs_as_long_as_its_duration_annotation_says(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    """The fake nodes honour `kwok.zonda.dev/duration-ms` (the fault suite's pod faults need a pod that
    is still Running): kwok parses it as a Go duration, so a bare "3000" used to fall back to 300 ms."""
    apply(cluster, namespace, dag("durations", [container_task("long", duration_ms=3000)]))
    with controller(cluster, namespace, tmp_path):
        run = trigger(cluster, namespace, "durations")
        body = wait_run_finished(cluster, namespace, run)
    assert ti_states(body) == {"long": "success"}
    pod = get(cluster, namespace, "pod", body["status"]["taskInstances"]["long"]["podName"])
    started = datetime.fromisoformat(pod["status"]["startTime"])
    [container] = pod["status"]["containerStatuses"]
    finished = datetime.fromisoformat(container["state"]["terminated"]["finishedAt"])
    # RFC 3339 to the second: 3 s of running is at least 2 s apart; the 300 ms default is at most 1
    assert (finished - started).total_seconds() >= 2, (started, finished)


def reasons_about(cluster: Cluster, namespace: str, name: str) -> list[str]:
    """The reasons of the Events about object `name`."""
    return cluster.kubectl(
        "get",
        "events",
        "-n",
        namespace,
        "--field-selector",
        f"involvedObject.name={name}",
        "-o",
        "jsonpath={.items[*].reason}",
    ).stdout.split()


def test_restarting_the_controller_mid_run_loses_and_duplicates_nothing(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    apply(
        cluster,
        namespace,
        dag(
            "restart",
            [
                container_task("first", hold=True),  # runs until the test lets it finish
                container_task("second", depends_on=["first"], duration_ms=500),
            ],
        ),
    )
    with controller(cluster, namespace, tmp_path) as proc:
        run = trigger(cluster, namespace, "restart")

        def first_running() -> str | None:
            ti = (
                (get(cluster, namespace, "dagrun", run).get("status") or {})
                .get("taskInstances", {})
                .get("first")
            )
            return ti["podName"] if ti and ti["state"] == "running" else None

        pod = wait_for(first_running, "first task running")
        proc.stop(signal.SIGKILL)
        proc.start()
        # the task finishes while the new controller starts up
        cluster.kubectl("annotate", "pod", pod, "-n", namespace, "kwok.zonda.dev/hold-")
        body = wait_run_finished(cluster, namespace, run)
    assert body["status"]["state"] == "success"
    assert {t: ti["tryNumber"] for t, ti in body["status"]["taskInstances"].items()} == {
        "first": 1,
        "second": 1,
    }
    pods = [p["metadata"]["name"] for p in get(cluster, namespace, "pods")["items"]]
    assert len(pods) == 2, pods


def test_execution_timeout_kills_the_pod_and_fails_the_task(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    apply(cluster, namespace, dag("timeout", [container_task("stuck", hold=True, executionTimeout="2s")]))
    with controller(cluster, namespace, tmp_path):
        run = trigger(cluster, namespace, "timeout")
        body = wait_run_finished(cluster, namespace, run, timeout=60)
        ti = body["status"]["taskInstances"]["stuck"]
        assert ti["state"] == "failed"
        assert (
            "timeout" in (ti.get("reason") or "").lower() or "timed out" in (ti.get("reason") or "").lower()
        )
        wait_for(
            lambda: not get(cluster, namespace, "pods")["items"], "the stuck pod to be deleted", timeout=30
        )


def test_a_vanished_pod_is_a_zombie_retried_with_a_reason(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    apply(
        cluster, namespace, dag("zombie", [container_task("victim", hold=True, retries=1, retryDelay="1s")])
    )
    with controller(cluster, namespace, tmp_path):
        run = trigger(cluster, namespace, "zombie")
        pod = wait_for(
            lambda: (
                (get(cluster, namespace, "dagrun", run).get("status") or {})
                .get("taskInstances", {})
                .get("victim", {})
                .get("podName")
            ),
            "the pod",
        )
        wait_for(
            lambda: get(cluster, namespace, "pod", pod)["status"].get("phase") == "Running", "pod running"
        )
        cluster.kubectl("delete", "pod", pod, "-n", namespace, "--wait=false")
        second = wait_for(
            lambda: (
                (
                    get(cluster, namespace, "dagrun", run)["status"]["taskInstances"]["victim"].get(
                        "tryNumber"
                    )
                    == 2
                )
                or None
            ),
            "a second try",
            timeout=30,
        )
        assert second
        body = get(cluster, namespace, "dagrun", run)
        ti = body["status"]["taskInstances"]["victim"]
        assert ti["state"] in ("queued", "running")
        cluster.kubectl("delete", "pod", ti["podName"], "-n", namespace, "--wait=false")
        body = wait_run_finished(cluster, namespace, run)
    ti = body["status"]["taskInstances"]["victim"]
    assert ti["state"] == "failed"
    assert "no longer exists" in (ti.get("reason") or "") or "being deleted" in (ti.get("reason") or "")


# ------------------------------------------------------------------------------ local executor


#: The seed examples and Airflow's outcome for each (also run as real pods: test_real_pods.py).
SEED_EXAMPLES = [
    pytest.param(
        "branch_without_trigger",
        {
            "branch": "success",
            "branch_a": "success",
            "follow_branch_a": "success",
            "branch_false": "skipped",
            "join": "skipped",
        },
        "success",
        id="branch_without_trigger: join is skipped under all_success",
    ),
    pytest.param(
        "branch_with_trigger",
        {
            "branch": "success",
            "branch_a": "success",
            "follow_branch_a": "success",
            "branch_false": "skipped",
            "join": "success",
        },
        "success",
        id="with none_failed_min_one_success the join runs",
    ),
    pytest.param(
        "example_branch_labels",
        {
            t: "success"
            for t in (
                "ingest",
                "analyze",
                "check_integrity",
                "describe_integrity",
                "email_error",
                "save",
                "report",
            )
        },
        "success",
        id="example_branch_labels: every task succeeds",
    ),
    pytest.param(
        "example_default_args",
        {"flaky": "failed", "after": "upstream_failed"},
        "failed",
        id="default_args retries reach the task; after retries it fails",
    ),
]


@pytest.mark.parametrize(("example", "expected", "run_state"), SEED_EXAMPLES)
def test_seed_examples_reproduce_airflows_outcomes(
    cluster: Cluster, namespace: str, tmp_path: Path, example: str, expected: dict[str, str], run_state: str
) -> None:
    body = load_example(example)
    if body["spec"].get("schedule") not in (None,):
        body["spec"].update(schedule=None, startDate=None, catchup=False)
    apply(cluster, namespace, body)
    with controller(cluster, namespace, tmp_path, executor="local"):
        run = trigger(cluster, namespace, body["metadata"]["name"])
        result = wait_run_finished(cluster, namespace, run)
    assert ti_states(result) == expected
    assert result["status"]["state"] == run_state
    if example == "example_default_args":
        assert result["status"]["taskInstances"]["flaky"]["tryNumber"] == 3
        log = zonda(
            cluster, "logs", run, "flaky", "-n", namespace, "--state-dir", str(tmp_path / "state")
        ).stdout
        assert "try 3" in log


def test_latest_only_skips_all_but_the_latest_interval(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    now = datetime.now(UTC)
    start = (now - timedelta(hours=12)).replace(minute=0, second=0, microsecond=0)
    body = load_example("latest_only_with_trigger", startDate=iso(start), maxActiveRuns=16)
    apply(cluster, namespace, body)
    with controller(cluster, namespace, tmp_path, executor="local"):
        runs = wait_for(
            lambda: (
                (r := runs_of(cluster, namespace, "latest-only-with-trigger"))
                and len(r) >= 2
                and all((x.get("status") or {}).get("state") in ("success", "failed") for x in r)
                and r
            ),
            "the catch-up runs to finish",
            timeout=90,
        )
    latest, earlier = runs[-1], runs[:-1]
    for run in earlier:
        assert ti_states(run) == {
            "latest_only": "success",
            "task1": "skipped",
            "task2": "success",
            "task3": "skipped",
            "task4": "success",
        }
    assert ti_states(latest) == {t: "success" for t in ("latest_only", "task1", "task2", "task3", "task4")}


# -------------------------------------------------------------------------------- scheduling


def test_catchup_creates_the_backlog_in_order_within_max_active_runs(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    now = datetime.now(UTC)
    start = (now - timedelta(hours=1)).replace(minute=0, second=0, microsecond=0)
    apply(
        cluster,
        namespace,
        dag(
            "backlog",
            [container_task("t", duration_ms=300)],
            schedule="15m",
            startDate=iso(start),
            catchup=True,
            maxActiveRuns=2,
        ),
    )
    expected = int((now - start) / timedelta(minutes=15))  # one more may fall due while the test runs
    with CreationOrder(cluster, namespace) as order, controller(cluster, namespace, tmp_path):
        runs = wait_for(
            lambda: (
                (r := runs_of(cluster, namespace, "backlog"))
                and len(r) >= expected
                and all((x.get("status") or {}).get("state") == "success" for x in r)
                and r
            ),
            f"{expected} backlog runs to succeed",
            timeout=90,
        )
        # The DAG's status learns of its runs in a later pass of its own: wait for it before stopping.
        dag_status = wait_for(
            lambda: (
                (status := get(cluster, namespace, "dag", "backlog").get("status") or {})
                and status.get("lastRunState") == "success"
                and status
            ),
            "the DAG's status to record the last run",
        )
    assert len(runs) in (expected, expected + 1)
    intervals = [(r["spec"]["dataInterval"]["start"], r["spec"]["dataInterval"]["end"]) for r in runs]
    assert intervals[0][0] == iso(start).replace("Z", "+00:00") or intervals[0][0].startswith(iso(start)[:16])
    for (_, end), (next_start, _) in itertools.pairwise(intervals):
        assert end == next_start, "contiguous intervals, none skipped"
    # Creation order from a watch of our own (etcd revisions: no ties), not 1-second creationTimestamps;
    # the watch may also have seen the run that fell due after `runs` was read.
    names = order.names()
    assert names[: len(runs)] == [r["metadata"]["name"] for r in runs] and len(names) <= len(runs) + 1
    assert names == sorted(names), "runs are created in logical-date order (their names hold the date)"
    # At each creation (its revision), the runs created earlier and not yet recorded finished are the
    # active ones: fewer than maxActiveRuns. (Not "after run k-2 finished": two runs end together and
    # the second may be recorded first, leaving one active.)
    for k, (name, revision) in enumerate(order.created):
        active = [older for older, _ in order.created[:k] if order.finished.get(older, revision) >= revision]
        assert len(active) < 2, f"{name} created at revision {revision} while {active} were active"
    assert dag_status["nextRunAfter"] > iso(now)


def test_a_short_schedule_creates_runs_on_time_and_paused_dags_create_none(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    now = datetime.now(UTC)
    apply(
        cluster,
        namespace,
        dag(
            "ticker",
            [{"id": "e", "operator": "EmptyOperator"}],
            schedule="3s",
            startDate=iso(now),
            catchup=False,
        ),
    )
    with controller(cluster, namespace, tmp_path):
        runs = wait_for(
            lambda: (r := runs_of(cluster, namespace, "ticker")) and len(r) >= 2 and r,
            "two scheduled runs",
            timeout=30,
        )
        for run in runs[:2]:
            created = datetime.fromisoformat(run["metadata"]["creationTimestamp"].replace("Z", "+00:00"))
            due = datetime.fromisoformat(run["spec"]["dataInterval"]["end"].replace("Z", "+00:00"))
            assert created >= due.replace(microsecond=0), "never created before its interval ends"
        cluster.kubectl(
            "patch", "dag", "ticker", "-n", namespace, "--type=merge", "-p", '{"spec":{"paused":true}}'
        )
        wait_for(
            lambda: (
                get(cluster, namespace, "dag", "ticker").get("status", {}).get("conditions")
                and any(
                    c["reason"] == "Paused"
                    for c in get(cluster, namespace, "dag", "ticker")["status"]["conditions"]
                )
            ),
            "the Paused condition",
        )
        count = len(runs_of(cluster, namespace, "ticker"))
        manual = trigger(cluster, namespace, "ticker")
        assert wait_run_finished(cluster, namespace, manual)["status"]["state"] == "success"
        scheduled = [r for r in runs_of(cluster, namespace, "ticker") if r["spec"]["runType"] == "scheduled"]
        assert len(scheduled) <= count, "a paused DAG creates no scheduled runs"


# ------------------------------------------------------------------------------ status and CLI


def test_invalid_dag_gets_a_condition_and_an_event(cluster: Cluster, namespace: str, tmp_path: Path) -> None:
    apply(
        cluster,
        namespace,
        dag(
            "broken",
            [
                {"id": "a", "operator": "EmptyOperator", "dependsOn": ["b"]},
                {"id": "b", "operator": "EmptyOperator", "dependsOn": ["a"]},
            ],
        ),
    )
    with controller(cluster, namespace, tmp_path):
        status = wait_for(lambda: get(cluster, namespace, "dag", "broken").get("status"), "status")
        valid = next(c for c in status["conditions"] if c["type"] == "Valid")
        assert valid["status"] == "False"
        assert "cycle" in valid["message"]
        events = cluster.kubectl(
            "get", "events", "-n", namespace, "-o", "jsonpath={.items[*].message}"
        ).stdout
        assert "cycle" in events


def test_a_run_keeps_the_dag_spec_it_started_with(cluster: Cluster, namespace: str, tmp_path: Path) -> None:
    apply(cluster, namespace, dag("editme", [container_task("slow", duration_ms=2000)]))
    with controller(cluster, namespace, tmp_path):
        run = trigger(cluster, namespace, "editme")
        wait_for(
            lambda: (get(cluster, namespace, "dagrun", run).get("status") or {}).get("dagSpec"), "snapshot"
        )
        apply(
            cluster,
            namespace,
            dag("editme", [container_task("slow", duration_ms=2000), container_task("new_task")]),
        )
        body = wait_run_finished(cluster, namespace, run)
    assert set(body["status"]["taskInstances"]) == {"slow"}
    assert body["status"]["dagGeneration"] == 1


def test_clear_and_mark_from_the_cli(cluster: Cluster, namespace: str, tmp_path: Path) -> None:
    apply(
        cluster,
        namespace,
        dag("ops", [container_task("a"), container_task("b", depends_on=["a"], exit_code=1)]),
    )
    with controller(cluster, namespace, tmp_path):
        run = trigger(cluster, namespace, "ops")
        assert wait_run_finished(cluster, namespace, run)["status"]["state"] == "failed"
        zonda(cluster, "mark", run, "b", "success", "-n", namespace)
        body = wait_for(
            lambda: (b := get(cluster, namespace, "dagrun", run))["status"]["state"] == "success" and b,
            "the run to settle as success",
        )
        assert ti_states(body) == {"a": "success", "b": "success"}
        out = zonda(cluster, "clear", run, "--task", "a", "--downstream", "-n", namespace).stdout
        assert "a: success -> none" in out and "b: success -> none" in out
        body = wait_for(
            lambda: (
                (b := get(cluster, namespace, "dagrun", run))["status"]["taskInstances"]["a"]["tryNumber"]
                == 2
                and b["status"]["state"] in ("success", "failed")
                and b
            ),
            "the cleared tasks to run again",
        )
    assert body["status"]["taskInstances"]["b"]["tryNumber"] == 2
    assert body["status"]["taskInstances"]["b"]["state"] == "failed"


def test_an_undead_pod_is_deleted_when_its_task_is_marked_while_running(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    apply(cluster, namespace, dag("undead", [container_task("stuck", hold=True)]))
    with controller(cluster, namespace, tmp_path):
        run = trigger(cluster, namespace, "undead")
        pod = wait_for(
            lambda: (
                (get(cluster, namespace, "dagrun", run).get("status") or {})
                .get("taskInstances", {})
                .get("stuck", {})
                .get("podName")
            ),
            "the pod",
        )
        wait_for(
            lambda: get(cluster, namespace, "pod", pod)["status"].get("phase") == "Running", "pod running"
        )
        zonda(cluster, "mark", run, "stuck", "success", "-n", namespace)
        body = wait_run_finished(cluster, namespace, run)
        assert body["status"]["state"] == "success"
        wait_for(
            lambda: cluster.kubectl("get", "pod", pod, "-n", namespace, check=False).returncode != 0,
            "the undead pod to be deleted",
            timeout=30,
        )
