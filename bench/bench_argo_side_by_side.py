"""Benchmark: Zonda's controller and Argo Workflows' workflow-controller (v4.0.5, built from its Go module
by bench/setup_argo_side_by_side.sh) on the same local control plane and kwok pods, back to back.

    bench/setup_argo_side_by_side.sh      # once: workflow-controller and Argo's CRDs in ~/.cache/zonda/argo
    python bench/bench_argo_side_by_side.py [--workloads w1,w2,w3] [--rounds 2]
                                            [--argo default,tuned,fastest] [--profile DIR]

One local control plane (kube-apiserver + etcd + scheduler + kwok, controller/devtools/devcluster.py)
with Zonda's and Argo's CRDs. For each round and workload, each system in turn (the order rotates
every workload) gets a fresh namespace and its own controller process, then the runs are created at
once: Zonda's with the Kubernetes executor (bench/bench_scale.py's `run_zonda`: a DAG and DagRuns),
Argo's as Workflows with one DAG template whose tasks are the same containers. Every task pod carries
`kwok.zonda.dev/duration-ms: 100`, so kwok runs it 100 ms. Workloads (bench/bench_scale.py): `w1` a
20-task chain, `w2` root -> 50 -> join, `w3` five `w1` runs at once.

Argo runs in three configurations (`ARGO_CONFIGS`; what each setting does is in Argo's
docs/environment-variables.md, docs/scaling.md and workflow/controller/{rate_limiters,operator}.go):
- `default`: as its manifests ship it (leader election on, 32 workflow workers, client QPS 20 / burst
  30, DEFAULT_REQUEUE_TIME 10s: a pod change requeues its Workflow 10 s later);
- `tuned`: what its docs advise for short tasks: DEFAULT_REQUEUE_TIME=1s (rate_limiters.go: "We need to
  rate limit a minimum 1s, otherwise informers are unlikely to be up to date"), --qps=50 --burst=75
  (docs/scaling.md's example);
- `fastest`: every knob towards latency: DEFAULT_REQUEUE_TIME=100ms (of 0s, 10ms and 100ms, tried with
  `--argo fastest@0s,fastest@10ms,fastest@100ms`, 100ms was the fastest on W1 and no slower on W3:
  shorter requeues add passes that find nothing new), INFORMER_WRITE_BACK=true (4.x sleeps
  1 s after each Workflow update when it is off, operator.go's persistUpdates), --qps=1000
  --burst=2000, --workflow-workers=64, --pod-cleanup-workers=16, leader election off, --loglevel=warn
  (its info log is several lines per node and pass).

Printed per workload and system, as JSON lines then a table: upstream pod Succeeded -> downstream pod
ADDED (both seen by the bench's own pod watch) p50 / p95 ms, wall (runs created -> last pod Succeeded),
API writes per task instance by the controller (apiserver_request_total of what it writes, plus its
Events counted from the apiserver), the controller's CPU ms per task instance, the load average at its
start; and Argo / Zonda ratios (> 1: Zonda ahead).

Argo 4.x has reported security flaws, and its workflow-controller binds :6060 on every interface: the
bench re-runs itself in a network namespace of its own with only loopback (`unshare --net`, root), so
the whole control plane, both controllers and the bench reach only each other. `--no-netns` skips that.

It prints numbers; it asserts nothing (performance is measured here, not in tests).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import private_network, processes
from bench.bench_controller import api_writes, percentile
from bench.bench_scale import (
    CONTROLLER_RESOURCES,
    POD_MS,
    Api,
    PodClock,
    Result,
    Workload,
    cpu_seconds,
    run_zonda,
    workload,
)
from controller.devtools.devcluster import Cluster, connect_cluster

ARGO_VERSION = os.environ.get("ARGO_VERSION", "v4.0.5")
ARGO_DIR = Path(os.environ.get("ARGO_DIR", Path.home() / f".cache/zonda/argo/{ARGO_VERSION}"))
REPO = Path(__file__).resolve().parents[1]
#: What Argo's controller writes here (the bench creates the Workflows; the scheduler binds pods, kwok
#: writes their status): the Workflows (their status is in the object), pods, and its own CRs.
ARGO_RESOURCES = ("workflows", "pods", "workflowtaskresults", "workflowtasksets", "workflowartifactgctasks")


@dataclass(frozen=True)
class ArgoConfig:
    env: dict[str, str]
    args: tuple[str, ...] = ()


ARGO_CONFIGS = {
    "default": ArgoConfig(env={"LEADER_ELECTION_IDENTITY": "bench"}),
    "tuned": ArgoConfig(
        env={"LEADER_ELECTION_IDENTITY": "bench", "DEFAULT_REQUEUE_TIME": "1s"},
        args=("--qps=50", "--burst=75"),
    ),
    "fastest": ArgoConfig(
        env={
            "LEADER_ELECTION_DISABLE": "true",
            "DEFAULT_REQUEUE_TIME": "100ms",
            "INFORMER_WRITE_BACK": "true",
        },
        args=(
            "--qps=1000",
            "--burst=2000",
            "--workflow-workers=64",
            "--pod-cleanup-workers=16",
            "--loglevel=warn",
        ),
    ),
}


# ------------------------------------------------------------------------------------------- Argo


def argo_config(label: str) -> ArgoConfig:
    """`fastest`, or `fastest@100ms`: that configuration with another DEFAULT_REQUEUE_TIME."""
    name, _, requeue = label.partition("@")
    config = ARGO_CONFIGS[name]
    return ArgoConfig(config.env | {"DEFAULT_REQUEUE_TIME": requeue}, config.args) if requeue else config


def install_argo_crds(cluster: Cluster) -> None:
    paths = sorted((ARGO_DIR / "crds").glob("argoproj.io_*.yaml"))
    if not paths:
        raise SystemExit(f"no Argo CRDs in {ARGO_DIR / 'crds'}: run bench/setup_argo_side_by_side.sh")
    for path in paths:  # the full CRDs need server-side apply (their README)
        cluster.kubectl("apply", "--server-side", "-f", str(path))
    names = [
        f"crd/{path.name.removeprefix('argoproj.io_').removesuffix('.yaml')}.argoproj.io" for path in paths
    ]
    cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", *names)
    deadline = time.monotonic() + 60
    while cluster.kubectl("get", "workflows", "-A", check=False).returncode != 0:
        if time.monotonic() > deadline:
            raise SystemExit("Argo's Workflow resource is established but not served after 60 s")
        time.sleep(0.2)


def argo_workflow(name: str, w: Workload) -> dict[str, Any]:
    """One Workflow: a DAG template of `w`'s tasks, each the same 100 ms kwok container."""
    if w.fanout:
        tasks = [{"name": "root", "template": "t"}]
        tasks += [{"name": f"f{i}", "template": "t", "depends": "root"} for i in range(w.fanout)]
        tasks.append(
            {"name": "join", "template": "t", "depends": " && ".join(f"f{i}" for i in range(w.fanout))}
        )
    else:
        tasks = [{"name": "c0", "template": "t"}]
        tasks += [{"name": f"c{i}", "template": "t", "depends": f"c{i - 1}"} for i in range(1, w.chain)]
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": {"name": name},
        "spec": {
            "entrypoint": "main",
            "parallelism": 256,
            "templates": [
                {"name": "main", "dag": {"tasks": tasks}},
                {
                    "name": "t",
                    "metadata": {"annotations": {"kwok.zonda.dev/duration-ms": str(POD_MS)}},
                    "container": {"image": "busybox", "command": ["true"]},
                },
            ],
        },
    }


def tag_argo_pod(pod: dict[str, Any]) -> dict[str, Any]:
    """Argo's pod under the bench's own keys (run label, task annotation), for `PodClock`: its Workflow's
    label, and its node name `<workflow>.<task>`."""
    meta = pod["metadata"]
    labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
    run = labels.get("workflows.argoproj.io/workflow", "")
    task = annotations.get("workflows.argoproj.io/node-name", "").rpartition(".")[2]
    meta["labels"] = {**labels, "bench/run": run}
    meta["annotations"] = {**annotations, "bench/task": task}
    return pod


@dataclass
class WorkflowPhases:
    runs: int
    phase: dict[str, str | None] = field(default_factory=dict)
    finished: asyncio.Event = field(default_factory=asyncio.Event)

    def on_event(self, type: str, wf: dict[str, Any], now: float) -> None:
        self.phase[wf["metadata"]["name"]] = (wf.get("status") or {}).get("phase")
        if sum(1 for p in self.phase.values() if p in ("Succeeded", "Failed", "Error")) >= self.runs:
            self.finished.set()


@contextlib.contextmanager
def argo_controller(cluster: Cluster, config: ArgoConfig, namespace: str, log: Path) -> Iterator[int]:
    binary = ARGO_DIR / "bin" / "workflow-controller"
    if not binary.exists():
        raise SystemExit(f"no {binary}: run bench/setup_argo_side_by_side.sh")
    args = [
        str(binary), "--kubeconfig", str(cluster.kubeconfig), "--namespace", namespace, "--namespaced",
        "--managed-namespace", namespace, *config.args,
    ]  # fmt: skip
    env = {k: v for k, v in cluster.env().items() if not k.startswith("ARGO")} | config.env
    ready = functools.partial(started, config)
    with processes.running(
        args, log, ready=ready, what="workflow-controller", env=env, cwd=log.parent
    ) as process:
        yield process.pid


def started(config: ArgoConfig, logged: str) -> bool:
    """Its last start-up line; at --loglevel=warn it logs none, so its metrics server (self-signed TLS)."""
    if "--loglevel=warn" not in config.args:
        return "Current Worker Numbers" in logged
    import ssl
    import urllib.request

    try:
        context = ssl._create_unverified_context()
        urllib.request.urlopen("https://127.0.0.1:9090/metrics", timeout=1, context=context).read()
    except OSError:
        return False
    return True


async def argo_events(api: Api, namespace: str) -> int:
    """Its Events' writes: client-go's recorder patches a repeated Event's count instead of posting it."""
    items = (await api.request("GET", f"/api/v1/namespaces/{namespace}/events"))["items"]
    ours = [e for e in items if (e.get("source") or {}).get("component") == "workflow-controller"]
    return sum(max(1, e.get("count") or 1) for e in ours)


async def wait_default_service_account(api: Api, namespace: str) -> None:
    """The controller-manager makes it; Argo's pods name it."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        items = (await api.request("GET", f"/api/v1/namespaces/{namespace}/serviceaccounts"))["items"]
        if any(sa["metadata"]["name"] == "default" for sa in items):
            return
        await asyncio.sleep(0.1)
    raise RuntimeError(f"no default ServiceAccount in {namespace} after 60 s")


async def run_argo(cluster: Cluster, api: Api, w: Workload, label: str, tmp: Path) -> Result:
    namespace = f"a-{label.replace('@', '-')}-{w.name}-{int(time.time()) % 100000}"
    await api.request("POST", "/api/v1/namespaces", {"metadata": {"name": namespace}})
    configmap = {"metadata": {"name": "workflow-controller-configmap"}, "data": {}}
    await api.request("POST", f"/api/v1/namespaces/{namespace}/configmaps", configmap)
    await wait_default_service_account(api, namespace)
    clock = PodClock()
    ready = asyncio.Event()
    path = f"/api/v1/namespaces/{namespace}/pods"
    watcher = asyncio.create_task(
        api.watch(path, lambda t, p, n: clock.on_event(t, tag_argo_pod(p), n), ready)
    )
    phases, phases_ready = WorkflowPhases(w.runs), asyncio.Event()
    wf_path = f"/apis/argoproj.io/v1alpha1/namespaces/{namespace}/workflows"
    wf_watcher = asyncio.create_task(api.watch(wf_path, phases.on_event, phases_ready))
    await ready.wait()
    await phases_ready.wait()
    load = os.getloadavg()[0]
    log = tmp / f"argo-{label}-{w.name}.log"
    with argo_controller(cluster, argo_config(label), namespace, log) as pid:
        await asyncio.sleep(2.0)  # its informers' first sync is not part of the measurement
        before = api_writes(cluster)
        cpu_before = cpu_seconds(pid)
        start = time.monotonic()
        names = [f"bench-{w.name}-{i}" for i in range(w.runs)]
        await asyncio.gather(*(api.request("POST", wf_path, argo_workflow(name, w)) for name in names))
        try:
            await asyncio.wait_for(
                phases.finished.wait(), timeout=600
            )  # as shipped, a 20-task chain takes ~200 s
        except TimeoutError:
            print(f"  !! argo-{label} {w.name}: workflows not finished: {phases.phase}", flush=True)
        cpu = cpu_seconds(pid) - cpu_before
        measured = time.monotonic() - start
        await asyncio.sleep(1.5)  # Events and the completed-pod labels come after the last update
        after = api_writes(cluster)
    events = await argo_events(api, namespace)
    for task in (watcher, wf_watcher):
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
    failed = {n: p for n, p in phases.phase.items() if p != "Succeeded"}
    if failed:
        print(f"  !! argo-{label} {w.name}: not Succeeded: {failed}", flush=True)
    writes = {r: after.get(r, 0) - before.get(r, 0) for r in set(after) | set(before)}
    writes["workflows"] = writes.get("workflows", 0) - w.runs  # the bench's own creates
    return Result(
        gaps=clock.gaps(names, w.edges()),
        wall=clock.last_succeeded(names) - start,
        task_instances=w.runs * w.tasks,
        writes=writes,
        events=events,
        cpu=cpu,
        measured=measured,
        load=load,
        template={"metadata": {"namespace": namespace}},
    )


# ------------------------------------------------------------------------------------------ report


@dataclass
class PodLives:
    """Every pod of the cluster, from the bench's one cluster-wide watch: when it was first seen, bound
    to a node (the scheduler), Running and Succeeded (kwok's stages). Splits a wall into runs created ->
    first pod, the gaps, and the pods' own lives (ADDED -> Succeeded: the same work for both systems'
    pods, done by the scheduler and kwok)."""

    added: dict[tuple[str, str], float] = field(default_factory=dict)
    bound: dict[tuple[str, str], float] = field(default_factory=dict)
    running: dict[tuple[str, str], float] = field(default_factory=dict)
    succeeded: dict[tuple[str, str], float] = field(default_factory=dict)

    def on_event(self, type: str, pod: dict[str, Any], now: float) -> None:
        key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
        self.added.setdefault(key, now)
        if (pod.get("spec") or {}).get("nodeName"):
            self.bound.setdefault(key, now)
        phase = (pod.get("status") or {}).get("phase")
        if phase in ("Running", "Succeeded"):
            self.running.setdefault(key, now)
        if phase == "Succeeded":
            self.succeeded.setdefault(key, now)

    def split(self, namespace: str, wall: float) -> dict[str, float]:
        ours = [key for key in self.succeeded if key[0] == namespace and key in self.added]
        if not ours:
            return {}

        def p50(since: dict[tuple[str, str], float], until: dict[tuple[str, str], float]) -> float:
            spans = [(until[key] - since[key]) * 1000 for key in ours if key in since and key in until]
            return round(statistics.median(spans), 1) if spans else float("nan")

        first = min(self.added[key] for key in ours)
        last = max(self.succeeded[key] for key in ours)
        return {
            "pod_life_p50_ms": p50(self.added, self.succeeded),
            "bind_p50_ms": p50(self.added, self.bound),
            "to_running_p50_ms": p50(self.bound, self.running),
            "running_p50_ms": p50(self.running, self.succeeded),
            "to_first_pod_s": round(wall - (last - first), 2),
        }


def row(system: str, w: Workload, r: Result, resources: tuple[str, ...], lives: PodLives) -> dict[str, Any]:
    gaps = r.gaps or [float("nan")]
    own = sum(r.writes.get(k, 0) for k in resources)
    out = {
        "system": system,
        "workload": w.name,
        "load": round(r.load, 2),
        "gap_p50_ms": round(statistics.median(gaps), 1),
        "gap_p95_ms": round(percentile(gaps, 0.95), 1),
        "edges": len(r.gaps),
        "wall_s": round(r.wall, 2),
        "writes_per_ti": round((own + r.events) / r.task_instances, 2),
        "writes_detail": {
            k: round(v / r.task_instances, 2) for k, v in sorted(r.writes.items()) if v and k in resources
        }
        | {"events": round(r.events / r.task_instances, 2)},
        "cpu_ms_per_ti": round(r.cpu * 1000 / r.task_instances, 1),
    }
    if r.template:  # a pod of the run (Zonda), or just its namespace (Argo)
        out |= lives.split(r.template["metadata"]["namespace"], r.wall)
    print(json.dumps(out), flush=True)
    return out


def table(rows: list[dict[str, Any]]) -> None:
    """Per round and workload: each system's figures, and Argo / Zonda for each (> 1: Zonda ahead)."""
    print(
        f"\n{'round':>5} {'workload':8} {'system':18} {'load':>5} {'gap p50':>9} {'gap p95':>9} {'wall':>7} "
        f"{'writes/ti':>9} {'cpu/ti':>7} {'pod life':>8} {'1st pod':>7}   Argo/Zonda: p50   p95  wall  writes"
    )
    for r in rows:
        zonda = next(
            z
            for z in rows
            if z["system"] == "zonda" and z["workload"] == r["workload"] and z["round"] == r["round"]
        )
        ratios = ""
        if r["system"] != "zonda":
            ratios = "  ".join(
                f"{r[k] / zonda[k]:5.2f}" if zonda[k] else "  -  "
                for k in ("gap_p50_ms", "gap_p95_ms", "wall_s", "writes_per_ti")
            )
        print(
            f"{r['round']:>5} {r['workload']:8} {r['system']:18} {r['load']:5.2f} {r['gap_p50_ms']:7.1f}ms "
            f"{r['gap_p95_ms']:7.1f}ms {r['wall_s']:6.2f}s {r['writes_per_ti']:9.2f} "
            f"{r['cpu_ms_per_ti']:5.1f}ms {r.get('pod_life_p50_ms', 0):6.0f}ms "
            f"{r.get('to_first_pod_s', 0):6.2f}s   {ratios}"
        )


async def main_async(args: argparse.Namespace, cluster: Cluster, tmp: Path) -> None:
    api = Api(cluster)
    rows: list[dict[str, Any]] = []
    profile = args.profile
    systems = ["zonda", *(f"argo-{c}" for c in args.argo.split(",") if c)]
    lives, lives_ready = PodLives(), asyncio.Event()
    lives_watch = asyncio.create_task(api.watch("/api/v1/pods", lives.on_event, lives_ready))
    await lives_ready.wait()
    try:
        for round_ in range(args.rounds):
            for index, name in enumerate(args.workloads.split(",")):
                w = workload(name)
                shift = (index + round_) % len(systems)
                for system in systems[shift:] + systems[:shift]:
                    print(f"# round {round_} {w.name} {system}: load {os.getloadavg()}", flush=True)
                    if system == "zonda":
                        result = await run_zonda(cluster, api, REPO, w, "zonda", tmp, profile)
                        out = row(system, w, result, CONTROLLER_RESOURCES, lives)
                    else:
                        result = await run_argo(cluster, api, w, system.removeprefix("argo-"), tmp)
                        out = row(system, w, result, ARGO_RESOURCES, lives)
                    rows.append(out | {"round": round_})
        order = {s: i for i, s in enumerate(systems)}
        rows.sort(key=lambda r: (r["round"], r["workload"], order[r["system"]]))
        table(rows)
    finally:
        lives_watch.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await lives_watch
        await api.close()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workloads", default="w1,w2,w3")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument(
        "--argo",
        default="default,tuned,fastest",
        help=f"of {', '.join(ARGO_CONFIGS)}; NAME@DURATION: that one with DEFAULT_REQUEUE_TIME=DURATION",
    )
    parser.add_argument("--profile", default=None, help="py-spy Zonda's controller into this directory")
    parser.add_argument("--no-netns", action="store_true", help="run where we are (not in a private netns)")
    args = parser.parse_args()
    unknown = {c.partition("@")[0] for c in args.argo.split(",") if c} - set(ARGO_CONFIGS)
    if unknown:
        raise SystemExit(f"unknown Argo configurations {sorted(unknown)}: of {sorted(ARGO_CONFIGS)}")
    if not args.no_netns and not private_network.inside():
        return private_network.rerun_inside()
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()}; Argo {ARGO_VERSION}", flush=True)
    if args.profile:
        args.profile = Path(args.profile).resolve()
        args.profile.mkdir(parents=True, exist_ok=True)
    with connect_cluster("local") as cluster, tempfile.TemporaryDirectory() as tmp:
        install_argo_crds(cluster)
        asyncio.run(main_async(args, cluster, Path(tmp)))
    print(f"load average after: {os.getloadavg()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
