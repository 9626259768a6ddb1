"""Benchmark: the controller's reaction time, API writes and CPU per task instance, beside a null
orchestrator that creates the same pods itself, and (optionally) two source trees back to back.

    python bench/bench_scale.py [--trees base=/tmp/base,new=.] [--workloads w1,w3,c100]
                                [--profile DIR] [--burst 400] [--replicas 1,2,4]

One local control plane (kube-apiserver + etcd + scheduler + kwok), then for each workload and each
tree (alternating which goes first) a fresh namespace, the DAG applied, `zonda controller` from that
tree (its own cwd, PYTHONPATH and CRDs) with the Kubernetes executor, and the runs created at once. Then
the null orchestrator runs the same workload: one asyncio client that creates each chain's next pod
itself (a copy of the pod Zonda created, renamed) the moment its watch sees the upstream pod
Succeeded. Workloads: `w1` one 20-task chain of `true`, `w3` five of them at once, `c100` 100 at once
(`cN` for N), `w2` root -> 50 -> join; `c100@new` runs only the tree labelled `new`. `cNdM` spreads
the N runs over M DAGs of the same chain (`c100d100`: each run its own DAG): with `--replicas 1,2,4`
(N > 1 controllers with `--shards N`, which split DAGs, and a DAG's runs with it, by a stable hash)
a workload of one DAG would stay on one replica.

Printed per workload and tree:
- upstream Succeeded -> downstream pod ADDED, both seen by the bench's one pod watch (ms), and each
  gap in three at the apiserver's own times of the downstream create (its audit log): the
  orchestrator's reaction until the POST is received, the apiserver's time for it, and its answer
  until the bench sees the pod (`gap_split_ms`, the null's beside it);
- task instances per second (first run created -> last pod Succeeded), and the null orchestrator's;
- API writes per task instance by the controller (`apiserver_request_total` of its resources:
  DagRun, DAG and Pool statuses, pods, triggers; plus the Events in the namespace, counted from the
  apiserver);
- the controller's CPU (user + system, from /proc) per task instance, from the first run created
  until every run finished, and the shares of that time its threads were on a CPU and runnable but
  waiting for one (/proc schedstat: a controller that looks idle on a loaded machine may be queued);
- the machine's load average at the start.

`--profile DIR` records every controller with py-spy (raw collapsed stacks, `DIR/<tree>-<workload>.txt`,
idle samples included) and prints the functions with the most samples (inclusive); with `--awaits`
the controller also runs under `bench/await_sampler.py`, which samples what each coroutine awaits
(`DIR/<tree>-<workload>.awaits.txt`, grouped by task name) and the event loop's lag. `--burst N`
also measures the null orchestrator's ceiling: N pods created 32 at a time, pods per second until
the last Succeeded.

It prints numbers; it asserts nothing (performance is measured here, not in tests).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import processes
from bench.bench_controller import WRITE_VERBS, api_requests, api_writes, percentile
from controller.devtools.devcluster import ADMIN_TOKEN, Cluster, connect_cluster
from zonda.resources.dagrun_models import manual_dagrun
from zonda.schedules.scheduling import dagrun_name

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
#: What the controller writes here (the bench creates the DagRuns; the scheduler binds pods and kwok
#: writes their status).
CONTROLLER_RESOURCES = ("dagruns/status", "dags/status", "pools/status", "pods", "triggers")
POD_MS = 100
CUSTOM = "/apis/zonda.dev/v1alpha1"


def chain_dag(name: str, chain: int) -> dict[str, Any]:
    return fan_dag(name, chain=chain, fanout=0)


def fan_dag(name: str, *, chain: int = 0, fanout: int = 0) -> dict[str, Any]:
    def task(task_id: str, upstream: list[str]) -> dict[str, Any]:
        return {
            "id": task_id,
            "dependsOn": upstream,
            "container": {"image": "busybox"},
            "podOverride": {"metadata": {"annotations": {"kwok.zonda.dev/duration-ms": str(POD_MS)}}},
        }

    if fanout:  # root -> fanout -> join
        tasks = [task("root", [])] + [task(f"f{i}", ["root"]) for i in range(fanout)]
        tasks.append(task("join", [f"f{i}" for i in range(fanout)]))
    else:
        tasks = [task("c0", [])] + [task(f"c{i}", [f"c{i - 1}"]) for i in range(1, chain)]
    return {
        "apiVersion": "zonda.dev/v1alpha1",
        "kind": "DAG",
        "metadata": {"name": name},
        "spec": {"schedule": None, "maxActiveTasks": 256, "maxActiveRuns": 1000, "tasks": tasks},
    }


@dataclass
class Workload:
    name: str
    runs: int
    chain: int = 20
    fanout: int = 0
    dags: int = 1  # the runs spread over this many DAGs (bench-000, ...), run i of DAG i % dags

    def dag_names(self) -> list[str]:
        return ["bench"] if self.dags == 1 else [f"bench-{j:03d}" for j in range(self.dags)]

    @property
    def tasks(self) -> int:
        return self.fanout + 2 if self.fanout else self.chain

    def edges(self) -> list[tuple[str, str]]:
        if self.fanout:
            return [("root", f"f{i}") for i in range(self.fanout)]
        return [(f"c{i - 1}", f"c{i}") for i in range(1, self.chain)]


def workload(name: str) -> Workload:
    if name == "w1":
        return Workload(name, 1)
    if name == "w2":
        return Workload(name, 1, fanout=50)
    if name == "w3":
        return Workload(name, 5)
    match = re.fullmatch(r"c(\d+)(?:d(\d+))?", name)
    if match:
        return Workload(name, int(match.group(1)), dags=int(match.group(2) or 1))
    raise SystemExit(f"unknown workload {name!r}")


# ------------------------------------------------------------------------------------ the API


class Api:
    """A bare aiohttp client of the apiserver: raw JSON, so the bench's own CPU stays small."""

    def __init__(self, cluster: Cluster) -> None:
        config = json.loads(cluster.kubeconfig.read_text())
        self.server = config["clusters"][0]["cluster"]["server"]
        self.session = aiohttp.ClientSession(
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
            connector=aiohttp.TCPConnector(ssl=ssl._create_unverified_context(), limit=64),
            timeout=aiohttp.ClientTimeout(total=None, sock_read=None),
        )

    async def close(self) -> None:
        await self.session.close()

    async def request(self, method: str, path: str, body: Any = None) -> Any:
        async with self.session.request(method, self.server + path, json=body) as response:
            data = await response.read()
            if response.status >= 400 and response.status != 409:
                raise RuntimeError(f"{method} {path}: {response.status} {data[:300]!r}")
            return json.loads(data) if data else None

    async def watch(self, path: str, on_event: Any, ready: asyncio.Event) -> None:
        """Each watch event is one line, split here: aiohttp's line reader refuses lines over its
        buffer limit, and a run of thousands of tasks has a status of a megabyte."""
        listing = await self.request("GET", path)
        version = listing["metadata"]["resourceVersion"]
        ready.set()
        while True:
            url = f"{self.server}{path}?watch=1&resourceVersion={version}&timeoutSeconds=3600"
            async with self.session.get(url) as response:
                pending = b""
                async for chunk in response.content.iter_any():
                    *lines, pending = (pending + chunk).split(b"\n")
                    for line in filter(None, lines):
                        event = json.loads(line)
                        obj = event["object"]
                        version = obj["metadata"].get("resourceVersion", version)
                        on_event(event["type"], obj, time.monotonic())


@dataclass
class PodClock:
    """When the bench's watch first saw each pod ADDED and Succeeded, by (run label, task id)."""

    added: dict[tuple[str, str], float] = field(default_factory=dict)
    succeeded: dict[tuple[str, str], float] = field(default_factory=dict)
    waiters: dict[str, asyncio.Future[None]] = field(default_factory=dict)
    #: each key's first pod, to find its create in the apiserver's audit log
    names: dict[tuple[str, str], str] = field(default_factory=dict)
    #: wall clock minus the monotonic one, which the watch's times are on
    wall_offset: float = field(default_factory=lambda: time.time() - time.monotonic())

    def on_event(self, type: str, pod: dict[str, Any], now: float) -> None:
        meta = pod["metadata"]
        labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
        key = (labels.get("bench/run", ""), annotations.get("bench/task", ""))
        if not key[0]:  # a Zonda pod: its run's label and task id annotation
            key = (labels.get("zonda.dev/dagrun", ""), annotations.get("zonda.dev/task-id", ""))
        self.added.setdefault(key, now)
        self.names.setdefault(key, meta["name"])
        if (pod.get("status") or {}).get("phase") == "Succeeded" and key not in self.succeeded:
            self.succeeded[key] = now
            waiter = self.waiters.pop(meta["name"], None)
            if waiter is not None and not waiter.done():
                waiter.set_result(None)

    def gaps(self, runs: list[str], edges: list[tuple[str, str]]) -> list[float]:
        return [gap for step in self.gaps_by_step(runs, edges) for gap in step]

    def gaps_by_step(self, runs: list[str], edges: list[tuple[str, str]]) -> list[list[float]]:
        """Upstream Succeeded -> downstream ADDED (ms) by edge (a chain's step k: task k done -> task
        k+1 created): where the tail is. The runs start together, so the first steps' ends come in
        waves of every run at once."""
        return [
            [
                (self.added[down_key] - self.succeeded[up_key]) * 1000
                for up_key, down_key in self._seen(runs, edge)
            ]
            for edge in edges
        ]

    def _seen(self, runs: list[str], edge: tuple[str, str]) -> list[tuple[tuple[str, str], tuple[str, str]]]:
        """The (upstream, downstream) keys of `edge` in each run whose upstream Succeeded and whose
        downstream was ADDED."""
        up, down = edge
        keys = [((run[:63], up), (run[:63], down)) for run in runs]
        return [(u, d) for u, d in keys if u in self.succeeded and d in self.added]

    def split(
        self, runs: list[str], edges: list[tuple[str, str]], creates: dict[str, tuple[float, float]]
    ) -> dict[str, list[float]]:
        """Each gap in three (ms), at the apiserver's own times of the downstream pod's create (the
        audit log: request received, response complete): `react` upstream Succeeded seen by the
        bench -> the create received (the orchestrator's watch, its decision, its client), `create`
        the apiserver's time for the POST, `notify` its answer -> ADDED seen by the bench."""
        parts: dict[str, list[float]] = {"react": [], "create": [], "notify": []}
        for edge in edges:
            for up_key, down_key in self._seen(runs, edge):
                times = creates.get(self.names[down_key])
                if times is None:
                    continue
                received, completed = (t - self.wall_offset for t in times)
                parts["react"].append((received - self.succeeded[up_key]) * 1000)
                parts["create"].append((completed - received) * 1000)
                parts["notify"].append((self.added[down_key] - completed) * 1000)
        return parts

    def last_succeeded(self, runs: list[str]) -> float:
        labels = {run[:63] for run in runs}
        return max(t for (run, _), t in self.succeeded.items() if run in labels)


@dataclass
class RunStates:
    """Each DagRun's state as the bench's DagRun watch last saw it; `finished` set when `runs` ended.

    A watch, not a list every 0.25 s: with 100 runs of 20 tasks that list was 1 MB, about 1 s of
    the apiserver's time each (84 lists in 100 s), taken from the controller it measured."""

    runs: int
    state: dict[str, str | None] = field(default_factory=dict)
    finished: asyncio.Event = field(default_factory=asyncio.Event)
    #: each run's task instance states as last seen, and the writes whose only news was tasks running
    tis: dict[str, dict[str, str | None]] = field(default_factory=dict)
    running_only: int = 0

    def on_event(self, type: str, run: dict[str, Any], now: float) -> None:
        name, status = run["metadata"]["name"], run.get("status") or {}
        self.state[name] = status.get("state")
        states = {k: (v or {}).get("state") for k, v in (status.get("taskInstances") or {}).items()}
        before = self.tis.get(name, {})
        changed = {k: v for k, v in states.items() if before.get(k) != v}
        if before and changed and set(changed.values()) == {"running"}:
            self.running_only += 1
        self.tis[name] = states
        if sum(1 for s in self.state.values() if s in ("success", "failed")) >= self.runs:
            self.finished.set()

    def states(self) -> Counter[str | None]:
        return Counter(self.state.values())


# ------------------------------------------------------------------------------ the controller


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def run_queue_seconds(pid: int) -> float:
    """Seconds the process's threads were runnable but waiting for a CPU (/proc/<pid>/task/*/schedstat):
    on a loaded machine, the part of a "waiting" controller that is waiting for a core."""
    total = 0
    for stat in Path(f"/proc/{pid}/task").glob("*/schedstat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            total += int(stat.read_text().split()[1])
    return total / 1e9


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def machine_cpu(cluster: Cluster) -> dict[str, float]:
    """CPU seconds (user + system) so far of each control-plane process (kube-apiserver, etcd,
    kube-scheduler, kube-controller-manager, kwok) and of this bench: where a task instance's CPU goes
    on the whole machine, beside the controller's own."""
    out = {"bench": cpu_seconds(os.getpid())}
    for name, process in cluster.processes.items():
        with contextlib.suppress(OSError):
            out[name] = cpu_seconds(process.pid)
    return out


_SUMS = re.compile(
    r"^(apiserver_request_duration_seconds_sum|apiserver_request_body_size_bytes_sum"
    r"|apiserver_watch_events_sizes_sum|apiserver_watch_events_total)\{(?P<labels>[^}]*)\} (?P<value>\S+)$"
)


def apiserver_sums(cluster: Cluster) -> dict[tuple[str, str], float]:
    """(metric, what) -> value so far, from the apiserver's /metrics: the time it spent serving each
    resource and verb (`apiserver_request_duration_seconds_sum`, wall time, not CPU), the bytes of
    the request bodies written, and the watch events it sent (count and bytes) by kind: which writes
    cost the apiserver most."""
    config = json.loads(cluster.kubeconfig.read_text())
    server = config["clusters"][0]["cluster"]["server"]
    import urllib.request

    request = urllib.request.Request(f"{server}/metrics", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    with urllib.request.urlopen(request, context=ssl._create_unverified_context(), timeout=10) as response:
        text = response.read().decode()
    sums: dict[tuple[str, str], float] = {}
    for line in text.splitlines():
        match = _SUMS.match(line)
        if not match:
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', match.group("labels")))
        if "kind" in labels:  # the watch metrics
            what = labels["kind"]
        else:
            resource = labels.get("resource", "") + (
                f"/{labels['subresource']}" if labels.get("subresource") else ""
            )
            what = f"{resource} {labels.get('verb', '')}"
        key = (match.group(1), what)
        sums[key] = sums.get(key, 0.0) + float(match.group("value"))
    return sums


def diff(after: dict[Any, float], before: dict[Any, float]) -> dict[Any, float]:
    return {k: v - before.get(k, 0.0) for k, v in after.items() if v - before.get(k, 0.0)}


@contextlib.contextmanager
def controller(
    cluster: Cluster,
    tree: Path,
    namespace: str,
    log: Path,
    metrics_port: int,
    workers: int | None = None,
    extra: Sequence[str] = (),
    awaits: Path | None = None,
) -> Iterator[int]:
    """`zonda controller` of `tree`; `workers` None: that tree's default; `extra` more arguments.
    `awaits`: run it under `bench/await_sampler.py` (this tree's), its coroutines' waits written there."""
    env = {**cluster.env(), "PYTHONPATH": str(tree)}
    head = [sys.executable, "-m", "controller.cli"]
    if awaits is not None:
        head = [sys.executable, str(Path(__file__).with_name("await_sampler.py")), str(awaits), "--"]
    args = [
        *head, "controller", "--namespace", namespace,
        "--executor", "kubernetes", "--state-dir", str(log.parent / "state"), "--kubeconfig",
        str(cluster.kubeconfig), "--metrics-port", str(metrics_port),
    ]  # fmt: skip
    if workers is not None:
        args += ["--workers", str(workers)]
    args += list(extra)
    started = processes.running(
        args, log, ready=lambda text: "zonda controller started" in text, what="controller", env=env, cwd=tree
    )
    with started as process:
        yield process.pid


def controller_counters(port: int) -> dict[str, float]:
    """The controller's own counters of run passes, API errors (conflicts) and the watch events its
    followers delivered, from its /metrics."""
    import urllib.request

    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    wanted = (
        "zonda_reconciles_total{",
        "zonda_api_errors_total{",
        "zonda_watch_events_total{",
        "zonda_dag_plans_ahead_total{",
    )
    return {
        line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(wanted)
    }


def start_py_spy(pid: int, out: Path) -> subprocess.Popen[bytes]:
    args = ["py-spy", "record", "--pid", str(pid), "-r", "250", "--idle", "-f", "raw", "--nonblocking"]
    args += ["-o", str(out)]
    return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


async def zonda_events(api: Api, namespace: str) -> int:
    items = (await api.request("GET", f"/apis/events.k8s.io/v1/namespaces/{namespace}/events"))["items"]
    return sum(1 for e in items if "zonda" in (e.get("reportingController") or ""))


@dataclass
class Result:
    gaps: list[float]
    wall: float
    task_instances: int
    writes: dict[str, float] = field(default_factory=dict)
    events: int = 0
    cpu: float = 0.0
    replica_cpu: list[float] = field(default_factory=list)
    run_queue: float = 0.0
    measured: float = 0.0
    rss: int = 0
    load: float = 0.0
    load_end: float = 0.0
    template: dict[str, Any] | None = None
    #: one of each object Zonda wrote (a finished DagRun, its DAG, one of its Events): `write_costs`
    samples: dict[str, dict[str, Any]] = field(default_factory=dict)
    counters: dict[str, float] = field(default_factory=dict)
    running_only: int = 0
    replica_counters: list[dict[str, float]] = field(default_factory=list)
    requests: dict[str, float] = field(default_factory=dict)
    #: CPU seconds of each control-plane process (and the bench) over the measurement
    machine: dict[str, float] = field(default_factory=dict)
    #: the gaps by edge (`PodClock.gaps_by_step`)
    step_gaps: list[list[float]] = field(default_factory=list)
    #: the apiserver's own sums over the measurement (`apiserver_sums`)
    apiserver: dict[tuple[str, str], float] = field(default_factory=dict)
    #: the gaps in three (`PodClock.split`)
    split: dict[str, list[float]] = field(default_factory=dict)


def pod_creates(cluster: Cluster, namespace: str) -> dict[str, tuple[float, float]]:
    """The pods created in `namespace` by name: (request received, response complete), wall-clock
    seconds, from the apiserver's audit log (the local control plane audits every pod create)."""
    return {
        event["objectRef"].get("name", ""): (
            datetime.fromisoformat(event["requestReceivedTimestamp"]).timestamp(),
            datetime.fromisoformat(event["stageTimestamp"]).timestamp(),
        )
        for event in cluster.pod_create_events(namespace)
        if (event.get("responseStatus") or {}).get("code") == 201
    }


def apply_crds(cluster: Cluster, tree: Path) -> None:
    """The tree's own CRDs, before its controller runs: their schemas are part of what a write costs
    the apiserver. A server-side apply of unchanged files changes nothing; a changed CRD's storage is
    swapped, and for some seconds requests may still meet the old one (429s, watches closed under a
    controller that had just started): a 2,877 ms gap p99 in the first round that ran right after a
    swap. So after a change the bench waits, beyond their being served again, 10 s more."""
    generations = "jsonpath={range .items[*]}{.metadata.name}={.metadata.generation} {end}"
    before = cluster.kubectl("get", "crd", "-o", generations, check=False).stdout
    cluster.install_crds(tree / "crds")  # established and served
    if cluster.kubectl("get", "crd", "-o", generations, check=False).stdout != before:
        time.sleep(10)


async def run_zonda(
    cluster: Cluster,
    api: Api,
    tree: Path,
    w: Workload,
    label: str,
    tmp: Path,
    profile: Path | None,
    workers: int | None = None,
    await_profile: bool = False,
    replicas: int = 1,
) -> Result:
    apply_crds(cluster, tree)
    namespace = f"z-{label}-{w.name}-{int(time.time()) % 100000}"
    await api.request("POST", "/api/v1/namespaces", {"metadata": {"name": namespace}})
    for dag_name in w.dag_names():
        body = fan_dag(dag_name, chain=w.chain, fanout=w.fanout) if w.fanout else chain_dag(dag_name, w.chain)
        await api.request("POST", f"/apis/zonda.dev/v1alpha1/namespaces/{namespace}/dags", body)
    clock = PodClock()
    ready = asyncio.Event()
    watcher = asyncio.create_task(api.watch(f"/api/v1/namespaces/{namespace}/pods", clock.on_event, ready))
    run_clock, runs_ready = RunStates(w.runs), asyncio.Event()
    run_watcher = asyncio.create_task(
        api.watch(f"/apis/zonda.dev/v1alpha1/namespaces/{namespace}/dagruns", run_clock.on_event, runs_ready)
    )
    await ready.wait()
    await runs_ready.wait()
    load = os.getloadavg()[0]
    (tmp / "state").mkdir(exist_ok=True)
    ports = [free_port() for _ in range(replicas)]
    awaits = profile / f"{label}-{w.name}.awaits.txt" if profile is not None and await_profile else None
    extra = ["--shards", str(replicas), "--peering-lease-duration", "6"] if replicas > 1 else []
    with contextlib.ExitStack() as stack:
        pids = [
            stack.enter_context(
                controller(
                    cluster, tree, namespace, tmp / f"controller-{label}-{w.name}-{n}.log", port, workers,
                    extra, awaits=awaits if n == 0 else None,
                )
            )
            for n, port in enumerate(ports)
        ]  # fmt: skip
        spy = None
        if profile is not None:
            spy = start_py_spy(pids[0], profile / f"{label}-{w.name}.txt")
            await asyncio.sleep(1)
        # The DAGs' first reconciles are not part of the measurement; sharded: the replicas have
        # split the shards (each takes its fair share within a lease renewal or two).
        await asyncio.sleep(1.0 if replicas == 1 else 6.0)
        before = api_writes(cluster)
        requests_before = api_requests(cluster)
        cpu_before = [cpu_seconds(pid) for pid in pids]
        machine_before, sums_before = machine_cpu(cluster), apiserver_sums(cluster)
        queued_before = sum(run_queue_seconds(pid) for pid in pids)
        start = time.monotonic()
        base = datetime.now(UTC)
        dag_names = w.dag_names()
        owners = [dag_names[i % len(dag_names)] for i in range(w.runs)]
        names = [
            dagrun_name(owner, base + timedelta(milliseconds=i), "manual") for i, owner in enumerate(owners)
        ]
        await asyncio.gather(
            *(
                api.request(
                    "POST",
                    f"/apis/zonda.dev/v1alpha1/namespaces/{namespace}/dagruns",
                    manual_dagrun(name, namespace, owner, base + timedelta(milliseconds=i), {}),
                )
                for i, (name, owner) in enumerate(zip(names, owners, strict=True))
            )
        )
        try:
            await asyncio.wait_for(run_clock.finished.wait(), timeout=120 + w.runs * 6)
        except TimeoutError:
            print(f"  !! {label} {w.name}: runs not finished: {dict(run_clock.states())}", flush=True)
        states = run_clock.states()
        cpus = [cpu_seconds(pid) - b for pid, b in zip(pids, cpu_before, strict=True)]
        run_queue = sum(run_queue_seconds(pid) for pid in pids) - queued_before
        machine, sums = diff(machine_cpu(cluster), machine_before), diff(apiserver_sums(cluster), sums_before)
        measured = time.monotonic() - start
        rss = sum(rss_bytes(pid) for pid in pids)
        after = api_writes(cluster)
        requests = {
            f"{resource} {verb} {code}": value - requests_before.get((resource, verb, code), 0)
            for (resource, verb, code), value in api_requests(cluster).items()
            if resource.split("/")[0] in ("dagruns", "dags", "pools", "pods", "leases", "events", "triggers")
        }
        counters: Counter[str] = Counter()
        replica_counters = [controller_counters(port) for port in ports]
        for one in replica_counters:
            counters.update(one)
        await asyncio.sleep(1.5)  # Events are posted in the background, after the status write
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            spy.wait(timeout=30)
    events = await zonda_events(api, namespace)
    pods = (await api.request("GET", f"/api/v1/namespaces/{namespace}/pods?limit=1"))["items"]
    samples: dict[str, dict[str, Any]] = {}
    with contextlib.suppress(Exception):
        samples["dagrun"] = await api.request("GET", f"{CUSTOM}/namespaces/{namespace}/dagruns/{names[0]}")
        samples["dag"] = await api.request("GET", f"{CUSTOM}/namespaces/{namespace}/dags/{owners[0]}")
        listed = await api.request("GET", f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")
        samples["event"] = next(e for e in listed["items"] if "zonda" in (e.get("reportingController") or ""))
    for task in (watcher, run_watcher):
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
    if states.get("failed"):
        print(f"  !! {label} {w.name}: {states['failed']} runs failed", flush=True)
    return Result(
        gaps=clock.gaps(names, w.edges()),
        step_gaps=clock.gaps_by_step(names, w.edges()),
        split=clock.split(names, w.edges(), pod_creates(cluster, namespace)),
        wall=clock.last_succeeded(names) - start,
        task_instances=w.runs * w.tasks,
        writes={r: after.get(r, 0) - before.get(r, 0) for r in set(after) | set(before)},
        events=events,
        cpu=sum(cpus),
        replica_cpu=cpus,
        run_queue=run_queue,
        measured=measured,
        rss=rss,
        load=load,
        load_end=os.getloadavg()[0],
        template=pods[0] if pods else None,
        samples=samples,
        counters=dict(counters),
        replica_counters=replica_counters,
        requests={k: v for k, v in requests.items() if v},
        machine=machine,
        apiserver=sums,
        running_only=run_clock.running_only,
    )


# ------------------------------------------------------------------------- the null orchestrator


def null_pod(template: dict[str, Any], name: str, run: str, task: str) -> dict[str, Any]:
    """Zonda's pod as it was created (spec, labels but ours, annotations), under a new name."""
    meta = template["metadata"]
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if not k.startswith("zonda.dev/")}
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if not k.startswith("zonda.dev/")}
    spec = {k: v for k, v in template["spec"].items() if k != "nodeName"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": {**labels, "bench/run": run},
            "annotations": {**annotations, "bench/task": task},
        },
        "spec": spec,
    }


async def run_null(cluster: Cluster, api: Api, w: Workload, template: dict[str, Any]) -> Result:
    namespace = f"null-{w.name}-{int(time.time()) % 100000}"
    await api.request("POST", "/api/v1/namespaces", {"metadata": {"name": namespace}})
    clock = PodClock()
    ready = asyncio.Event()
    watcher = asyncio.create_task(api.watch(f"/api/v1/namespaces/{namespace}/pods", clock.on_event, ready))
    await ready.wait()
    load = os.getloadavg()[0]
    loop = asyncio.get_running_loop()
    path = f"/api/v1/namespaces/{namespace}/pods"

    async def launch(run: str, task: str) -> asyncio.Future[None]:
        name = f"{run}-{task}"
        done: asyncio.Future[None] = loop.create_future()
        clock.waiters[name] = done
        await api.request("POST", path, null_pod(template, name, run, task))
        return done

    async def one(run: str) -> None:
        if w.fanout:
            await (await launch(run, "root"))
            await asyncio.gather(*(await asyncio.gather(*(launch(run, f"f{i}") for i in range(w.fanout)))))
            await (await launch(run, "join"))
            return
        for i in range(w.chain):
            await (await launch(run, f"c{i}"))

    runs = [f"r{i}" for i in range(w.runs)]
    machine_before, sums_before = machine_cpu(cluster), apiserver_sums(cluster)
    start = time.monotonic()
    await asyncio.gather(*(one(run) for run in runs))
    machine, sums = diff(machine_cpu(cluster), machine_before), diff(apiserver_sums(cluster), sums_before)
    wall = clock.last_succeeded(runs) - start
    watcher.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await watcher
    return Result(
        gaps=clock.gaps(runs, w.edges()), step_gaps=clock.gaps_by_step(runs, w.edges()),
        split=clock.split(runs, w.edges(), pod_creates(cluster, namespace)),
        wall=wall, task_instances=w.runs * w.tasks, load=load,
        load_end=os.getloadavg()[0], machine=machine, apiserver=sums,
    )  # fmt: skip


async def burst(api: Api, template: dict[str, Any], count: int, parallel: int = 32) -> tuple[float, float]:
    """The ceiling: `count` independent pods created `parallel` at a time; (pods/s, load)."""
    namespace = f"burst-{int(time.time()) % 100000}"
    await api.request("POST", "/api/v1/namespaces", {"metadata": {"name": namespace}})
    clock = PodClock()
    ready = asyncio.Event()
    watcher = asyncio.create_task(api.watch(f"/api/v1/namespaces/{namespace}/pods", clock.on_event, ready))
    await ready.wait()
    load = os.getloadavg()[0]
    gate = asyncio.Semaphore(parallel)
    loop = asyncio.get_running_loop()
    waiters = []

    async def create(i: int) -> None:
        async with gate:
            name = f"b-{i}"
            clock.waiters[name] = done = loop.create_future()
            waiters.append(done)
            pod = null_pod(template, name, "b", str(i))
            await api.request("POST", f"/api/v1/namespaces/{namespace}/pods", pod)

    start = time.monotonic()
    await asyncio.gather(*(create(i) for i in range(count)))
    await asyncio.gather(*waiters)
    wall = max(clock.succeeded.values()) - start
    watcher.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await watcher
    return count / wall, load


async def write_costs(
    cluster: Cluster,
    api: Api,
    samples: dict[str, dict[str, Any]],
    template: dict[str, Any],
    count: int,
    tree: str = "",
) -> None:
    """What each kind of Zonda's writes costs the apiserver and etcd, alone: `count` of each (8 at a
    time; the status PUTs on 8 objects, each its own resourceVersion chain) with one watch of DagRuns
    and one of DAGs open in the namespace (the controller's followers), no controller. The CPU of
    kube-apiserver and etcd per write, less what they spend idle for as long. A DagRun status PUT is
    the finished run's whole status (a 20-task chain's); a pod create is counted until it Succeeded
    (the scheduler's binding and kwok's status writes included: what the null orchestrator's pod costs)."""
    namespace = f"costs-{int(time.time()) % 100000}"
    await api.request("POST", "/api/v1/namespaces", {"metadata": {"name": namespace}})
    ready_runs, ready_dags = asyncio.Event(), asyncio.Event()
    base = f"{CUSTOM}/namespaces/{namespace}"
    watchers = [
        asyncio.create_task(api.watch(f"{base}/dagruns", lambda *_: None, ready_runs)),
        asyncio.create_task(api.watch(f"{base}/dags", lambda *_: None, ready_dags)),
    ]
    await ready_runs.wait()
    await ready_dags.wait()
    parallel = 8
    dag_name = samples["dag"]["metadata"]["name"]
    dags, runs = [], []
    for i in range(parallel):
        body = chain_dag(f"{dag_name}-{i}", 20)
        dags.append(await api.request("POST", f"{base}/dags", body))
        run = {k: samples["dagrun"][k] for k in ("apiVersion", "kind", "spec")}
        run["metadata"] = {
            "name": f"run-{i}",
            "namespace": namespace,
            "labels": samples["dagrun"]["metadata"].get("labels", {}),
        }
        run["spec"] = {**run["spec"], "dagName": f"{dag_name}-{i}"}
        runs.append(await api.request("POST", f"{base}/dagruns", run))
    names = ("kube-apiserver", "etcd")

    async def idle(seconds: float) -> dict[str, float]:
        before = machine_cpu(cluster)
        await asyncio.sleep(seconds)
        return {k: v / seconds for k, v in diff(machine_cpu(cluster), before).items()}

    idle_rate = await idle(5.0)

    def stamp(n: int) -> str:
        return (datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=n)).strftime("%Y-%m-%dT%H:%M:%SZ")

    async def status_puts(
        kind: str, objects: list[dict[str, Any]], status: dict[str, Any], path: str
    ) -> None:
        async def chain(obj: dict[str, Any], k: int) -> None:
            version = obj["metadata"]["resourceVersion"]
            for n in range(count // parallel):
                conditions = [dict(c) for c in status.get("conditions") or []] or [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "R",
                        "message": "",
                        "lastTransitionTime": "",
                    }
                ]
                conditions[0]["lastTransitionTime"] = stamp(n * parallel + k)  # a change each time
                body = {**{key: obj[key] for key in ("apiVersion", "kind")}, "metadata": {
                    "name": obj["metadata"]["name"], "namespace": namespace, "resourceVersion": version,
                }, "status": {**status, "conditions": conditions}}  # fmt: skip
                version = (await api.request("PUT", f"{base}/{path}/{obj['metadata']['name']}/status", body))[
                    "metadata"
                ]["resourceVersion"]

        await asyncio.gather(*(chain(obj, k) for k, obj in enumerate(objects)))

    async def events() -> None:
        event = {k: v for k, v in samples["event"].items() if k not in ("metadata",)}
        gate = asyncio.Semaphore(parallel)

        async def one(n: int) -> None:
            async with gate:
                body = {**event, "metadata": {"name": f"e-{n}", "namespace": namespace}}
                body["regarding"] = {**(event.get("regarding") or {}), "namespace": namespace}
                await api.request("POST", f"/apis/events.k8s.io/v1/namespaces/{namespace}/events", body)

        await asyncio.gather(*(one(n) for n in range(count)))

    async def pods() -> None:
        clock, ready = PodClock(), asyncio.Event()
        watcher = asyncio.create_task(
            api.watch(f"/api/v1/namespaces/{namespace}/pods", clock.on_event, ready)
        )
        await ready.wait()
        gate, loop, waiters = asyncio.Semaphore(parallel), asyncio.get_running_loop(), []

        async def one(n: int) -> None:
            async with gate:
                name = f"p-{n}"
                clock.waiters[name] = done = loop.create_future()
                waiters.append(done)
                await api.request(
                    "POST", f"/api/v1/namespaces/{namespace}/pods", null_pod(template, name, "p", str(n))
                )

        await asyncio.gather(*(one(n) for n in range(count)))
        await asyncio.gather(*waiters)
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await watcher

    dagrun_status = samples["dagrun"].get("status") or {}
    kinds = {
        f"DagRun status PUT ({len(json.dumps(dagrun_status)):,} B)": status_puts(
            "dagrun", runs, dagrun_status, "dagruns"
        ),
        f"DAG status PUT ({len(json.dumps(samples['dag'].get('status') or {})):,} B)": status_puts(
            "dag", dags, samples["dag"].get("status") or {}, "dags"
        ),
        "Event POST": events(),
        "pod create, until Succeeded": pods(),
    }
    for label, work in kinds.items():
        before, start = machine_cpu(cluster), time.monotonic()
        await work
        wall = time.monotonic() - start
        spent = diff(machine_cpu(cluster), before)
        row = {
            "write_cost": label,
            "tree": tree,
            "count": count,
            "wall_s": round(wall, 2),
            "load": round(os.getloadavg()[0], 2),
        }
        row |= {
            f"{name}_ms": round((spent.get(name, 0) - idle_rate.get(name, 0) * wall) * 1000 / count, 2)
            for name in (*names, "kube-scheduler", "kwok", "bench")
        }
        print(json.dumps(row), flush=True)
    for task in watchers:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
    await api.request("DELETE", f"/api/v1/namespaces/{namespace}")


# ------------------------------------------------------------------------------------ reporting


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def by_step(step_gaps: list[list[float]]) -> list[int] | None:
    """Each step's gap p99 (ms, whole), for a workload of more than one run (else None)."""
    if not step_gaps or max(len(gaps) for gaps in step_gaps) < 2:
        return None
    return [round(percentile(gaps, 0.99)) if gaps else -1 for gaps in step_gaps]


def split_ms(split: dict[str, list[float]]) -> dict[str, list[float]] | None:
    """Each part of the gap (`PodClock.split`): [p50, p99] ms."""
    if not split.get("react"):
        return None
    return {
        part: [round(statistics.median(v), 1), round(percentile(v, 0.99), 1)]
        for part, v in split.items()
        if v
    }


def summarize(label: str, w: Workload, r: Result, null: Result | None) -> dict[str, Any]:
    gaps = r.gaps or [float("nan")]
    own = sum(r.writes.get(k, 0) for k in CONTROLLER_RESOURCES)
    row: dict[str, Any] = {
        "tree": label,
        "workload": w.name,
        "load": round(r.load, 2),
        "load_end": round(r.load_end, 2),
        "gap_p50_ms": round(statistics.median(gaps), 1),
        "gap_p99_ms": round(percentile(gaps, 0.99), 1),
        "edges": len(r.gaps),
        "gap_p99_by_step_ms": by_step(r.step_gaps),
        "gap_split_ms": split_ms(r.split),
        "ti_per_s": round(r.task_instances / r.wall, 1),
        "writes_per_ti": round((own + r.events) / r.task_instances, 2),
        "writes_detail": {
            k: round(v / r.task_instances, 2)
            for k, v in sorted(r.writes.items())
            if v and k in CONTROLLER_RESOURCES
        }
        | {"events": round(r.events / r.task_instances, 2)},
        "cpu_ms_per_ti": round(r.cpu * 1000 / r.task_instances, 1),
        # DagRun writes whose only news was task instances running (seen by the bench's watch)
        "running_only_writes": r.running_only,
        "replicas": len(r.replica_cpu),
        "replica_cpu_ms_per_ti": [round(c * 1000 / r.task_instances, 1) for c in r.replica_cpu],
        # of the measured wall: the controller on a CPU, and runnable but waiting for one
        "cpu_share": round(r.cpu / r.measured, 2) if r.measured else None,
        "run_queue_share": round(r.run_queue / r.measured, 2) if r.measured else None,
        "rss_mib": round(r.rss / 2**20, 1),
        "controller_counters": r.counters,
        # per replica: passes by kind, API errors (Conflicts) by kind
        "replica_counters": [{_short(k): v for k, v in sorted(c.items()) if v} for c in r.replica_counters]
        if len(r.replica_counters) > 1
        else None,
        # writes (and Conflicts) per task instance by resource, verb, code, from the apiserver
        "requests_per_ti": {
            k: round(v / r.task_instances, 3)
            for k, v in sorted(r.requests.items())
            if k.split(" ")[1] in WRITE_VERBS or k.endswith(" 409")
        },
        "reads_per_ti": {
            k: round(v / r.task_instances, 3)
            for k, v in sorted(r.requests.items())
            if k.split(" ")[1] in ("GET", "LIST")
        },
    }
    row |= per_ti_machine(r)
    if null is not None and null.gaps:
        row["null_gap_p50_ms"] = round(statistics.median(null.gaps), 1)
        row["null_gap_p99_ms"] = round(percentile(null.gaps, 0.99), 1)
        row["null_gap_p99_by_step_ms"] = by_step(null.step_gaps)
        row["null_gap_split_ms"] = split_ms(null.split)
        row["null_ti_per_s"] = round(null.task_instances / null.wall, 1)
        row["ratio_throughput"] = round((r.task_instances / r.wall) / (null.task_instances / null.wall), 2)
        row["null_load"] = round(null.load, 2)
    print(json.dumps(row), flush=True)
    return row


def per_ti_machine(r: Result) -> dict[str, Any]:
    """CPU ms per task instance by process, and the apiserver's time (ms), request bytes and watch
    bytes sent (KB) per task instance by what (only the larger ones)."""
    n = r.task_instances
    apiserver = {
        metric: {what: v for (m, what), v in r.apiserver.items() if m == metric}
        for metric in {m for m, _ in r.apiserver}
    }
    top = sorted(apiserver.get("apiserver_request_duration_seconds_sum", {}).items(), key=lambda kv: -kv[1])
    return {
        "machine_cpu_ms_per_ti": {k: round(v * 1000 / n, 1) for k, v in sorted(r.machine.items())},
        "apiserver_ms_per_ti": {k: round(v * 1000 / n, 2) for k, v in top if v * 1000 / n >= 0.05},
        "request_kb_per_ti": {
            k: round(v / 1024 / n, 2)
            for k, v in sorted(apiserver.get("apiserver_request_body_size_bytes_sum", {}).items())
            if v / 1024 / n >= 0.01
        },
        "watch_events_per_ti": {
            k: round(v / n, 2) for k, v in sorted(apiserver.get("apiserver_watch_events_total", {}).items())
        },
        "watch_kb_per_ti": {
            k: round(v / 1024 / n, 1)
            for k, v in sorted(apiserver.get("apiserver_watch_events_sizes_sum", {}).items())
        },
    }


def _short(counter: str) -> str:
    """`zonda_reconciles_total{kind="pool"}` -> `reconciles pool`."""
    name, _, labels = counter.partition("{")
    values = ",".join(re.findall(r'"([^"]*)"', labels))
    return f"{name.removeprefix('zonda_').removesuffix('_total')} {values}"


def top_frames(path: Path, limit: int = 35) -> None:
    """The frames with the most samples, inclusive (each counted once per stack)."""
    inclusive: Counter[str] = Counter()
    leaf: Counter[str] = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        n = int(count)
        total += n
        frames = stack.split(";")
        for frame in set(frames):
            inclusive[frame] += n
        leaf[frames[-1]] += n
    print(f"\n--- {path.name}: {total} samples; inclusive top {limit}")
    for frame, n in inclusive.most_common(limit):
        print(f"  {n / total * 100:5.1f}%  {frame[:150]}")
    print("  leaf top 15:")
    for frame, n in leaf.most_common(15):
        print(f"  {n / total * 100:5.1f}%  {frame[:150]}")


async def main_async(
    args: argparse.Namespace, cluster: Cluster, tmp: Path, trees: list[tuple[str, Path]], profile: Path | None
) -> None:
    api = Api(cluster)
    rows = []
    counts = [int(n) for n in args.replicas.split(",")]
    try:
        for round_ in range(args.rounds):
            for index, spec in enumerate(args.workloads.split(",")):
                name, _, only = spec.partition("@")  # `c100@new`: that tree only
                w = workload(name)
                chosen = [  # trees side by side at each replica count: base-r1, new-r1, base-r2, new-r2
                    (label if len(counts) == 1 else f"{label}-r{n}", tree, n)
                    for n in counts
                    for label, tree in trees
                    if not only or label == only
                ]
                order = chosen if (index + round_) % 2 == 0 else list(reversed(chosen))
                print(f"--- {w.name}, round {round_ + 1}: load {os.getloadavg()} at the start", flush=True)
                results = {}
                for label, tree, replicas in order:
                    results[label] = await run_zonda(
                        cluster, api, tree, w, label, tmp, profile, args.workers, args.awaits, replicas
                    )
                template = next(r.template for r in results.values() if r.template)
                null = await run_null(cluster, api, w, template)
                print(f"--- {w.name}, round {round_ + 1}: load {os.getloadavg()} at the end", flush=True)
                null_row = {"tree": "null", "workload": w.name, "load": round(null.load, 2)}
                null_row |= {"load_end": round(null.load_end, 2)} | per_ti_machine(null)
                print(json.dumps(null_row), flush=True)
                for label, _, _ in chosen:
                    rows.append(summarize(label, w, results[label], null))
                    if profile:
                        top_frames(profile / f"{label}-{w.name}.txt")
                    if profile and args.awaits:
                        awaits = profile / f"{label}-{w.name}.awaits.txt"
                        top_frames(awaits)
                        print(awaits.with_suffix(".txt.lag").read_text(), flush=True)
        if args.write_costs and rows:
            samples = next(
                r.samples for r in results.values() if r.samples.keys() >= {"dagrun", "dag", "event"}
            )
            for label, tree in trees:  # each under its own CRDs
                apply_crds(cluster, tree)
                await write_costs(cluster, api, samples, template, args.write_costs, label)
        if args.burst and rows:
            rate, load = await burst(api, template, args.burst)
            row = {"burst_pods": args.burst, "pods_per_s": round(rate, 1), "load": round(load, 2)}
            print(json.dumps(row), flush=True)
    finally:
        await api.close()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trees", default=f"this={Path(__file__).resolve().parents[1]}")
    parser.add_argument("--workloads", default="w1,w3")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--profile", default=None)
    parser.add_argument("--burst", type=int, default=0)
    parser.add_argument(
        "--write-costs", type=int, default=0,
        help="after the rounds, N of each of Zonda's kinds of writes alone: apiserver and etcd CPU per write",
    )  # fmt: skip
    parser.add_argument(
        "--replicas", default="1", help="controller replicas, e.g. 1,2,4 (N > 1: each with --shards N)"
    )
    parser.add_argument(
        "--awaits",
        action="store_true",
        help="with --profile: also sample what each coroutine awaits (bench/await_sampler.py)",
    )
    parser.add_argument(
        "--workers", type=int, default=None, help="the controllers' --workers (default: each tree's)"
    )
    parser.add_argument("--logs", default=None, help="keep the controllers' logs in this directory")
    args = parser.parse_args()
    trees = [(part.split("=", 1)[0], Path(part.split("=", 1)[1]).resolve()) for part in args.trees.split(",")]
    profile = Path(args.profile).resolve() if args.profile else None
    if profile:
        profile.mkdir(parents=True, exist_ok=True)
    with connect_cluster("local") as cluster, tempfile.TemporaryDirectory() as tmp:
        logs = Path(args.logs).resolve() if args.logs else Path(tmp)
        logs.mkdir(parents=True, exist_ok=True)
        asyncio.run(main_async(args, cluster, logs, trees, profile))
    return 0


if __name__ == "__main__":
    sys.exit(main())
