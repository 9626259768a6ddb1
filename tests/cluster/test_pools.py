"""Pools on a real apiserver, with the controller as in production and the local executor (task code
really runs: `sleep`).

Real: the Pool CRD, its status and printer columns, the controller process (killed and restarted
while the pool is full), the task instances' recorded start and end times. The proof of "never more
than 2 at once" is read from those times, not from the controller's own counting.
"""

from __future__ import annotations

import signal
from datetime import datetime
from pathlib import Path
from typing import Any

from controller.devtools.devcluster import Cluster
from tests.cluster.zonda_processes import apply, controller, get, most_at_once, wait_for, zonda

#: Three DAGs sharing the pool; each one's tasks weigh the same (absolute), the DAGs differ.
WEIGHTS = {"light": 1, "heavy": 10, "middle": 5}


def dag(name: str, weight: int) -> dict[str, Any]:
    return {
        "apiVersion": "zonda.dev/v1alpha1",
        "kind": "DAG",
        "metadata": {"name": name},
        "spec": {
            "schedule": None,
            "startDate": "2024-01-01T00:00:00Z",
            "defaultArgs": {"pool": "shared_pool", "priorityWeight": weight, "weightRule": "absolute"},
            "tasks": [
                {"id": f"work{i}", "operator": "BashOperator", "args": {"bash_command": "sleep 3"}}
                for i in (1, 2)
            ],
        },
    }


def pool(slots: int) -> dict[str, Any]:
    return {
        "apiVersion": "zonda.dev/v1alpha1",
        "kind": "Pool",
        "metadata": {"name": "shared-pool"},
        "spec": {"slots": slots, "description": "shared by three DAGs"},
    }


def task_instances(cluster: Cluster, namespace: str) -> dict[tuple[str, str], dict[str, Any]]:
    return {
        (run["spec"]["dagName"], task_id): ti
        for run in get(cluster, namespace, "dagruns")["items"]
        for task_id, ti in ((run.get("status") or {}).get("taskInstances") or {}).items()
    }


def test_a_two_slot_pool_shared_by_three_dags_runs_two_at_once_by_weight_across_a_restart(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    for name, weight in WEIGHTS.items():
        apply(cluster, namespace, dag(name, weight))
    apply(cluster, namespace, pool(0))  # closed: every task instance waits, then all compete at once
    with controller(cluster, namespace, tmp_path, executor="local") as process:
        for name in WEIGHTS:
            zonda(cluster, "trigger", name, "-n", namespace)

        def all_waiting() -> bool:
            tis = task_instances(cluster, namespace)
            return len(tis) == 6 and all(ti.get("state") == "scheduled" for ti in tis.values())

        wait_for(all_waiting, "six task instances waiting for the closed pool", timeout=120)
        reason = task_instances(cluster, namespace)[("light", "work1")]["reason"]
        assert reason == "Not scheduling since there are 0 open slots in pool shared-pool"
        wait_for(
            lambda: (
                (get(cluster, namespace, "pool", "shared-pool").get("status") or {}).get("scheduledSlots")
                == 6
            ),
            "the pool's status to count six waiting",
        )
        apply(cluster, namespace, pool(2))

        def middle_started() -> bool:
            return any(
                ti.get("state") in ("queued", "running", "success")
                for (dag_name, _), ti in task_instances(cluster, namespace).items()
                if dag_name == "middle"
            )

        wait_for(middle_started, "the middle DAG's tasks to start", timeout=120)
        process.stop(signal.SIGKILL)  # mid-way: the pool is full, the light DAG's tasks wait
        process.start()

        def all_done() -> bool:
            tis = task_instances(cluster, namespace)
            return len(tis) == 6 and all(ti.get("state") == "success" for ti in tis.values())

        wait_for(all_done, "every task instance to succeed", timeout=240)
        printed = cluster.kubectl("get", "pools", "-n", namespace).stdout
        wait_for(
            lambda: (get(cluster, namespace, "pool", "shared-pool").get("status") or {}).get("used") == "0/2",
            "the pool's status to show it empty",
        )
    tis = task_instances(cluster, namespace)
    assert most_at_once(tis.values()) <= 2, {k: (v["startDate"], v["endDate"]) for k, v in tis.items()}
    assert {ti["tryNumber"] for ti in tis.values()} == {1}, "nothing ran twice across the restart"
    queued = {key: datetime.fromisoformat(ti["queuedAt"]) for key, ti in tis.items()}
    by_dag = {name: [queued[(name, f"work{i}")] for i in (1, 2)] for name in WEIGHTS}
    assert max(by_dag["heavy"]) <= min(by_dag["middle"]), "the heaviest DAG's tasks were admitted first"
    assert max(by_dag["middle"]) <= min(by_dag["light"]), "then the middle one's, the lightest last"
    assert "shared-pool" in printed and "USED" in printed and "OPEN" in printed, printed
