"""Fault injection: a seeded schedule SIGKILLs the controller while a mixed workload runs, and an
independent audit counts what happened from the apiserver's objects and a pod watch of its own.

Small in CI (`ZONDA_FAULT_KILLS`, default 4 kills, seed `ZONDA_FAULT_SEED`, default 22); larger on
demand, e.g. `ZONDA_FAULT_KILLS=40 python -m pytest tests/cluster/test_faults.py -s`. The table it
prints goes to docs/reliability.md.

The audit never reads Zonda's counters: each due logical date is created exactly once (DagRuns in the
apiserver), each (run, task, map index, try) had at most one pod created (ADDED events of a pod watch
started before the controller), no task instance is left unfinished, and the final states are those
the workload has without faults (every task succeeds).

Real: the apiserver, etcd, kwok's nodes running the pods, the controller process (SIGKILLed).
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import statistics
import threading
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from controller.devtools.devcluster import Cluster
from tests.cluster.zonda_processes import apply, controller, runs_of, wait_for
from zonda.resources.wire import LABEL_DAGRUN, LABEL_MAP_INDEX, LABEL_TASK, LABEL_TRY

KILLS = int(os.environ.get("ZONDA_FAULT_KILLS", "4"))
SEED = int(os.environ.get("ZONDA_FAULT_SEED", "22"))
#: Minutes between the workload's runs over the last hour: 10 -> 6 runs; 2 -> 30 runs (on demand).
INTERVAL = int(os.environ.get("ZONDA_FAULT_INTERVAL_MINUTES", "10"))


def pod_task(task_id: str, depends_on: list[str], duration_ms: int = 400) -> dict[str, Any]:
    return {
        "id": task_id,
        "container": {"image": "busybox", "command": ["sh", "-c", "true"]},
        "podOverride": {"metadata": {"annotations": {"kwok.zonda.dev/duration-ms": str(duration_ms)}}},
        "dependsOn": depends_on,
    }


def workload(start: datetime) -> dict[str, Any]:
    """A chain, a fan-out of four and a join, every INTERVAL minutes over the last hour (catchup), at
    most three runs at once: six due runs of seven task instances by default."""
    fan = [pod_task(f"fan{index}", ["b"]) for index in range(4)]
    return {
        "apiVersion": "zonda.dev/v1alpha1",
        "kind": "DAG",
        "metadata": {"name": "mixed"},
        "spec": {
            "schedule": f"{INTERVAL}m",
            "startDate": start.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "catchup": True,
            "maxActiveRuns": 3,
            "tasks": [pod_task("a", []), pod_task("b", ["a"]), *fan,
                      pod_task("join", [f"fan{index}" for index in range(4)])],
        },
    }  # fmt: skip


class PodCreations:
    """Every pod created in the namespace, from a watch started (at a list's resourceVersion) before
    the controller: (run, task, map index, try) -> the names of the pods created for it."""

    def __init__(self, cluster: Cluster, namespace: str) -> None:
        self.kubeconfig, self.namespace = str(cluster.kubeconfig), namespace
        self.created: dict[tuple[str, str, str, str], list[str]] = {}
        self._seen: set[str] = set()
        self._listed, self._stop = threading.Event(), threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._record()), daemon=True)

    async def _record(self) -> None:
        from kubernetes_asyncio import watch

        from controller.kube import Kube

        async with await Kube.connect(self.kubeconfig) as kube:
            listed = await kube.core.list_namespaced_pod(self.namespace)
            version = listed.metadata.resource_version
            self._listed.set()
            while not self._stop.is_set():
                stream = watch.Watch()
                async with stream.stream(
                    kube.core.list_namespaced_pod, self.namespace, resource_version=version, timeout_seconds=2
                ) as events:
                    async for event in events:
                        meta = event["object"].metadata
                        version = meta.resource_version
                        if meta.uid in self._seen:
                            continue
                        self._seen.add(meta.uid)
                        labels = meta.labels or {}
                        key = (labels.get(LABEL_DAGRUN, ""), labels.get(LABEL_TASK, ""),
                               labels.get(LABEL_MAP_INDEX, "-1"), labels.get(LABEL_TRY, ""))  # fmt: skip
                        self.created.setdefault(key, []).append(meta.name)

    def __enter__(self) -> PodCreations:
        self._thread.start()
        assert self._listed.wait(60), "the pod watch did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)


def test_sigkilled_controller_creates_each_run_once_launches_each_try_once_and_finishes_everything(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    rng = random.Random(SEED)
    now = datetime.now(UTC)
    start = (now - timedelta(hours=1)).replace(minute=0, second=0, microsecond=0)
    due = int((now - start) / timedelta(minutes=INTERVAL))
    apply(cluster, namespace, workload(start))
    recoveries: list[float] = []
    with PodCreations(cluster, namespace) as pods, controller(cluster, namespace, tmp_path) as process:
        for _ in range(KILLS):
            time.sleep(rng.uniform(0.5, 4.0))  # the fault schedule: when to strike, not a wait for an effect
            if finished(cluster, namespace, due):
                break  # nothing left to hurt: a kill now would measure nothing
            before = progress(cluster, namespace)
            process.stop(signal.SIGKILL)
            killed = time.monotonic()
            process.start()
            # recovered: the restarted controller has moved the workload on (a task instance finished
            # or a run was created), or everything is already done
            wait_for(
                lambda before=before: (
                    progress(cluster, namespace) > before or finished(cluster, namespace, due)
                ),
                "the restarted controller to make progress",
                timeout=120,
            )
            recoveries.append(time.monotonic() - killed)
        runs = wait_for(lambda: finished(cluster, namespace, due), f"{due} runs to finish", timeout=240)
    # ---- the audit
    dates = Counter(run["spec"]["logicalDate"] for run in runs_of(cluster, namespace, "mixed"))
    duplicates_runs = sum(count - 1 for count in dates.values())
    per_try = Counter({key: len(names) for key, names in pods.created.items()})
    duplicate_tries = {key: pods.created[key] for key, count in per_try.items() if count > 1}
    states = [ti["state"] for run in runs for ti in run["status"]["taskInstances"].values()]
    stuck = sum(1 for state in states if state not in ("success", "failed", "skipped", "upstream_failed"))
    lost = sum(1 for state in states if state != "success")
    tries = Counter(ti["tryNumber"] for run in runs for ti in run["status"]["taskInstances"].values())
    print(
        "\n| fault | injections | runs | task instances | duplicate runs | duplicate tries | lost | stuck "
        "| recover p50 / max (s) |\n|---|---|---|---|---|---|---|---|---|\n"
        f"| controller SIGKILL (seed {SEED}) | {len(recoveries)} | {len(runs)} | {len(states)} "
        f"| {duplicates_runs} | {len(duplicate_tries)} | {lost} | {stuck} "
        f"| {statistics.median(recoveries):.1f} / {max(recoveries):.1f} |"
    )
    due_by_now = int((datetime.now(UTC) - start) / timedelta(minutes=INTERVAL))  # one may fall due meanwhile
    assert due <= len(dates) <= due_by_now and duplicates_runs == 0, dates
    assert not duplicate_tries, f"a try was launched twice: {duplicate_tries}"
    assert stuck == 0 and lost == 0, [r["status"]["taskInstances"] for r in runs]
    assert set(tries) == {1}, "no fault of a task's own: every task instance succeeded at its first try"
    assert len(per_try) == len(states), "one pod per task instance (all are container tasks)"


def progress(cluster: Cluster, namespace: str) -> int:
    """Runs created plus task instances finished: what a working controller increases."""
    runs = runs_of(cluster, namespace, "mixed")
    done = sum(
        1
        for run in runs
        for ti in ((run.get("status") or {}).get("taskInstances") or {}).values()
        if ti["state"] == "success"
    )
    return len(runs) + done


def finished(cluster: Cluster, namespace: str, due: int) -> list[dict[str, Any]] | None:
    runs = runs_of(cluster, namespace, "mixed")
    ended = [run for run in runs if (run.get("status") or {}).get("state") in ("success", "failed")]
    return runs if len(runs) >= due and len(ended) == len(runs) else None
