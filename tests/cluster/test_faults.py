"""Fault injection: a seeded schedule of one fault type hits the mixed workload while it runs, and an
independent audit compares what happened with a fault-free reference run, from the apiserver's
objects and etcd's own records.

Fault types (one test each, small in CI): the controller SIGKILLed, or started during an apiserver
restart; kube-apiserver SIGKILLed and restarted (every watch and connection breaks); etcd SIGKILLed
and restarted (the apiserver answers errors until it is back); task pods deleted (grace 0) and evicted
(the Eviction API) while Running; a kwok Node deleted under a Running pod (its pods garbage-collected
by kube-controller-manager), then created again; one of two triggerer replicas SIGKILLed while a
Trigger waits, restarted once the other holds its shards, alone or with kube-apiserver or etcd
restarted at the same time; a fault proxy hurting requests; the controller's clock jumped; a run's
status writes refused as too large (413, by the fault proxy); and (its own test) the leader of two
replicas SIGSTOPped past its Lease, then SIGCONTed. `ZONDA_FAULT_INJECTIONS=N` runs N of each (on
demand), seed `ZONDA_FAULT_SEED` (22), `ZONDA_FAULT_MIXED_RUNS` (2) the mixed workload's scheduled
runs (half as many more backfilled), `ZONDA_FAULT_INTERVAL_MINUTES` (10) the minutes between them,
`ZONDA_FAULT_MIXED_TASK_MS` (1000) how long the faulted mixed workload's task pods run. The table
row each prints goes to docs/reliability.md.

The mixed workload (tests/cluster/fault_audit.py: retries, a branch, mapping, a Pool, a reschedule
sensor, a deferral, a DAG callback, asset-triggered runs, a Backfill) runs over a window of logical
dates fixed once per session, so the reference run (`mixed_reference`, once per session, in a
namespace of its own) and every faulted run have the same run, pod, Trigger and AssetEvent names,
and `fault_audit.compare` checks them name for name. It never reads Zonda's counters: each run,
pod, Trigger and AssetEvent key created at most once and each Trigger fired by one write (etcd's
watch, started before the controller); every task instance ended as the reference's, at the
reference's try plus one per try the fault itself failed (a Running pod deleted or evicted,
preconditioned on the resourceVersion it was read Running at; a pod on a deleted Node that had not
ended and did not end Succeeded), which the fault names; every asset event consumed by exactly one
consumer run.

Real: the apiserver, etcd, kube-controller-manager, kwok's nodes running the pods, the controller and
triggerer processes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import random
import signal
import socket
import statistics
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from controller.devtools.devcluster import ADMIN_TOKEN, Cluster, ClusterError
from controller.devtools.ports import free_port
from controller.processes.clock import OFFSET_FILE_ENV
from controller.triggerer.leases import shard_lease_name
from tests.cluster import fault_proxy
from tests.cluster.fault_audit import (
    TRIES,
    FailedTry,
    Outcome,
    Records,
    Window,
    all_progress,
    check_reference,
    compare,
    mixed_finished,
    mixed_workload,
)
from tests.cluster.fault_proxy import FaultProxy
from tests.cluster.zonda_processes import (
    ZondaProcess,
    apply,
    controller,
    fresh_namespace,
    get,
    triggerer,
    wait_for,
)
from zonda.resources.names import is_callback_name
from zonda.resources.wire import ANNOTATION_TASK_ID, LABEL_DAGRUN, LABEL_MAP_INDEX, LABEL_TASK, LABEL_TRY
from zonda.specs.mapping import ti_key

SEED = int(os.environ.get("ZONDA_FAULT_SEED", "22"))
#: Injections of each fault type; unset, each type's CI size.
INJECTIONS = os.environ.get("ZONDA_FAULT_INJECTIONS")
#: Minutes between the workload's runs over the last hour: 10 -> 6 runs; 2 -> 30 runs (on demand).
INTERVAL = int(os.environ.get("ZONDA_FAULT_INTERVAL_MINUTES", "10"))
#: The mixed workload's scheduled runs (and half as many backfilled, at least one), over a window of
#: the past fixed once per session: the reference run and every faulted one have the same run names.
MIXED_RUNS = int(os.environ.get("ZONDA_FAULT_MIXED_RUNS", "2"))
WINDOW = Window.before(datetime.now(UTC), INTERVAL, MIXED_RUNS)
#: How long kwok runs each task pod of the faulted mixed workload (ms; the reference's stay 1000): longer
#: makes the workload outlast more strikes (at most 66 scheduled runs) and gives pod strikes more to hit.
MIXED_TASK_MS = int(os.environ.get("ZONDA_FAULT_MIXED_TASK_MS", "1000"))
#: Seconds between a recovery and the next strike, drawn uniformly: "0.5-4" unless told (a cheap
#: fault can strike far more often on a large workload: `ZONDA_FAULT_SPACING=0.05-0.3`).
SPACING = tuple(float(bound) for bound in os.environ.get("ZONDA_FAULT_SPACING", "0.5-4").split("-", 1))
#: How long a workload of this size may take without faults (the reference), and how often to ask
#: whether it has finished (a read of every run: seconds apart on a large workload).
WORKLOAD_SECONDS = max(300.0, 20.0 * WINDOW.runs)
POLL_SECONDS = max(0.3, WINDOW.runs / 30)


def pod_task(task_id: str, depends_on: list[str], duration_ms: int) -> dict[str, Any]:
    return {
        "id": task_id,
        "container": {"image": "busybox", "command": ["sh", "-c", "true"]},
        "podOverride": {"metadata": {"annotations": {"kwok.zonda.dev/duration-ms": str(duration_ms)}}},
        "dependsOn": depends_on,
        # a try the fault fails (its pod deleted) is retried; no task fails of its own
        "retries": 3,
        "retryDelay": "1s",
    }


@dataclass
class Target:
    """What a fault acts on, and what it reports back to the audit."""

    cluster: Cluster
    namespace: str
    controller: ZondaProcess
    rng: random.Random
    #: The tries the fault itself failed (a Running pod deleted or evicted, or on a Node deleted).
    failed: list[FailedTry] = field(default_factory=list)
    #: Why a pod fault's looks found nothing to hit ("none running", or the hit's 404/409).
    missed: Counter[str] = field(default_factory=Counter)
    #: Between the controller and the apiserver, for the proxy's faults.
    proxy: FaultProxy | None = None
    #: The controller's clock offset file, its offset now and the furthest ahead it has been (s).
    clock_file: Path | None = None
    clock_offset: float = 0.0
    clock_ahead: float = 0.0
    #: The triggerer replicas, by identity.
    triggerers: dict[str, ZondaProcess] = field(default_factory=dict)
    #: Whether the workload has finished (a pod fault stops looking for a victim then).
    done: Callable[[], Any] = lambda: False
    #: The fault type striking now (a mixed schedule's draw): the name a failed try is recorded under.
    current: str = ""


@dataclass(frozen=True)
class Fault:
    id: str
    name: str
    ci_injections: int
    inject: Callable[[Target], bool]  # True when it struck (a pod fault may find nothing to hit)
    #: Task pods' duration on kwok: long enough for a pod fault to find one Running, and for the
    #: workload to outlast the schedule's first strike (0.5-4 s in: at 400 ms the six runs could all
    #: finish before it, and the schedule struck nothing, seen once in CI at load 10).
    duration_ms: int = 1000
    #: The controller talks to the apiserver through a FaultProxy.
    proxied: bool = False
    #: Triggerer replicas started (the workload's deferrable sensor needs one).
    triggerers: int = 1
    #: How long the workload may take to finish once the schedule ends.
    settle_seconds: float = 300
    #: The controller's clock can be stepped (`$ZONDA_CLOCK_OFFSET_FILE`).
    clock: bool = False
    #: Run only on demand (`ZONDA_FAULT_INJECTIONS` set; deselected otherwise): CI's time is the other
    #: types'.
    on_demand: bool = False


def kill_controller(target: Target) -> bool:
    target.controller.stop(signal.SIGKILL)
    target.controller.start()
    return True


def restart(component: str) -> Callable[[Target], bool]:
    def inject(target: Target) -> bool:
        target.cluster.restart(component, signal.SIGKILL)
        return True

    return inject


def restart_etcd(target: Target) -> bool:
    """etcd SIGKILLed and restarted, then kwok restarted as the kubelets' status resync it lacks.

    While etcd is away the apiserver answers kwok's pod status patches 500 ("rpc error: code =
    Unavailable ... EOF"), and kwok v0.8.0 drops a stage whose patch failed so (its `shouldRetry`,
    pkg/kwok/controllers/utils.go, retries only refused connections, 429, 503, 504 and timeouts): the
    pod stays Running (or Pending) until something else changes it, and its try until the pending
    timeout (300 s). A kubelet writes a pod's status again at its next sync; a restarted kwok lists its
    pods and plays their stages again, which is that sync."""
    target.cluster.restart("etcd", signal.SIGKILL)
    target.cluster.restart("kwok", signal.SIGTERM)
    return True


def kill_controller_then_restart_apiserver(target: Target) -> bool:
    """The controller SIGKILLed and started again while the apiserver restarts: its start (kopf
    resolving its resources, once) meets an apiserver not serving the CRDs yet."""
    target.controller.stop(signal.SIGKILL)
    target.controller.start()
    target.cluster.restart("kube-apiserver", signal.SIGKILL)
    return True


def hit_running_pod(evict: bool) -> Callable[[Target], bool]:
    """Delete (grace 0) or evict one Running task pod, preconditioned on the resourceVersion it was read
    at: when it succeeds, the pod was Running with no result, so its try must fail and be retried."""

    def inject(target: Target) -> bool:
        return asyncio.run(_hit_running_pod(target, evict))

    return inject


async def _hit_running_pod(target: Target, evict: bool) -> bool:
    from kubernetes_asyncio import client
    from kubernetes_asyncio.client.exceptions import ApiException

    from controller.kube import Kube

    async with await Kube.connect(str(target.cluster.kubeconfig)) as kube:
        for _ in range(600):  # until a Running pod is caught (they run `duration_ms` each; at CI load the
            # first pods can take half a minute to start, and a strike that finds none proves nothing)
            pods = (
                await kube.core.list_namespaced_pod(
                    target.namespace, label_selector=LABEL_TASK, field_selector="status.phase=Running"
                )
            ).items  # the Running ones only: a large workload's pods are thousands
            running = [
                p
                for p in pods
                if p.status.phase == "Running"
                and not p.metadata.deletion_timestamp
                and not is_callback_name(p.metadata.name)
                and int(p.metadata.labels.get(LABEL_TRY, 0)) < TRIES
            ]  # a task's try, not a callback's, and not its last (its retries are the workload's)
            if not running:
                target.missed["none running"] += 1
                if target.missed["none running"] % 20 == 0 and await asyncio.to_thread(target.done):
                    return False  # every run has ended: no pod will run again
                await asyncio.sleep(0.1)  # polling the pod list for a victim, not waiting for an effect
                continue
            pod = target.rng.choice(running)
            options = client.V1DeleteOptions(
                grace_period_seconds=0,
                preconditions=client.V1Preconditions(resource_version=pod.metadata.resource_version),
            )
            try:
                if evict:
                    await kube.core.create_namespaced_pod_eviction(
                        pod.metadata.name,
                        target.namespace,
                        client.V1Eviction(
                            metadata=client.V1ObjectMeta(name=pod.metadata.name), delete_options=options
                        ),
                    )
                else:
                    await kube.core.delete_namespaced_pod(pod.metadata.name, target.namespace, body=options)
            except ApiException as error:
                if error.status in (404, 409):  # it finished, went or changed between the read and the hit
                    target.missed[f"{error.status} {error.reason}"] += 1
                    continue  # read again (a 409 is often kwok's status patch: the pod is still Running)
                raise
            target.failed.append(failed_try(pod, target.current))
            return True
    return False


def failed_try(pod: Any, fault: str) -> FailedTry:
    """The try a task pod the fault failed was for."""
    labels = pod.metadata.labels
    key = ti_key(pod.metadata.annotations[ANNOTATION_TASK_ID], int(labels.get(LABEL_MAP_INDEX, -1)))
    return FailedTry(labels[LABEL_DAGRUN], key, int(labels[LABEL_TRY]), pod.metadata.name, fault)


#: A pod's phases once it has ended.
ENDED_PHASES = ("Succeeded", "Failed")


def remove_node(target: Target) -> bool:
    """Delete the kwok Node a Running task pod is bound to, follow that node's pods (a watch from a list
    made before the delete) until kube-controller-manager's pod GC has deleted them all (it deletes the
    pods of a Node gone for its 40 s quarantine, marking a running one Failed first), then create the
    Node again so that later pods can schedule on it. Every pod bound to it that ended other than
    Succeeded is a try the fault failed."""
    return asyncio.run(_remove_node(target))


async def _remove_node(target: Target) -> bool:
    from kubernetes_asyncio import watch

    from controller.devtools.control_plane_files import kwok_node_manifest
    from controller.kube import Kube

    async with await Kube.connect(str(target.cluster.kubeconfig)) as kube:
        for _ in range(300):  # until a Running pod is caught on a node (they run `duration_ms` each)
            pods = (await kube.core.list_namespaced_pod(target.namespace, label_selector=LABEL_TASK)).items
            nodes = sorted(
                {p.spec.node_name for p in pods if p.status.phase == "Running" and p.spec.node_name}
            )
            if nodes:
                break
            target.missed["none running"] += 1
            await asyncio.sleep(0.1)  # polling the pod list for a victim, not waiting for an effect
        else:
            return False
        node = target.rng.choice(nodes)
        on_node = f"spec.nodeName={node}"
        listing = await kube.core.list_namespaced_pod(
            target.namespace, label_selector=LABEL_TASK, field_selector=on_node
        )
        last: dict[str, Any] = {pod.metadata.name: pod for pod in listing.items}
        before = {name: pod.status.phase for name, pod in last.items()}
        alive = set(last)
        version = listing.metadata.resource_version
        # kwok is the kubelet of both nodes: it dies (a node's kubelet goes with the node), the Node is
        # deleted, and it starts again, playing the stages of the pods of the node that is left; a kwok
        # left running would still complete the pods it had started on the deleted node
        kwok = target.cluster.processes["kwok"]
        os.killpg(kwok.pid, signal.SIGKILL)
        kwok.wait()
        await kube.core.delete_node(node)
        await asyncio.to_thread(target.cluster.restart, "kwok", signal.SIGKILL)
        deadline = time.monotonic() + 150
        while alive and time.monotonic() < deadline:  # the pod GC's quarantine (40 s) and period (20 s)
            async for event in watch.Watch().stream(
                kube.core.list_namespaced_pod,
                target.namespace,
                label_selector=LABEL_TASK,
                field_selector=on_node,
                resource_version=version,
                timeout_seconds=5,
            ):
                pod = event["object"]
                version = pod.metadata.resource_version
                last[pod.metadata.name] = pod
                if event["type"] == "DELETED":
                    alive.discard(pod.metadata.name)
                else:
                    alive.add(pod.metadata.name)
        assert not alive, f"the pod GC left the pods of deleted Node {node}: {sorted(alive)}"
        await kube.core.create_node(kwok_node_manifest(node))  # type: ignore[arg-type]
    wait_for(lambda: node_ready(target.cluster, node), f"Node {node} Ready again")
    # a try the fault failed: its pod had not ended when the node went (not in the list made before,
    # or not ended in it) and did not end Succeeded; a callback try is not a task's (it is never retried)
    failed = [
        pod
        for name, pod in last.items()
        if pod.status.phase != "Succeeded"
        and not is_callback_name(name)
        and before.get(name) not in ENDED_PHASES
    ]
    target.missed[f"ended Succeeded on {node}"] += len(last) - len(failed)
    for pod in failed:
        target.failed.append(failed_try(pod, target.current))
    return True


def node_ready(cluster: Cluster, node: str) -> bool:
    found = cluster.kubectl("get", "node", node, "-o", "json", check=False)
    if found.returncode != 0:
        return False
    conditions = json.loads(found.stdout).get("status", {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def kill_triggerer(target: Target) -> bool:
    """SIGKILL the triggerer replica holding the shard of a Trigger that waits (pending or running, read
    from the apiserver), wait until the other replica holds its shards (it takes a Lease over once it
    has gone a lease duration, 4 s, unrenewed), then start it again (it may take shards back)."""
    return _kill_triggerer(target, lambda: None)


def kill_triggerer_in_restart(target: Target) -> bool:
    """As `kill_triggerer`, and kube-apiserver or etcd (the seeded choice) SIGKILLed and restarted right
    after it: the surviving replica takes the shards over while its watches break and its Lease
    writes fail (the late renewals the triggerer's held events are for), and the killed one starts
    again against the restarted control plane."""
    return _kill_triggerer(target, lambda: restart_control_plane(target))


def restart_control_plane(target: Target) -> None:
    if target.rng.random() < 0.5:
        target.missed["with kube-apiserver restarted"] += 1
        target.cluster.restart("kube-apiserver", signal.SIGKILL)
    else:
        target.missed["with etcd restarted"] += 1
        restart_etcd(target)


def _kill_triggerer(target: Target, also: Callable[[], None]) -> bool:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # until a deferred task instance's Trigger waits
        waiting = [
            trigger
            for trigger in quietly(lambda: get(target.cluster, target.namespace, "triggers")["items"], [])
            if (trigger.get("status") or {}).get("state") in (None, "pending", "running")
        ]
        leases = shard_holders(target.cluster, target.namespace)
        holders = {leases.get(trigger["spec"]["shard"]) for trigger in waiting} & set(target.triggerers)
        if holders:
            break
        target.missed["none waiting"] += 1
        if not waiting and target.done():
            return False  # every run has ended: no Trigger will wait again
        time.sleep(0.1)  # polling the Triggers for a victim, not waiting for an effect
    else:
        return False
    identity = target.rng.choice(sorted(holders))
    held = [
        shard
        for shard, holder in shard_holders(target.cluster, target.namespace).items()
        if holder == identity
    ]
    victim = target.triggerers[identity]
    victim.stop(signal.SIGKILL)
    also()
    # restarted at once under the same identity it would renew its own Leases: it starts again once
    # the other replica holds every shard it held (read from the Leases), so the shards fail over
    wait_for(
        lambda: all(
            shard_holders(target.cluster, target.namespace).get(shard) not in (None, identity)
            for shard in held
        ),
        f"the other triggerer to take over {identity}'s shards {held}",
        timeout=120,  # a lease duration, and the control plane's restart with it
    )
    victim.start()
    return True


def shard_holders(cluster: Cluster, namespace: str) -> dict[int, str | None]:
    """The triggerer's shard Leases: shard -> holder identity."""

    def read() -> dict[int, str | None]:
        prefix = shard_lease_name(0)[:-1]
        return {
            int(lease["metadata"]["name"][len(prefix) :]): (lease.get("spec") or {}).get("holderIdentity")
            for lease in get(cluster, namespace, "leases")["items"]
            if lease["metadata"]["name"].startswith(prefix)
        }

    found: dict[int, str | None] = quietly(read, {})
    return found


def proxy_faults(target: Target) -> bool:
    """The next 1-6 requests of the controller dropped, reset, stalled, answered 429/500/504, or (a
    write) done with its reply lost; a drop or reset breaks every open connection (watches) too."""
    assert target.proxy is not None
    target.proxy.clear()  # what the last strike's requests did not take
    fault = target.rng.choice([f for f in fault_proxy.FAULTS if f != "too-large"])  # its own type
    target.proxy.hurt(fault, target.rng.randint(1, 6))
    if fault in ("drop", "reset"):
        target.proxy.break_connections()
    return True


def refuse_status_writes(target: Target) -> bool:
    """The next 2-6 replaces of a DagRun's status answered 413, as the apiserver refuses a body past its
    limit (the fault proxy's `too-large`): the controller keeps the status last written, says so on the
    run (StatusWritten=False, an Event) and writes again on the run's next pass; what the refused
    passes launched first is adopted by name, not launched again."""
    assert target.proxy is not None
    target.proxy.clear()
    target.proxy.hurt("too-large", target.rng.randint(2, 6))
    return True


#: The controller's clock jumps: ahead less than the pod pending timeout (300 s: a longer jump ahead
#: would rightly fail every Pending pod's try), behind as far as an hour.
CLOCK_JUMPS = (-3600.0, -600.0, -60.0, 30.0, 120.0)


def jump_clock(target: Target) -> bool:
    """Step the controller's clock (its `$ZONDA_CLOCK_OFFSET_FILE`, `controller.processes.clock`) to a
    new offset from the real time: ahead or behind, from wherever the last jump left it."""
    assert target.clock_file is not None
    offset = target.rng.choice([jump for jump in CLOCK_JUMPS if jump != target.clock_offset])
    set_clock(target, offset)
    return True


def set_clock(target: Target, offset: float) -> None:
    assert target.clock_file is not None
    staged = target.clock_file.with_suffix(".new")
    staged.write_text(str(offset))
    staged.replace(target.clock_file)  # a new inode and mtime: the controller re-reads it
    target.clock_offset = offset
    target.clock_ahead = max(target.clock_ahead, offset)


FAULTS = [
    Fault("controller-kill", "controller SIGKILL", 4, kill_controller),
    Fault("apiserver-restart", "kube-apiserver SIGKILL + restart", 2, restart("kube-apiserver")),
    Fault(
        "start-in-restart",
        "controller started during an apiserver restart",
        1,
        kill_controller_then_restart_apiserver,
    ),
    Fault("etcd-restart", "etcd SIGKILL + restart", 1, restart_etcd),
    Fault(
        "pod-delete",
        "task pod deleted while Running",
        3,
        hit_running_pod(evict=False),
        duration_ms=2000,
    ),
    Fault(
        "pod-evict",
        "task pod evicted while Running",
        2,
        hit_running_pod(evict=True),
        duration_ms=2000,
    ),
    Fault(
        "node-remove",
        "a kwok Node deleted mid-run, then created again",
        1,
        remove_node,
        duration_ms=3000,
    ),
    Fault(
        "triggerer-kill",
        "a triggerer replica (of two) SIGKILLed while triggers wait, then restarted",
        2,
        kill_triggerer,
        triggerers=2,
    ),
    Fault(
        "triggerer-kill-restart",
        "a triggerer replica (of two) SIGKILLed while triggers wait, with kube-apiserver or etcd restarted",
        2,
        kill_triggerer_in_restart,
        triggerers=2,
    ),
    Fault(
        "proxy",
        "fault proxy: drop, reset, stall, 429/500/504, lost reply",
        6,
        proxy_faults,
        proxied=True,
    ),
    Fault("clock-jump", "the controller's clock jumped ahead or behind", 3, jump_clock, clock=True),
    Fault(
        "status-too-large",
        "a run's status write refused as too large (413)",
        4,
        refuse_status_writes,
        proxied=True,
    ),
]
BY_ID = {fault.id: fault for fault in FAULTS}

#: The `mixed` schedule: each strike one of these types, drawn by weight: the cheap ones (a strike
#: costs the schedule a fraction of a second) often, the slow ones (seconds to recover) rarely.
MIXED = {
    "proxy": 30.0,
    "status-too-large": 20.0,
    "clock-jump": 15.0,
    "pod-delete": 15.0,
    "pod-evict": 15.0,
    "controller-kill": 1.0,
    "apiserver-restart": 0.4,
    "etcd-restart": 0.4,
}


def strike_mixed(target: Target) -> bool:
    """One strike of a type drawn from `MIXED` (the seeded rng), named in `target.current`: every try
    a strike fails is recorded under its type, so the audit names the fault of each difference."""
    if target.clock_offset:  # a clock stepped behind would hold every timer (retry delays, pokes) for
        set_clock(target, 0.0)  # up to an hour: back to the real time before the next strike
    kind = target.rng.choices(list(MIXED), weights=list(MIXED.values()))[0]
    target.current = kind
    return BY_ID[kind].inject(target)


FAULTS.append(
    Fault(
        "mixed",
        "a mixed schedule: " + ", ".join(MIXED),
        0,
        strike_mixed,
        duration_ms=MIXED_TASK_MS,
        proxied=True,
        clock=True,
        settle_seconds=WORKLOAD_SECONDS,
        on_demand=True,
    )
)


@pytest.fixture(scope="module")
def mixed_reference(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Outcome:
    """The mixed workload run once without faults, in a namespace of its own: what every faulted run of
    it must end with, but for what the fault itself changed. Its positive controls say each part of the
    workload did what it is there for (a retry, a skipped branch, three mapped instances, a reschedule,
    a deferral, a callback try, an asset event per producer run consumed)."""
    tmp_path = tmp_path_factory.mktemp("reference")
    with fresh_namespace(cluster, "ref") as namespace:
        started = time.monotonic()
        for manifest in mixed_workload(WINDOW, 1000):
            apply(cluster, namespace, manifest)
        with contextlib.ExitStack() as stack:
            records = Records.watch(cluster, namespace)
            for keys in records.all():
                stack.enter_context(keys)
            stack.enter_context(triggerer(cluster, namespace, tmp_path, extra=[
                "--metrics-port", str(free_port()), "--health-port", str(free_port())]))  # fmt: skip
            stack.enter_context(controller(cluster, namespace, tmp_path))
            snapshot = wait_for(
                lambda: mixed_finished(cluster, namespace, WINDOW),
                "the reference run",
                WORKLOAD_SECONDS,
                interval=POLL_SECONDS,
            )
        reference = Outcome.of(snapshot, records)
    print(
        f"\nreference (no faults): {len(reference.run_states)} runs, {len(reference.tis)} producer task "
        f"instances, {reference.pods.total()} pods, {len(reference.triggers_created)} triggers, "
        f"{len(reference.asset_events)} asset events in {len(reference.consumed)} consumer runs; "
        f"{time.monotonic() - started:.0f} s"
    )
    check_reference(reference, WINDOW)
    return reference


ON_DEMAND = pytest.mark.on_demand("ZONDA_FAULT_INJECTIONS")


@pytest.mark.parametrize(
    "fault",
    [
        # on demand: deselected while ZONDA_FAULT_INJECTIONS is unset (tests/cluster/conftest.py)
        pytest.param(fault, marks=[ON_DEMAND] if fault.on_demand else [])
        for fault in FAULTS
    ],
    ids=[fault.id for fault in FAULTS],
)
def test_a_fault_schedule_creates_each_run_once_launches_each_try_once_and_finishes_everything(
    cluster: Cluster, namespace: str, tmp_path: Path, fault: Fault, mixed_reference: Outcome
) -> None:
    rng = random.Random(SEED)
    for manifest in mixed_workload(WINDOW, fault.duration_ms):
        apply(cluster, namespace, manifest)
    finished: list[Any] = [None, -math.inf]  # the last answer, and when it was asked (monotonic)

    def done() -> Any:
        # a read of every run: at most every POLL_SECONDS on a large workload (the schedule asks
        # before each strike, a pod fault while it looks for a victim)
        if finished[0] is None and time.monotonic() - finished[1] >= POLL_SECONDS:
            finished[:] = [mixed_finished(cluster, namespace, WINDOW), time.monotonic()]
        return finished[0]

    recoveries: list[float] = []
    by_type: dict[str, list[float]] = {}  # a mixed schedule's recoveries by the type that struck
    load = os.getloadavg()[0]
    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        records = Records.watch(cluster, namespace)
        for keys in records.all():
            stack.enter_context(keys)
        triggerers = {
            identity: stack.enter_context(
                triggerer(cluster, namespace, tmp_path, identity=identity, extra=[
                    "--metrics-port", str(free_port()),
                    "--health-port", str(free_port()),
                ])
            )
            for identity in ("triggerer-a", "triggerer-b")[: fault.triggerers]
        }  # fmt: skip
        proxy = stack.enter_context(proxy_for(cluster)) if fault.proxied else None
        extra = ["--kubeconfig", str(proxy.kubeconfig(tmp_path / "proxied", ADMIN_TOKEN))] if proxy else []
        clock_file = tmp_path / "clock-offset"
        env = {OFFSET_FILE_ENV: str(clock_file)} if fault.clock else {}
        process = stack.enter_context(controller(cluster, namespace, tmp_path, extra=extra, env=env))
        target = Target(
            cluster,
            namespace,
            process,
            rng,
            proxy=proxy,
            clock_file=clock_file if env else None,
            triggerers=triggerers,
            done=done,
        )

        def progress() -> int:
            if fault.inject is strike_mixed:  # etcd's records: no read of every run per strike
                return records.runs.puts + records.pods.created.total()
            return all_progress(cluster, namespace)

        for _ in range(int(INJECTIONS or fault.ci_injections)):
            time.sleep(rng.uniform(*SPACING))  # the fault schedule: when to strike, not a wait for an effect
            if done():
                break  # nothing left to hurt: a fault now would measure nothing
            before = progress()
            struck = time.monotonic()
            target.current = fault.id
            if not fault.inject(target):
                continue
            # recovered: the workload moved on (a task instance ended or a run was created; for a
            # mixed schedule, a DagRun written or a pod created, from etcd), or everything is done
            wait_for(
                lambda before=before, struck=struck: recovered(target, progress, before, struck, done),
                f"progress after the fault ({target.current})",
                # a mixed schedule's last run can take a strike's 6 status refusals in a row: the
                # controller passes it again after 5, 10, 20, 40 and 80 s (its designed backoff)
                timeout=330 if fault.inject is strike_mixed else 180,
                interval=0.05 if fault.inject is strike_mixed else 0.3,
            )
            recoveries.append(time.monotonic() - struck)
            by_type.setdefault(target.current, []).append(recoveries[-1])
            if len(recoveries) % 100 == 0:  # a long schedule's progress, for whoever watches it
                print(f"\n{len(recoveries)} strikes, {time.monotonic() - started:.0f} s, "
                      f"load {os.getloadavg()[0]:.1f}", flush=True)  # fmt: skip
        if target.clock_file is not None and target.clock_offset:
            set_clock(target, 0.0)  # back to the real time: the runs due by it are created and finish
        if proxy is not None:
            proxy.clear()
            print(f"\nrequests the proxy hurt: {dict(proxy.injected)} of {len(proxy.requests)}")
            if fault.inject is refuse_status_writes:  # the positive control: writes really were refused
                assert proxy.injected["too-large"], (
                    "no status write was refused: the audit would prove nothing"
                )
                told = [
                    e for e in get(cluster, namespace, "events")["items"] if e["reason"] == "StatusTooLarge"
                ]
                runs_told = {e["involvedObject"]["name"] for e in told}
                print(f"StatusTooLarge Events: {len(told)} on {len(runs_told)} runs")
        try:
            ended = wait_for(done, "the mixed workload to finish", timeout=fault.settle_seconds,
                             interval=POLL_SECONDS)  # fmt: skip
        except AssertionError:
            print(unfinished_pods(cluster, namespace))
            raise
        if fault.inject is strike_mixed:
            print(attempt_events(cluster, namespace))
    if fault.triggerers > 1:  # which replica fired each Trigger (once each: the audit's)
        fired_by = Counter(holder for names in records.triggers.holders.values() for holder in names)
        print(f"\nTriggers fired by {dict(fired_by)}")
    seconds = time.monotonic() - started
    if fault.inject is strike_mixed:
        print_by_type(by_type, target, load)
    audit_mixed(fault, Outcome.of(ended, records), mixed_reference, target, recoveries, seconds)


#: How long a clock stepped behind may hold a workload that makes no progress before the schedule
#: steps it back to the real time (as its next strike would): a clock an hour behind holds every
#: retry delay and poke, and when nothing else is in flight (the workload's last runs) no progress
#: comes at all, so the schedule, which strikes again only after progress, would wait for ever.
CLOCK_HELD_SECONDS = 30.0


def recovered(
    target: Target, progress: Callable[[], int], before: int, struck: float, done: Callable[[], Any]
) -> bool:
    """The workload moved on since the strike, or has finished; a clock left behind past
    CLOCK_HELD_SECONDS without either is stepped back to the real time (the recovery time counts it)."""
    if progress() > before or done():
        return True
    if target.clock_offset < 0 and time.monotonic() - struck > CLOCK_HELD_SECONDS:
        set_clock(target, 0.0)
    return False


def print_by_type(by_type: dict[str, list[float]], target: Target, load: float) -> None:
    """A mixed schedule's strikes by type: injections, the tries each type failed, time to recover."""
    failed = Counter(hit.fault for hit in target.failed)
    print(
        f"\nload average {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end"
        "\n| fault | injections | tries failed by the fault | recover p50 / max (s) |\n|---|---|---|---|"
    )
    for kind in MIXED:
        times = by_type.get(kind, [])
        if times:
            print(f"| {kind} | {len(times)} | {failed[kind]} "
                  f"| {statistics.median(times):.2f} / {max(times):.1f} |")  # fmt: skip
    print(f"| all | {sum(map(len, by_type.values()))} | {len(target.failed)} | |")


def audit_mixed(
    fault: Fault,
    outcome: Outcome,
    reference: Outcome,
    target: Target,
    recoveries: list[float],
    seconds: float,
) -> None:
    """The mixed workload's audit: `fault_audit.compare` against the reference run, the table row printed."""
    assert recoveries, "the schedule struck nothing: the audit would prove nothing"
    result = compare(outcome, reference, target.failed)
    print(
        "\n| fault | injections | runs | task instances | tries failed by the fault | duplicates | lost "
        "| stuck | differences | recover p50 / max (s) | test (s) |"
        "\n|---|---|---|---|---|---|---|---|---|---|---|"
        f"\n| {fault.name} (seed {SEED}, mixed) | {len(recoveries)} | {len(outcome.run_states)} "
        f"| {len(outcome.tis) + sum(map(len, outcome.consumer_states))} | {len(target.failed)} "
        f"| {result.duplicates} | {result.lost} | {result.stuck} | {len(result.differences)} "
        f"| {statistics.median(recoveries):.1f} / {max(recoveries):.1f} | {seconds:.0f} |"
        f"\n(pods created {outcome.pods.total()}, reference {reference.pods.total()}; triggers "
        f"{len(outcome.triggers_created)}; asset events {len(outcome.asset_events)} in "
        f"{len(outcome.consumed)} consumer runs; a pod fault's misses: {dict(target.missed)})"
    )
    assert not result.differences, "\n".join(result.differences)


#: The Events a pass posts about an attempt no status recorded or no longer wants: where a difference
#: in the audit (an extra try) usually starts.
ATTEMPT_EVENTS = ("AttemptAdopted", "OrphanedAttemptStopped", "StrayAttemptStopped")


def attempt_events(cluster: Cluster, namespace: str) -> str:
    """How many attempts passes adopted or stopped (from the Events; one posted during a proxy fault
    may be missing), and what each orphan stopped was: a stopped orphan is a try failed (its pod held)."""
    events = [e for e in get(cluster, namespace, "events")["items"] if e.get("reason") in ATTEMPT_EVENTS]
    counts = Counter(e["reason"] for e in events)
    lines = [f"\nattempt Events: {dict(counts)}"]
    lines += [f"  {e['involvedObject']['name']}: {e['message']}" for e in events
              if e["reason"] == "OrphanedAttemptStopped"]  # fmt: skip
    return "\n".join(lines)


def unfinished_pods(cluster: Cluster, namespace: str) -> str:
    """What a stuck run's pods look like (phase, node, conditions) and what the scheduler and kwok
    logged last: whether the pod was never scheduled, scheduled but not run, or run but not seen."""
    lines = ["--- task pods not Succeeded"]
    for pod in quietly(lambda: get_pods(cluster, namespace), []):
        status = pod.get("status") or {}
        if status.get("phase") == "Succeeded":
            continue
        conditions = [
            f"{c['type']}={c['status']}({c.get('reason', '')}: {c.get('message', '')})"
            for c in status.get("conditions") or []
        ]
        lines.append(
            f"{pod['metadata']['name']} rv={pod['metadata']['resourceVersion']} phase={status.get('phase')}"
            f" node={pod['spec'].get('nodeName')} created={pod['metadata']['creationTimestamp']}"
            f" {' '.join(conditions)}"
        )
    for component in ("kube-scheduler", "kwok"):
        log = (cluster.workdir / f"{component}.log") if cluster.workdir else None
        if log is not None and log.exists():
            tail = log.read_text(errors="replace").splitlines()[-40:]
            lines += [f"--- {component} log (last 40 lines)", *tail]
    return "\n".join(lines)


def get_pods(cluster: Cluster, namespace: str) -> list[dict[str, Any]]:
    pods: list[dict[str, Any]] = json.loads(
        cluster.kubectl("get", "pods", "-n", namespace, "-l", LABEL_TASK, "-o", "json").stdout
    )["items"]
    return pods


def proxy_for(cluster: Cluster) -> FaultProxy:
    assert cluster.workdir is not None, "the fault proxy serves the local control plane's certificate"
    certs = cluster.workdir / "certs"
    server = json.loads(cluster.kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
    return FaultProxy(server, certs / "ca.crt", certs / "apiserver.crt", certs / "apiserver.key")


def quietly(read: Callable[[], Any], default: Any) -> Any:
    """A read of the apiserver that may fail while the fault is on (it is restarting)."""
    try:
        return read()
    except (ClusterError, KeyError):
        return default


LEASE = "zonda-faults-leader"
#: Leadership changes of the SIGSTOP schedule (CI: one).
STOPS = int(INJECTIONS or 1)
#: Writes a stale replica may make unfenced: its own Lease attempts and Events.
HARMLESS = ("/leases/", "/events")


def identity(process: ZondaProcess) -> str:
    assert process.process is not None
    return f"{socket.gethostname()}-{process.process.pid}"  # the controller's default identity


def holder(cluster: Cluster, namespace: str) -> str | None:
    def read() -> str | None:
        lease = json.loads(cluster.kubectl("get", "lease", LEASE, "-n", namespace, "-o", "json").stdout)
        return (lease.get("spec") or {}).get("holderIdentity")

    found: str | None = quietly(read, None)
    return found


def unfenced(writes: list[fault_proxy.Request]) -> list[fault_proxy.Request]:
    """Writes that succeeded without optimistic concurrency guarding them: not a create (fenced by the
    deterministic name: a second one is AlreadyExists), not a replace or patch carrying the
    resourceVersion it was decided on, and not a delete carrying DeleteOptions.preconditions (the uid or
    resourceVersion it was decided on): each a Conflict if anyone, a new leader, wrote or made it again
    since. A delete without one is unfenced, whatever write came before it."""
    return [
        w
        for w in writes
        if w.status is not None
        and w.status < 300
        and not any(part in w.path for part in HARMLESS)
        and w.method != "POST"
        and not (w.method in ("PUT", "PATCH", "DELETE") and w.precondition)
    ]


def test_a_leader_stopped_past_its_lease_writes_nothing_unfenced_after_it_wakes(
    cluster: Cluster, namespace: str, tmp_path: Path, mixed_reference: Outcome
) -> None:
    """Two replicas electing a leader (a 3 s Lease) run the mixed workload; the leader is SIGSTOPped
    until the standby holds the Lease (read from the apiserver) and has moved the workload on, then
    SIGCONTed. Each replica talks through a FaultProxy of its own that records its writes: after it
    wakes, the stale leader's successful writes must all be fenced (creates of deterministic names,
    replaces preconditioned on the resourceVersion read), so none can overwrite what the new leader
    wrote; then the mixed workload's audit against the reference (each run, pod, Trigger and
    AssetEvent once, every outcome the reference's)."""
    rng = random.Random(SEED)
    started = time.monotonic()
    for manifest in mixed_workload(WINDOW, 1000):
        apply(cluster, namespace, manifest)
    peering = ["--peering", LEASE, "--peering-lease-duration", "3"]
    recoveries: list[float] = []
    woken: list[tuple[FaultProxy, float]] = []  # (a stopped leader's proxy, when it was SIGCONTed)
    takeovers: list[tuple[FaultProxy, float]] = []  # (the new leader's proxy, when it held the Lease)

    def done() -> Any:
        return mixed_finished(cluster, namespace, WINDOW)

    with contextlib.ExitStack() as stack:
        records = Records.watch(cluster, namespace)
        for keys in records.all():
            stack.enter_context(keys)
        stack.enter_context(triggerer(cluster, namespace, tmp_path, extra=[
            "--metrics-port", str(free_port()), "--health-port", str(free_port())]))  # fmt: skip
        replicas: list[tuple[ZondaProcess, FaultProxy]] = []
        for name in ("a", "b"):
            (tmp_path / name).mkdir()
            proxy = stack.enter_context(proxy_for(cluster))
            kubeconfig = str(proxy.kubeconfig(tmp_path / f"proxied-{name}", ADMIN_TOKEN))
            process = stack.enter_context(
                controller(cluster, namespace, tmp_path / name, extra=["--kubeconfig", kubeconfig, *peering])
            )
            replicas.append((process, proxy))
            if name == "a":
                wait_for(
                    lambda first=process: holder(cluster, namespace) == identity(first), "the first to lead"
                )
        leader, standby = replicas
        # positive control: the leader's proxy sees its status writes, preconditioned
        wait_for(
            lambda: any(w.path.endswith("/status") and w.precondition and w.status == 200
                        for w in leader[1].writes()),
            "the leader's first status write, seen by its proxy",
        )  # fmt: skip
        for _ in range(STOPS):
            time.sleep(rng.uniform(0.5, 3.0))  # the fault schedule: when to strike, not a wait for an effect
            if done():
                break
            assert leader[0].process is not None
            os.killpg(leader[0].process.pid, signal.SIGSTOP)
            stopped = time.monotonic()
            try:
                wait_for(
                    lambda next=standby[0]: holder(cluster, namespace) == identity(next),
                    "the standby to lead",
                    60,
                )
                takeovers.append((standby[1], time.monotonic()))
                before = all_progress(cluster, namespace)
                wait_for(
                    lambda before=before: all_progress(cluster, namespace) > before or done(),
                    "the new leader to move the workload on",
                    timeout=120,
                )
                recoveries.append(time.monotonic() - stopped)
            finally:
                woke = time.monotonic()
                os.killpg(leader[0].process.pid, signal.SIGCONT)
            wait_for(
                lambda old=leader[0]: f"{identity(old)} stopped leading" in old.log(),
                "the woken leader to see it lost the Lease",
            )
            woken.append((leader[1], woke))
            leader, standby = standby, leader
        snapshot = wait_for(done, "the mixed workload to finish", timeout=300)
    # what each woken leader wrote, from its waking until it led again (or the end)
    stale_writes = [
        write
        for proxy, woke in woken
        for write in proxy.writes(since=woke)
        if write.at < min([at for led, at in takeovers if led is proxy and at > woke], default=math.inf)
    ]
    # positive control: the proxies read a delete's preconditions (a fired Trigger's, a finished pod's)
    deletes = [w for _, proxy in replicas for w in proxy.writes() if w.method == "DELETE" and w.status == 200]
    assert any((w.precondition or "").startswith("uid=") for w in deletes), (
        f"no delete seen with a uid: {deletes}"
    )
    bad = unfenced(stale_writes)
    kinds = Counter((w.method, w.status, "precondition" if w.precondition else "-") for w in stale_writes
                    if not any(part in w.path for part in HARMLESS))  # fmt: skip
    print(f"\nthe woken leaders' writes (method, status, precondition): {dict(kinds)}; unfenced: {bad}")
    # the rule's control: a delete or a replace without a precondition is unfenced, even just after
    # its run's preconditioned status write; each with one is not
    pods, runs = "/api/v1/namespaces/n/pods", "/apis/zonda.dev/v1alpha1/namespaces/n/dagruns"
    delete = fault_proxy.Request(0.0, "DELETE", f"{pods}/mixed-a-1-abcdef", "", 200, None, None)
    write = fault_proxy.Request(0.0, "PUT", f"{runs}/mixed/status", "", 200, None, "12")
    assert unfenced([write, delete]) == [delete]
    assert not unfenced([write, replace(delete, precondition="uid=0a1b")])
    assert unfenced([replace(write, precondition=None)])
    assert not bad, f"a woken leader wrote without fencing: {bad}"
    audit_mixed(
        Fault("leader-sigstop", "leader SIGSTOP past its Lease, then SIGCONT", STOPS, lambda _: True),
        Outcome.of(snapshot, records),
        mixed_reference,
        Target(cluster, namespace, leader[0], rng),
        recoveries,
        time.monotonic() - started,
    )
