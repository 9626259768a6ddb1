"""`zonda controller --shards 2` with two live replicas, one SIGKILLed mid-way, on a real apiserver.

DAGs with catchup (so runs are due at once and keep coming as maxActiveRuns frees room) spread over
both shards, all their tasks in one small Pool, kwok's nodes running the pods. The replica holding
shard 0 is SIGKILLed once some runs have finished and others are under way; the survivor must take
its shard after the lease duration. The audit counts from the apiserver and etcd, never from Zonda:
each due logical date of each DAG is one DagRun; each try had at most one pod created (an etcd watch
started before the controllers, `fault_audit.EtcdKeys`); every task instance succeeded at try 1
(no try was given up and launched again); the Pool never ran more task instances at once than its
slots (the slot ledger across replicas), as the task instances' recorded admission and end times say.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import time
from collections import Counter
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from controller.coordination.shards import dag_shard
from controller.devtools.devcluster import ADMIN_TOKEN, Cluster
from tests.cluster.fault_audit import EtcdKeys as PodCreations
from tests.cluster.fault_proxy import FaultProxy
from tests.cluster.test_faults import HARMLESS, pod_task, proxy_for, unfenced
from tests.cluster.zonda_processes import ZondaProcess, apply, controller, most_at_once, wait_for
from zonda.resources.names import attempt_name

SHARDS = 2
INTERVAL = 10  # minutes: six runs due over the last hour for each DAG
DAGS_PER_SHARD = 2
POOL, SLOTS = "shards-pool", 3
LEASE_SECONDS = "3"


def dag_names(namespace: str) -> list[str]:
    """DAG names that put DAGS_PER_SHARD DAGs in each shard (the hash depends on the namespace)."""
    per_shard: dict[int, list[str]] = {shard: [] for shard in range(SHARDS)}
    index = 0
    while any(len(names) < DAGS_PER_SHARD for names in per_shard.values()):
        name = f"sharded-{index}"
        bucket = per_shard[dag_shard(namespace, name, SHARDS)]
        if len(bucket) < DAGS_PER_SHARD:
            bucket.append(name)
        index += 1
    return sorted(name for names in per_shard.values() for name in names)


def dag(name: str, start: datetime) -> dict[str, Any]:
    tasks = [pod_task("a", [], 2500), pod_task("b", ["a"], 2500)]
    return {
        "apiVersion": "zonda.dev/v1alpha1",
        "kind": "DAG",
        "metadata": {"name": name},
        "spec": {
            "schedule": f"{INTERVAL}m",
            "startDate": start.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "catchup": True,
            "maxActiveRuns": 2,
            "defaultArgs": {"pool": POOL.replace("-", "_")},  # Airflow's name: the Pool shards-pool
            "tasks": tasks,
        },
    }


def identity(process: ZondaProcess) -> str:
    assert process.process is not None
    return f"{socket.gethostname()}-{process.process.pid}"  # the controller's default identity


def holders(cluster: Cluster, namespace: str) -> dict[int, str | None]:
    found = cluster.kubectl("get", "lease", "-n", namespace, "-l", "zonda.dev/lease-kind=shard", "-o", "json")
    return {
        int(lease["metadata"]["labels"]["zonda.dev/shard"]): lease["spec"].get("holderIdentity")
        for lease in json.loads(found.stdout)["items"]
        if lease["metadata"]["labels"].get("zonda.dev/component") == "controller"
    }


def all_runs(cluster: Cluster, namespace: str) -> list[dict[str, Any]]:
    found = cluster.kubectl("get", "dagruns", "-n", namespace, "-o", "json")
    runs: list[dict[str, Any]] = json.loads(found.stdout)["items"]
    return runs


def finished(runs: list[dict[str, Any]]) -> int:
    return sum(1 for run in runs if (run.get("status") or {}).get("state") in ("success", "failed"))


def audit(
    runs: list[dict[str, Any]],
    pods: PodCreations,
    names: list[str],
    due: int,
    start: datetime,
    later: list[dict[str, Any]],
) -> int:
    """Each due run once, each try's pod once, all succeeded at try 1, the pool never over-admitted;
    returns the most slots held at once. `later`: the runs listed once the controllers stopped (a run
    may fall due at a 10-minute boundary after `runs` were read: its pods are not strays)."""
    assert pods.gap is None, pods.gap
    dates = Counter((run["spec"]["dagName"], run["spec"]["logicalDate"]) for run in runs)
    due_by_now = int((datetime.now(UTC) - start) / timedelta(minutes=INTERVAL))
    per_dag = Counter(name for name, _ in dates)
    assert all(due <= per_dag[name] <= due_by_now for name in names), per_dag
    assert max(dates.values()) == 1, f"a run created twice: {dates}"
    tis = {
        (run["metadata"]["name"], task): ti
        for run in runs
        for task, ti in run["status"]["taskInstances"].items()
    }
    assert {ti["state"] for ti in tis.values()} == {"success"}, tis
    assert {ti["tryNumber"] for ti in tis.values()} == {1}, "a try given up and launched again"
    duplicate_tries = {name: count for name, count in pods.created.items() if count > 1}
    assert not duplicate_tries, f"a try was launched twice: {duplicate_tries}"
    tried = {attempt_name(run, task, 1) for run, task in tis}
    read = {run["metadata"]["name"] for run in runs}
    newer = {
        attempt_name(run["metadata"]["name"], task, n)
        for run in later
        if run["metadata"]["name"] not in read
        for task in ("a", "b")
        for n in range(1, 5)
    }
    strays = set(pods.created) - tried - newer
    assert tried <= set(pods.created) and not strays, (sorted(tried - set(pods.created)), sorted(strays))
    # a slot is held from admission (queuedAt, the controller's clock) to the pod's end (kwok's whole
    # seconds, never later than the real end): a span can only be measured shorter than it was
    at_once = most_at_once({"startDate": ti["queuedAt"], "endDate": ti["endDate"]} for ti in tis.values())
    assert at_once <= SLOTS, f"{at_once} task instances held slots at once in a pool of {SLOTS}"
    assert at_once >= 2, "the positive control: the pool was shared at once, the measure sees overlaps"
    return at_once


def due_workload(cluster: Cluster, namespace: str) -> tuple[datetime, int, list[str]]:
    """The Pool and the DAGs applied: (their start date, runs due for each, the DAG names)."""
    now = datetime.now(UTC)
    start = (now - timedelta(hours=1)).replace(second=0, microsecond=0)
    start -= timedelta(minutes=start.minute % INTERVAL)
    due = int((now - start) / timedelta(minutes=INTERVAL))
    names = dag_names(namespace)
    pool = {"apiVersion": "zonda.dev/v1alpha1", "kind": "Pool", "metadata": {"name": POOL}}
    apply(cluster, namespace, {**pool, "spec": {"slots": SLOTS}})
    for name in names:
        apply(cluster, namespace, dag(name, start))
    return start, due, names


def each_holds_one(cluster: Cluster, namespace: str, replicas: Iterable[str]) -> dict[int, str | None]:
    expected = set(replicas)
    found: dict[int, str | None] = wait_for(
        lambda: (
            (held := holders(cluster, namespace))
            and len(held) == SHARDS
            and set(held.values()) == expected
            and held
        ),
        "each replica to hold one shard",
        timeout=90,
    )
    return found


def all_finished(cluster: Cluster, namespace: str, names: list[str], due: int) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = wait_for(
        lambda: (
            (found := all_runs(cluster, namespace))
            and all(sum(1 for r in found if r["spec"]["dagName"] == n) >= due for n in names)
            and finished(found) == len(found)
            and found
        ),
        f"{due * len(names)} runs to finish",
        timeout=300,
    )
    return runs


def test_two_sharded_replicas_one_killed_create_each_run_once_launch_each_try_once_and_finish(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    start, due, names = due_workload(cluster, namespace)
    sharded = ["--shards", str(SHARDS), "--peering-lease-duration", LEASE_SECONDS]
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with contextlib.ExitStack() as stack:
        pods = stack.enter_context(PodCreations(cluster, namespace))
        a = stack.enter_context(controller(cluster, namespace, tmp_path / "a", extra=sharded))
        b = stack.enter_context(controller(cluster, namespace, tmp_path / "b", extra=sharded))
        replicas = {identity(a): a, identity(b): b}
        shared = each_holds_one(cluster, namespace, replicas)
        total = due * len(names)
        wait_for(
            lambda: 0 < finished(all_runs(cluster, namespace)) < total // 2,
            "some runs finished, most still to come",
            timeout=180,
        )
        victim_id = shared[0]
        assert victim_id is not None
        survivor_id = next(replica for replica in replicas if replica != victim_id)
        replicas[victim_id].stop(signal.SIGKILL)
        finished_at_kill = finished(all_runs(cluster, namespace))
        wait_for(
            lambda: set(holders(cluster, namespace).values()) == {survivor_id},
            "the survivor to take the dead replica's shard",
            timeout=60,
        )
        assert "controller shards acquired" in replicas[survivor_id].log()
        runs = all_finished(cluster, namespace, names, due)
    at_once = audit(runs, pods, names, due, start, all_runs(cluster, namespace))
    assert 0 < finished_at_kill < len(runs), "the kill came mid-way"
    print(
        f"\n{len(runs)} runs ({len(names)} DAGs over {SHARDS} shards), "
        f"{finished_at_kill} runs finished when the holder of shard 0 was killed; "
        f"pods created {pods.created.total()}, most at once in the pool {at_once}/{SLOTS}"
    )


def test_a_sharded_replica_stopped_past_its_lease_writes_nothing_unfenced_after_it_wakes(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    """Each replica behind a recording fault proxy (`test_faults`); the holder of shard 0 SIGSTOPped
    until the other holds both shards and has moved the workload on, then SIGCONTed. From its waking
    until it holds a shard again, every write of the stale replica that succeeded must be fenced (a
    create of a deterministic name, a replace carrying the resourceVersion it decided on); then the
    same audit as above."""
    start, due, names = due_workload(cluster, namespace)
    sharded = ["--shards", str(SHARDS), "--peering-lease-duration", LEASE_SECONDS]
    with contextlib.ExitStack() as stack:
        pods = stack.enter_context(PodCreations(cluster, namespace))
        replicas: dict[str, tuple[ZondaProcess, FaultProxy]] = {}
        for name in ("a", "b"):
            (tmp_path / name).mkdir()
            proxy = stack.enter_context(proxy_for(cluster))
            kubeconfig = str(proxy.kubeconfig(tmp_path / f"proxied-{name}", ADMIN_TOKEN))
            process = stack.enter_context(
                controller(cluster, namespace, tmp_path / name, extra=["--kubeconfig", kubeconfig, *sharded])
            )
            replicas[identity(process)] = (process, proxy)
        shared = each_holds_one(cluster, namespace, replicas)
        stale_id = shared[0]
        assert stale_id is not None
        other_id = next(replica for replica in replicas if replica != stale_id)
        (stale, stale_proxy), (other, _) = replicas[stale_id], replicas[other_id]
        # positive control: the stale-to-be replica's proxy sees its preconditioned status writes
        wait_for(
            lambda: any(
                w.path.endswith("/status") and w.precondition and w.status == 200
                for w in stale_proxy.writes()
            ),
            "a status write of the replica to stop, seen by its proxy",
            timeout=120,
        )
        lost_before = stale.log().count("lost: ")
        assert stale.process is not None
        os.killpg(stale.process.pid, signal.SIGSTOP)
        try:
            wait_for(
                lambda: set(holders(cluster, namespace).values()) == {other_id},
                "the other replica to take the stopped one's shard",
                timeout=60,
            )
            before = finished(all_runs(cluster, namespace))
            wait_for(
                lambda: finished(all_runs(cluster, namespace)) > before or before == due * len(names),
                "the other replica to move the workload on",
                timeout=120,
            )
        finally:
            woke = time.monotonic()
            os.killpg(stale.process.pid, signal.SIGCONT)
        wait_for(
            lambda: stale.log().count("lost: ") > lost_before, "the woken replica to see it lost its shard"
        )
        wait_for(
            lambda: stale_id in holders(cluster, namespace).values(),
            "the woken replica to hold a shard again",
            timeout=60,
        )
        rejoined = time.monotonic()
        runs = all_finished(cluster, namespace, names, due)
    stale_writes = [w for w in stale_proxy.writes(since=woke) if w.at < rejoined]
    bad = unfenced(stale_writes)
    kinds = Counter(
        (w.method, w.status, "precondition" if w.precondition else "-")
        for w in stale_writes
        if not any(part in w.path for part in HARMLESS)
    )
    print(f"\nthe woken replica's writes (method, status, precondition): {dict(kinds)}; unfenced: {bad}")
    assert not bad, f"a woken replica wrote without fencing: {bad}"
    at_once = audit(runs, pods, names, due, start, all_runs(cluster, namespace))
    print(f"{len(runs)} runs, most at once in the pool {at_once}/{SLOTS}; {other.log().count('lost: ')} lost")
