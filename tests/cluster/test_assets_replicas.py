"""Exactly once across two live controller replicas electing a leader (`--peering`), on a real apiserver.

Both replicas watch everything; only the leader's queue runs. The leader is killed (deterministically:
`ZONDA_FAULT_EXIT_AT=asset-run-created` makes it SIGKILL itself) right after it created the first
consumer run of a burst of AssetEvents and before it wrote the DAG's cursor; more events arrive while
the standby waits out the Lease. The standby takes over and must neither consume an event the dead
leader's run consumed nor leave one unconsumed. Runs and Lease holders are read from the apiserver.
"""

from __future__ import annotations

import json
import signal
import socket
from pathlib import Path
from typing import Any

from controller.devtools.devcluster import Cluster
from tests.cluster.zonda_processes import (
    ZondaProcess,
    apply,
    controller,
    create_asset_events,
    get,
    runs_of,
    wait_for,
)

URI = "s3://assets-replicas/orders"
LEASE = "zonda-assets-replicas"


def consumer() -> dict[str, Any]:
    return {
        "apiVersion": "zonda.dev/v1alpha1",
        "kind": "DAG",
        "metadata": {"name": "replicated-consumer"},
        "spec": {
            "assetSchedule": {"uri": URI},
            "maxActiveRuns": 100,
            "tasks": [{"id": "t", "operator": "EmptyOperator"}],
        },
    }


def holder(cluster: Cluster, namespace: str) -> str | None:
    found = cluster.kubectl("get", "lease", LEASE, "-n", namespace, "-o", "json", check=False)
    return (
        (json.loads(found.stdout).get("spec") or {}).get("holderIdentity") if found.returncode == 0 else None
    )


def identity(process: ZondaProcess) -> str:
    assert process.process is not None
    return f"{socket.gethostname()}-{process.process.pid}"  # the controller's default identity


def consumed(cluster: Cluster, namespace: str) -> list[list[str]]:
    """Each consumer run's events, as the apiserver has them."""
    return [
        [e["name"] for e in r["spec"].get("triggeringAssetEvents") or []]
        for r in runs_of(cluster, namespace, "replicated-consumer")
    ]


def cursor_events(cluster: Cluster, namespace: str) -> list[str]:
    events: list[str] = (get(cluster, namespace, "dag", "replicated-consumer").get("status") or {}).get(
        "assetCursorEvents"
    ) or []
    return events


def test_two_replicas_with_the_leader_killed_after_its_first_run_make_one_run_per_set_of_events(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    apply(cluster, namespace, consumer())
    peering = ["--peering", LEASE, "--peering-lease-duration", "3"]
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    fault = {"ZONDA_FAULT_EXIT_AT": "asset-run-created"}
    with controller(cluster, namespace, tmp_path / "a", executor="local", extra=peering, env=fault) as first:
        wait_for(lambda: holder(cluster, namespace) == identity(first), "the first replica to lead")
        with controller(cluster, namespace, tmp_path / "b", executor="local", extra=peering) as second:
            wait_for(lambda: "zonda controller started" in second.log(), "the standby to start")
            assert holder(cluster, namespace) == identity(first), "the standby does not take the Lease"
            early = [f"early-{i:02d}" for i in range(15)]
            create_asset_events(cluster, namespace, URI, early)
            assert first.process is not None
            wait_for(lambda: first.process.poll() is not None, "the leader to exit after its first run")
            assert first.process.returncode == -signal.SIGKILL, "killed, not exited"
            [before_takeover] = consumed(cluster, namespace)
            assert before_takeover, "the dead leader's run consumed events"
            late = [f"late-{i:02d}" for i in range(15)]
            create_asset_events(cluster, namespace, URI, late)  # while the standby waits out the Lease
            wait_for(lambda: holder(cluster, namespace) == identity(second), "the standby to lead")
            everything = set(early) | set(late)
            wait_for(
                lambda: {n for names in consumed(cluster, namespace) for n in names} == everything,
                "every event consumed",
            )
            # the new leader's cursor passed the newest event: nothing is pending, no run is still to come
            wait_for(lambda: late[-1] in cursor_events(cluster, namespace), "the cursor past the last event")
            sets = consumed(cluster, namespace)
            assert before_takeover in sets, "the dead leader's run is kept, not replaced"
            assert sum(len(names) for names in sets) == len(everything), f"an event consumed twice: {sets}"
            assert all(sets), "no run without events"
