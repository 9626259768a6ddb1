"""Backfills on a real apiserver with the controller running as in production (kwok runs the pods).

Real: the Backfill CRD and its schema, the controller process (killed and restarted mid-backfill),
DagRuns and their recorded start and end times, the `zonda backfill` CLI. Not real: the task
containers (kwok marks them finished after a set time).
"""

from __future__ import annotations

import copy
import signal
from pathlib import Path
from typing import Any

from controller.devtools.devcluster import Cluster
from tests.cluster.zonda_processes import CreationOrder, apply, controller, get, most_at_once, wait_for, zonda

DAG = {
    "apiVersion": "zonda.dev/v1alpha1",
    "kind": "DAG",
    "metadata": {"name": "daily"},
    "spec": {
        "schedule": "@daily",
        "startDate": "2024-01-01T00:00:00Z",
        "paused": True,  # no scheduled runs: only the backfill's
        "tasks": [
            {
                "id": "work",
                "container": {"image": "busybox", "command": ["sh", "-c", "true"]},
                "podOverride": {"metadata": {"annotations": {"kwok.zonda.dev/duration-ms": "300"}}},
            }
        ],
    },
}


def backfill_runs(cluster: Cluster, namespace: str, backfill: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = get(cluster, namespace, "dagruns")["items"]
    return [r for r in items if (r["metadata"].get("labels") or {}).get("zonda.dev/backfill") == backfill]


def test_thirty_daily_intervals_with_three_at_once_survive_a_controller_kill(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    apply(cluster, namespace, DAG)
    created = zonda(cluster, "backfill", "daily", "--from", "2024-01-01", "--to", "2024-01-30",
                    "--max-active-runs", "3", "--no-follow", "-n", namespace)  # fmt: skip
    assert "backfill.zonda.dev/daily-20240101-20240130 created" in created.stdout
    name = "daily-20240101-20240130"
    with CreationOrder(cluster, namespace) as order, controller(cluster, namespace, tmp_path) as process:
        wait_for(lambda: len(backfill_runs(cluster, namespace, name)) >= 7, "7 backfill runs", timeout=120)
        process.stop(signal.SIGKILL)
        process.start()
        followed = zonda(cluster, "backfills", "follow", name, "-n", namespace)
    assert f"{name}: completed: 30 succeeded, 0 failed of 30" in followed.stdout, (
        followed.stdout + followed.stderr
    )
    runs = backfill_runs(cluster, namespace, name)
    logical_dates = sorted(r["spec"]["logicalDate"] for r in runs)
    assert len(runs) == 30 and len(set(logical_dates)) == 30, logical_dates
    assert logical_dates[0].startswith("2024-01-01") and logical_dates[-1].startswith("2024-01-30")
    assert {r["spec"]["runType"] for r in runs} == {"backfill"}
    assert {r["status"]["state"] for r in runs} == {"success"}
    assert most_at_once(r["status"] for r in runs) <= 3
    # in order: each run was created after the run for the day before (etcd revisions from a watch of
    # our own: creationTimestamp has 1-second resolution and its ties would pass any order)
    by_date = [r["metadata"]["name"] for r in sorted(runs, key=lambda r: r["spec"]["logicalDate"])]
    assert [created for created in order.names() if created in by_date] == by_date
    status = get(cluster, namespace, "backfill", name)["status"]
    assert (status["state"], status["progress"], status["total"]) == ("completed", "30/30", 30)
    printed = cluster.kubectl("get", "backfills", "-n", namespace).stdout
    assert "30/30" in printed and "completed" in printed


def test_a_dry_run_lists_the_dates_and_a_paused_backfill_creates_nothing(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    apply(cluster, namespace, DAG)
    slow = copy.deepcopy(DAG)
    slow["metadata"]["name"] = "slow"
    slow["spec"]["tasks"][0]["podOverride"]["metadata"]["annotations"]["kwok.zonda.dev/hold"] = "true"
    apply(cluster, namespace, slow)
    with controller(cluster, namespace, tmp_path):
        dry = zonda(cluster, "backfill", "daily", "--from", "2024-02-01", "--to", "2024-02-03", "--dry-run",
                    "-n", namespace)  # fmt: skip
        assert "dry run: 3 runs would be created" in dry.stdout, dry.stdout + dry.stderr
        assert "2024-02-03T00:00:00Z" in dry.stdout
        zonda(cluster, "backfill", "slow", "--from", "2024-03-01", "--to", "2024-03-05", "--name", "held",
              "--max-active-runs", "1", "--no-follow", "-n", namespace)  # fmt: skip
        wait_for(lambda: backfill_runs(cluster, namespace, "held"), "the first run of held")
        zonda(cluster, "backfills", "pause", "held", "-n", namespace)
        wait_for(
            lambda: (
                (get(cluster, namespace, "backfill", "held").get("status") or {}).get("state") == "paused"
            ),
            "held paused",
        )
        assert len(backfill_runs(cluster, namespace, "held")) == 1  # maxActiveRuns 1, the first is held
        for pod in get(cluster, namespace, "pods")["items"]:  # let the held task finish
            cluster.kubectl(
                "annotate", "pod", pod["metadata"]["name"], "-n", namespace, "kwok.zonda.dev/hold-"
            )
        wait_for(
            lambda: (
                [(r.get("status") or {}).get("state") for r in backfill_runs(cluster, namespace, "held")]
                == ["success"]
            ),
            "held's first run finished",
        )
        # the pass that saw the run finish is the one that would have created the next
        wait_for(
            lambda: (
                (get(cluster, namespace, "backfill", "held").get("status") or {}).get("progress") == "1/5"
            ),
            "held's status to count the finished run",
        )
        assert len(backfill_runs(cluster, namespace, "held")) == 1
    assert not backfill_runs(cluster, namespace, "daily-20240201-20240203")
