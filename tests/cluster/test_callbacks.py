"""Task callbacks, DAG callbacks and an SLA miss, each exactly once across controller restarts.

Real: the apiserver, the controller process (killed with SIGKILL mid-run and again after the run
ended, and restarted), the local executor running the task runner and the callback tries as
processes, the callbacks themselves (`tests/cluster/callback_targets.py`), which leave one evidence
file per call; and the Kubernetes executor's callback pod (kwok runs it: no code, so no evidence).
"""

from __future__ import annotations

import json
import signal
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from controller.devtools.devcluster import Cluster, free_port
from tests.cluster.callback_targets import EVIDENCE_ENV
from tests.cluster.zonda_processes import (
    apply,
    controller,
    get,
    trigger,
    wait_first_passes,
    wait_for,
    wait_run_finished,
)
from zonda.resources.names import is_callback_name

TARGETS = "tests.cluster.callback_targets"


def bash(task_id: str, command: str, **fields: Any) -> dict[str, Any]:
    return {"id": task_id, "operator": "BashOperator", "args": {"bash_command": command}, **fields}


DAG = {
    "apiVersion": "zonda.dev/v1alpha1",
    "kind": "DAG",
    "metadata": {"name": "callbacks"},
    "spec": {
        "schedule": "@hourly",
        "startDate": "2024-01-01T00:00:00Z",
        "paused": True,  # only the run the test creates
        "onSuccessCallback": [f"{TARGETS}:on_dag_success"],
        "onFailureCallback": [f"{TARGETS}:on_dag_failure"],
        "slaMissCallback": [f"{TARGETS}:on_sla_miss"],
        "tasks": [
            bash("ok", "true", onExecuteCallback=[f"{TARGETS}:on_execute"],
                 onSuccessCallback=[f"{TARGETS}:on_success"]),
            bash("skip", "exit 99", onSkippedCallback=[f"{TARGETS}:on_skipped"]),
            bash("flaky", "exit 1", retries=1, retryDelay="1s", onRetryCallback=[f"{TARGETS}:on_retry"],
                 onFailureCallback=[f"{TARGETS}:on_failure"]),
            # killed by the controller at its execution timeout: the failure callback is a callback try
            bash("hung", "sleep 60", executionTimeout="4s", onFailureCallback=[f"{TARGETS}:on_failure"]),
            # its deadline (the data interval end, when the run is created, + 15s) comes after the
            # controller's restart and while it runs
            bash("slow", "sleep 30", sla="15s"),
        ],
    },
}  # fmt: skip


def evidence(folder: Path) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for path in sorted(folder.glob("*.json")) if folder.exists() else []:
        found.setdefault(path.name.rsplit("-", 1)[0], []).append(json.loads(path.read_text()))
    return found


def test_callbacks_and_an_sla_miss_each_run_exactly_once_across_controller_restarts(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    folder = tmp_path / "evidence"
    apply(cluster, namespace, DAG)
    end = datetime.now(UTC).replace(microsecond=0)
    start = end - timedelta(hours=1)
    run_name = "callbacks-scheduled-once"
    apply(cluster, namespace, {
        "apiVersion": "zonda.dev/v1alpha1",
        "kind": "DagRun",
        "metadata": {"name": run_name},
        "spec": {"dagName": "callbacks", "runType": "scheduled", "logicalDate": start.isoformat(),
                 "dataInterval": {"start": start.isoformat(), "end": end.isoformat()}},
    })  # fmt: skip
    metrics_port = free_port()
    with controller(
        cluster,
        namespace,
        tmp_path,
        executor="local",
        env={EVIDENCE_ENV: str(folder)},
        extra=["--metrics-port", str(metrics_port)],
    ) as process:
        wait_for(lambda: "retry" in evidence(folder), "flaky's retry callback", timeout=120)
        process.stop(signal.SIGKILL)  # mid-run: hung and slow are still running
        process.start()
        body = wait_run_finished(cluster, namespace, run_name, timeout=180)
        wait_for(
            lambda: (
                (records := get(cluster, namespace, "dagrun", run_name)["status"].get("callbacks"))
                and all(record["state"] != "launched" for record in records)
            ),
            "every callback try to end",
            timeout=120,
        )
        process.stop(signal.SIGKILL)  # after the end: a restart must not launch anything again
        attempts_before = sorted(path.name for path in (tmp_path / "state").glob("*/*"))
        process.start()
        # The restarted controller has ended a pass over the run (the namespace's only one): a try it
        # wrongly launched again would now be in the local executor's records (launched before the
        # status records it), and would be running or done.
        wait_first_passes(metrics_port, "run", timeout=60)
        attempts_after = sorted(path.name for path in (tmp_path / "state").glob("*/*"))
        assert attempts_after == attempts_before, "the restarted controller launched a try again"
        body = get(cluster, namespace, "dagrun", run_name)
        assert all(record["state"] != "launched" for record in body["status"]["callbacks"]), body["status"]
    status = body["status"]
    assert status["state"] == "failed"
    found = evidence(folder)
    assert {kind: len(calls) for kind, calls in found.items()} == {
        "execute": 1, "success": 1, "skipped": 1, "retry": 1, "failure": 2, "dag_failure": 1, "sla_miss": 1,
    }, found  # fmt: skip
    failures = {call["task_id"]: call for call in found["failure"]}
    assert set(failures) == {"flaky", "hung"}
    assert failures["flaky"]["try_number"] == 2 and "exit code 1" in failures["flaky"]["exception"]
    assert "execution_timeout" in failures["hung"]["exception"]  # run by a callback try
    assert found["retry"][0]["try_number"] == 1
    assert found["dag_failure"][0]["reason"] == "task_failure"
    sla = found["sla_miss"][0]
    assert (
        sla["slas"] == ["slow"] and sla["dag_id"] == "callbacks" and sla["task_list"].startswith("slow on ")
    )
    # The SLA miss was recorded once, at its deadline: while slow still ran (the controller woke for it).
    (miss,) = status["slaMisses"]
    assert miss["taskId"] == "slow"
    assert miss["detectedAt"] < status["taskInstances"]["slow"]["endDate"]
    records = {record["kind"]: record for record in status["callbacks"]}
    assert sorted(records) == ["dag_failure", "on_failure_callback", "sla_miss"], records
    assert records["on_failure_callback"]["taskId"] == "hung"
    assert {record["state"] for record in status["callbacks"]} == {"succeeded"}
    events = get(cluster, namespace, "events.v1.events.k8s.io")["items"]
    sla_events = [e for e in events if e.get("reason") == "SlaMissed" and e["regarding"]["name"] == run_name]
    assert len(sla_events) == 1 and sla_events[0].get("deprecatedCount", 1) == 1, sla_events


def test_a_timed_out_pods_failure_callback_is_one_pod_across_a_restart(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    """The Kubernetes executor (kwok runs the pods): the callback try is a pod of its own, never
    taken for a stray of the task, launched once and followed to its end across a restart."""
    kwok = {"kwok.zonda.dev/hold": "true"}  # runs until its timeout; its callback pod until let go
    apply(cluster, namespace, {
        "apiVersion": "zonda.dev/v1alpha1",
        "kind": "DAG",
        "metadata": {"name": "timeout-callback"},
        "spec": {"schedule": None, "tasks": [{
            "id": "hung", "container": {"image": "busybox", "command": ["sleep", "60"]},
            "podOverride": {"metadata": {"annotations": kwok}}, "executionTimeout": "2s",
            "onFailureCallback": [f"{TARGETS}:on_failure"],
        }]},
    })  # fmt: skip
    metrics_port = free_port()
    with controller(cluster, namespace, tmp_path, extra=["--metrics-port", str(metrics_port)]) as process:
        run = trigger(cluster, namespace, "timeout-callback")
        wait_run_finished(cluster, namespace, run, timeout=120)
        callback_pods = wait_for(
            lambda: [
                p
                for p in get(cluster, namespace, "pods")["items"]
                # not `"-cb" in name`: a task pod's 6-hex suffix starts with "cb" once in 256 runs
                if is_callback_name(p["metadata"]["name"]) and p["status"].get("phase") == "Running"
            ],
            "the callback pod to run",
            timeout=60,
        )
        process.stop(signal.SIGKILL)  # while the callback pod runs
        process.start()
        # Once the restarted controller has ended a pass over the run, a callback pod it took for a
        # stray would have been deleted in it (a deletionTimestamp at least, kwok removes it later).
        wait_first_passes(metrics_port, "run", timeout=60)
        kept = get(cluster, namespace, "pod", callback_pods[0]["metadata"]["name"])
        assert kept["status"]["phase"] == "Running" and not kept["metadata"].get("deletionTimestamp"), kept
        cluster.kubectl(
            "annotate", "pod", "-n", namespace, callback_pods[0]["metadata"]["name"], "kwok.zonda.dev/hold-"
        )
        records = wait_for(
            lambda: (
                (r := get(cluster, namespace, "dagrun", run)["status"].get("callbacks"))
                and r[0]["state"] != "launched"
                and r
            ),
            "the callback try to end",
            timeout=120,
        )
        # The timed-out pod was stopped and deleted (kwok removes a deleted pod a moment later).
        wait_for(
            lambda: (
                [p["metadata"]["name"] for p in get(cluster, namespace, "pods")["items"]]
                == [callback_pods[0]["metadata"]["name"]]
            ),
            "only the callback pod to be left",
            timeout=30,
        )
    (record,) = records
    assert (record["kind"], record["taskId"], record["tryNumber"], record["state"]) == (
        "on_failure_callback",
        "hung",
        1,
        "succeeded",
    )
    assert record["name"] == callback_pods[0]["metadata"]["name"]
    invocation = next(
        env["value"]
        for env in callback_pods[0]["spec"]["containers"][0]["env"]
        if env["name"] == "ZONDA_TASK_INVOCATION"
    )
    assert '"kind":"on_failure_callback"' in invocation.replace(" ", "")
