"""Deferral end to end: controller + triggerer processes on a real apiserver, real task code.

The local executor runs the task code for real (the runner raises TaskDeferred), so "the worker is
freed while waiting" is observable: no attempt of the task is running while it is deferred.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from controller.devtools.devcluster import Cluster
from tests.cluster.zonda_processes import (
    apply,
    controller,
    deferrable_example,
    get,
    release_task_pods,
    ti_states,
    trigger,
    triggerer,
    wait_for,
    wait_run_finished,
)


def attempts_of(state_dir: Path, task_id: str) -> list[dict[str, Any]]:
    found = []
    for record in state_dir.glob("*/*/attempt.json"):
        attempt = json.loads(record.read_text())
        if attempt["task_id"] == task_id:
            attempt["running"] = (record.parent / "pid").exists() and not (
                record.parent / "exit_code"
            ).exists()
            found.append(attempt)
    return found


def test_a_deferrable_sensor_frees_its_worker_and_resumes_when_the_trigger_fires(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    # Long enough that the task stays deferred while the test looks at it on a loaded machine.
    apply(cluster, namespace, deferrable_example("12s"))
    with controller(cluster, namespace, tmp_path, executor="local"), triggerer(cluster, namespace, tmp_path):
        run = trigger(cluster, namespace, "example-deferrable")
        deferred = wait_for(
            lambda: (
                (b := get(cluster, namespace, "dagrun", run))
                .get("status", {})
                .get("taskInstances", {})
                .get("wait", {})
                .get("state")
                == "deferred"
                and b
            ),
            "the sensor to defer",
        )
        ti = deferred["status"]["taskInstances"]["wait"]
        trigger_obj = get(cluster, namespace, "trigger", ti["triggerName"])
        assert trigger_obj["spec"]["classpath"].endswith("DateTimeTrigger")
        assert trigger_obj["metadata"]["ownerReferences"][0]["name"] == run
        assert not any(a["running"] for a in attempts_of(tmp_path / "state", "wait")), (
            "worker freed while deferred"
        )
        body = wait_run_finished(cluster, namespace, run, timeout=60)
        assert ti_states(body) == {"start": "success", "wait": "success", "done": "success"}
        wait_ti = body["status"]["taskInstances"]["wait"]
        assert wait_ti["tryNumber"] == 1, "resuming keeps the try number"
        assert wait_ti["deferralCount"] == 1
        assert len(attempts_of(tmp_path / "state", "wait")) == 2, "the first attempt and the resumed one"
        wait_for(lambda: not get(cluster, namespace, "triggers")["items"], "the fired Trigger to be deleted")
        fired_events = cluster.kubectl(
            "get", "events", "-n", namespace, "-o", "jsonpath={.items[*].reason}"
        ).stdout
        assert "TaskDeferred" in fired_events


def test_a_deferral_timeout_fails_the_task(cluster: Cluster, namespace: str, tmp_path: Path) -> None:
    apply(
        cluster,
        namespace,
        {
            "apiVersion": "zonda.dev/v1alpha1",
            "kind": "DAG",
            "metadata": {"name": "too-slow"},
            "spec": {
                "schedule": None,
                "tasks": [
                    {
                        "id": "wait",
                        "operator": "examples.operators.deferring.DeferWithTimeout",
                        "args": {"wait": "1h", "timeout": "2s"},
                    }
                ],
            },
        },
    )
    with controller(cluster, namespace, tmp_path, executor="local"), triggerer(cluster, namespace, tmp_path):
        run = trigger(cluster, namespace, "too-slow")
        body = wait_run_finished(cluster, namespace, run, timeout=60)
    ti = body["status"]["taskInstances"]["wait"]
    assert ti["state"] == "failed"
    assert "timeout" in (ti.get("reason") or "").lower()
    assert body["status"]["state"] == "failed"


def test_execution_timeout_counts_time_spent_deferred(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    apply(
        cluster,
        namespace,
        {
            "apiVersion": "zonda.dev/v1alpha1",
            "kind": "DAG",
            "metadata": {"name": "deferred-too-long"},
            "spec": {
                "schedule": None,
                "tasks": [
                    {
                        "id": "wait",
                        "operator": "TimeDeltaSensorAsync",
                        "args": {"delta": "1h"},
                        # Long enough for a loaded machine to start the try and defer before the
                        # timeout (a try that times out first never defers, deferralCount 0).
                        "executionTimeout": "10s",
                    }
                ],
            },
        },
    )
    with controller(cluster, namespace, tmp_path, executor="local"), triggerer(cluster, namespace, tmp_path):
        run = trigger(cluster, namespace, "deferred-too-long")
        body = wait_run_finished(cluster, namespace, run, timeout=60)
    ti = body["status"]["taskInstances"]["wait"]
    assert ti["state"] == "failed"
    assert ti["deferralCount"] == 1
    assert "timeout" in (ti.get("reason") or "").lower()


def test_a_sensor_in_reschedule_mode_frees_its_worker_between_pokes(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    apply(
        cluster,
        namespace,
        {
            "apiVersion": "zonda.dev/v1alpha1",
            "kind": "DAG",
            "metadata": {"name": "rescheduled"},
            "spec": {
                "schedule": None,
                "tasks": [
                    {
                        "id": "poke",
                        "operator": "TimeDeltaSensor",
                        # Long enough that the first poke comes before it is due even when a loaded
                        # machine takes seconds to start the controller and the first try.
                        "args": {"delta": "15s", "mode": "reschedule", "poke_interval": 1},
                    }
                ],
            },
        },
    )
    with controller(cluster, namespace, tmp_path, executor="local"):
        run = trigger(cluster, namespace, "rescheduled")
        body = wait_run_finished(cluster, namespace, run, timeout=90)
    ti = body["status"]["taskInstances"]["poke"]
    assert ti["state"] == "success"
    assert ti["tryNumber"] == 1, "a reschedule does not consume a try"
    pokes = attempts_of(tmp_path / "state", "poke")
    assert len(pokes) >= 2, "each poke is its own short-lived attempt"
    events = cluster.kubectl("get", "events", "-n", namespace, "-o", "jsonpath={.items[*].reason}").stdout
    assert "TaskUpForReschedule" in events


def test_one_controller_and_one_triggerer_serve_several_namespaces(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    other = f"{namespace}-b"
    cluster.kubectl("create", "namespace", other)
    try:
        for ns in (namespace, other):
            apply(cluster, ns, deferrable_example())
        watch = ["--namespace", namespace, "--namespace", other]
        with (
            controller(cluster, namespace, tmp_path, executor="local", extra=watch[2:]),
            triggerer(cluster, namespace, tmp_path, extra=[*watch[2:], "--lease-namespace", namespace]),
        ):
            runs = {ns: trigger(cluster, ns, "example-deferrable") for ns in (namespace, other)}
            for ns, run in runs.items():
                body = wait_run_finished(cluster, ns, run, timeout=60)
                assert body["status"]["state"] == "success", ns
                assert body["status"]["taskInstances"]["wait"]["deferralCount"] == 1
        leases = cluster.kubectl("get", "leases", "-n", namespace, "-o", "name").stdout
        assert "zonda-triggerer-shard-0" in leases, "the shard Leases live in the lease namespace"
        assert not cluster.kubectl("get", "leases", "-n", other, "-o", "name").stdout.strip()
    finally:
        release_task_pods(cluster, other)  # no controller left to release them
        cluster.kubectl("delete", "namespace", other, "--wait=false", check=False)
