"""A task whose pod the real apiserver refuses fails its try; its retries apply and the run ends.

Airflow's KubernetesExecutor fails the task instance whose pod cannot be created (a 422, a 403 of
admission), and the KubernetesPodOperator's try fails the same way (`zonda.passes.launch_refusals`).
Before, Zonda's pass raised and was retried with backoff forever: the run never ended.

Two refusals, each by the real kube-apiserver: 422 Invalid (requests above limits: the pod's own
validation) and, where quota is about the moment, a 403 "exceeded quota", which waits (the try is
not failed) and launches once the quota allows. The pod creates are counted from the apiserver's
audit log (`Cluster.audit_log`: every create, admitted or refused, with its answer), never from
Zonda's counters: exactly one create a try. The user reads it where they look: the task instance's
state and message, the Events of `kubectl describe dagrun`, `zonda tasks states`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from controller.devtools.devcluster import Cluster
from tests.cluster.test_controller import container_task, dag
from tests.cluster.zonda_processes import apply, controller, get, trigger, wait_for, wait_run_finished, zonda

#: Requests above limits: the apiserver's validation refuses the pod (422 Invalid).
OVER_LIMITS = {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}


def pod_creates(cluster: Cluster, namespace: str) -> list[tuple[str, int]]:
    """(pod name, HTTP code) of every pod create in the namespace, from the apiserver's audit log."""
    assert cluster.audit_log is not None, (
        "needs the local control plane's audit log (ZONDA_TEST_CLUSTER unset)"
    )
    return [
        (event["objectRef"].get("name", ""), int((event.get("responseStatus") or {}).get("code", 0)))
        for event in cluster.pod_create_events(namespace)
    ]


def run_events(cluster: Cluster, namespace: str, run: str) -> list[dict[str, Any]]:
    listed = cluster.kubectl(
        "get", "events", "-n", namespace, "--field-selector", f"involvedObject.name={run}", "-o", "json"
    ).stdout
    return list(json.loads(listed)["items"])


def test_a_pod_the_apiserver_refuses_fails_its_tries_and_the_run_ends(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    apply(
        cluster,
        namespace,
        dag(
            "refused",
            [
                container_task(
                    "sized",
                    retries=2,
                    retryDelay="1s",
                    podOverride={"spec": {"containers": [{"name": "base", "resources": OVER_LIMITS}]}},
                ),
                container_task("after", depends_on=["sized"]),
                container_task("beside"),  # the positive control: the same run's other pod is created
            ],
        ),
    )
    with controller(cluster, namespace, tmp_path):
        name = trigger(cluster, namespace, "refused")
        run = wait_run_finished(cluster, namespace, name, timeout=120)
        events = wait_for(
            lambda: (
                [e for e in run_events(cluster, namespace, name) if e["reason"] == "TaskFailed"]
                and run_events(cluster, namespace, name)
            ),
            "the TaskFailed Event",
            timeout=30,
        )
    tis = run["status"]["taskInstances"]
    assert run["status"]["state"] == "failed"
    assert {t: ti["state"] for t, ti in tis.items()} == {
        "sized": "failed",
        "after": "upstream_failed",
        "beside": "success",
    }
    sized = tis["sized"]
    assert sized["tryNumber"] == 3, "retries=2: three tries, each refused"
    assert "the apiserver refused its pod (422)" in sized["message"], sized
    assert "must be less than or equal to cpu limit" in sized["message"], sized
    creates = pod_creates(cluster, namespace)
    refused = sorted(pod for pod, code in creates if code == 422)
    admitted = [pod for pod, code in creates if code == 201]
    assert len(refused) == 3 and len(set(refused)) == 3, f"one create a try, each refused: {creates}"
    assert all("-sized-" in pod for pod in refused), creates
    assert len(admitted) == 1 and "-beside-" in admitted[0], f"positive control: {creates}"
    assert len(creates) == 4, f"nothing else was asked for: {creates}"
    warnings = [(e["reason"], e["message"]) for e in events if e["type"] == "Warning"]
    retried = [m for reason, m in warnings if reason == "TaskUpForRetry"]
    failed = [m for reason, m in warnings if reason == "TaskFailed"]
    assert len(retried) == 2 and len(failed) == 1, warnings
    assert all("refused its pod (422)" in m for m in [*retried, *failed]), warnings
    described = cluster.kubectl("describe", "dagrun", name, "-n", namespace).stdout
    assert "refused its pod (422)" in described, described
    table = zonda(cluster, "tasks", "states", name, "-n", namespace).stdout
    row = next(line.split() for line in table.splitlines() if line.startswith("sized"))
    assert row[1:3] == ["failed", "3"], table
    print(f"\naudit: {creates}\nfailed try: {sized['message'][:300]}")


def test_a_pod_over_quota_waits_for_the_quota_and_is_not_failed(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    cluster.kubectl("create", "quota", "no-pods", "-n", namespace, "--hard=pods=0", check=True)
    wait_for(
        lambda: (get(cluster, namespace, "resourcequota", "no-pods").get("status") or {}).get("hard"),
        "the quota controller to fill the quota's status",
        timeout=30,
    )
    apply(cluster, namespace, dag("quota", [container_task("work")]))
    with controller(cluster, namespace, tmp_path):
        name = trigger(cluster, namespace, "quota")
        wait_for(
            lambda: [
                c
                for c in (get(cluster, namespace, "dagrun", name).get("status") or {}).get("conditions") or []
                if c["type"] == "Reconciled" and c["status"] == "False" and "exceeded quota" in c["message"]
            ],
            "the run to say its pod waits for the quota (Reconciled=False, retried with backoff)",
            timeout=60,
        )
        waiting = get(cluster, namespace, "dagrun", name)
        refused = [pod for pod, code in pod_creates(cluster, namespace) if code == 403]
        cluster.kubectl("delete", "quota", "no-pods", "-n", namespace)
        run = wait_run_finished(cluster, namespace, name, timeout=120)
    assert len(refused) >= 3, f"the reconcile asked again, with backoff: {refused}"
    work = (waiting["status"].get("taskInstances") or {}).get("work") or {}
    assert work.get("state") != "failed", work
    assert run["status"]["state"] == "success"
    assert run["status"]["taskInstances"]["work"]["tryNumber"] == 1, "the quota's refusals failed no try"
    admitted = [pod for pod, code in pod_creates(cluster, namespace) if code == 201]
    assert len(admitted) == 1 and admitted[0] == refused[0], "the same try's pod, created once admitted"
