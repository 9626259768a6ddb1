"""`zonda up`: Zonda's main job on a local control plane, from nothing.

In numbered steps, each printed with the ones that remain: build (or find cached) only the binaries
the executor needs (the local executor runs no pods: etcd, kube-apiserver and kubectl), start the
control plane and install the CRDs, start the controller and the triggerer, apply the example DAGs
(trigger the manual ones; the scheduled one gets its runs from the controller, on time), and show
`kubectl get dagruns` until the first runs succeed. It keeps showing new runs until Ctrl-C, then
stops everything it started: the controller, the triggerer, the local executor's task processes
(they run in their own process groups so a restarted controller can adopt them, so stopping the
controller alone leaves them running), and the control plane, whose work directory it removes so
a rerun starts clean. An up killed before it could stop (SIGKILL, a crash) leaves its pid and work
directory in `~/.cache/zonda/up.json`; the next up stops what it left and removes that directory
(`up_leftovers.py`).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from controller.devtools import realnode, task_rbac
from controller.devtools.control_plane_files import API_BINARIES, NODE_BINARIES, ClusterError, binaries_dir
from controller.devtools.devcluster import REPO_ROOT, Cluster, log, start_local_cluster
from controller.devtools.ports import free_port_near
from controller.devtools.up_leftovers import clean_after_previous_up, last_up_record, stop_task_processes
from zonda.resources.dagrun_models import manual_dagrun
from zonda.resources.states import FINISHED_RUN_STATES
from zonda.resources.wire import KUBECONFIG_STATE_DIR_EXTENSION
from zonda.schedules.scheduling import dagrun_name

EXAMPLES_DIR = REPO_ROOT / "examples" / "dags"
#: Where `zonda logs` finds the local executor's state dir: a kubeconfig context extension.
STATE_DIR_EXTENSION = KUBECONFIG_STATE_DIR_EXTENSION
STEPS = (
    "binaries",
    "control plane",
    "controller and triggerer",
    "example DAGs",
    "first runs",
)


def _step(number: int) -> None:
    rest = ", ".join(STEPS[number:])
    log(f"[{number}/{len(STEPS)}] {STEPS[number - 1]}" + (f" (then: {rest})" if rest else ""))


def _spawn(name: str, args: list[str], cluster: Cluster, workdir: Path) -> subprocess.Popen[bytes]:
    log_file = workdir / f"{name}.log"
    with log_file.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "controller.cli.main", *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=cluster.env(),
            cwd=REPO_ROOT,
            start_new_session=True,
        )


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _record_state_dir(kubeconfig: Path, state_dir: Path) -> None:
    """Name the local executor's state dir in the kubeconfig, where `zonda logs` looks for it."""
    config = yaml.safe_load(kubeconfig.read_text())
    for context in config["contexts"]:
        extension = {"name": STATE_DIR_EXTENSION, "extension": {"path": str(state_dir)}}
        context["context"]["extensions"] = [extension]
    kubeconfig.write_text(json.dumps(config, indent=2))


def runnable_dags(paths: Sequence[Path], images: Sequence[str], say: Callable[[str], None]) -> list[Path]:
    """The DAG files whose container tasks use only images loaded on the node; says why others are
    left out. No registry is reachable here, and a pod whose image cannot be pulled stays Pending."""

    def loaded(image: str) -> bool:
        short = image.removeprefix("docker.io/").removeprefix("library/")
        return image in images or any(i.removeprefix("docker.io/library/") == short for i in images)

    kept = []
    for path in paths:
        dag = yaml.safe_load(path.read_text()) if path.suffix in (".yaml", ".yml") else None
        tasks = (dag or {}).get("spec", {}).get("tasks", [])
        images_used = {(task.get("container") or {}).get("image") for task in tasks}
        missing = sorted(image for image in images_used if image and not loaded(image))
        if missing:
            say(
                f"left out {path.name}: its container tasks need {', '.join(missing)}, which no registry "
                "here can provide (the pod would stay Pending: there is no pending timeout yet)"
            )
        else:
            kept.append(path)
    return kept


def _example_path(example: str) -> Path:
    """An example by name (`example_bash`) from examples/dags, or a path to any DAG file."""
    path = Path(example)
    return path if path.suffix in (".yaml", ".yml") and path.exists() else EXAMPLES_DIR / f"{example}.yaml"


def _runs(cluster: Cluster) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads(cluster.kubectl("get", "dagruns", "-o", "json").stdout)["items"]
    return items


def _trigger_all(cluster: Cluster, dags: list[str]) -> list[str]:
    """A manual run of each DAG, as `zonda trigger` makes it, created with one kubectl call (no
    Python start-up per DAG: seconds on a loaded machine); the runs' names."""
    now = datetime.now(UTC)
    runs = [manual_dagrun(dagrun_name(dag, now, "manual"), "default", dag, now, {}) for dag in dags]
    if runs:
        cluster.kubectl(
            "create", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": runs})
        )
    return [run["metadata"]["name"] for run in runs]


def scheduled_run_line(run: dict[str, Any]) -> str:
    """One line saying when a scheduled run was due and when the controller created it."""
    spec = run["spec"]
    due = (spec.get("dataInterval") or {}).get("end", "?")
    return (
        f"{spec['dagName']}: scheduled run {run['metadata']['name']} due {due}, "
        f"created {run['metadata']['creationTimestamp']}"
    )


def first_runs_done(runs: list[dict[str, Any]], manual: list[str], scheduled_dags: list[str]) -> bool:
    """The triggered runs have finished and every scheduled DAG has a finished run."""
    states = {r["metadata"]["name"]: (r.get("status") or {}).get("state") for r in runs}
    if any(states.get(name) not in FINISHED_RUN_STATES for name in manual):
        return False
    finished_dags = {
        r["spec"]["dagName"]
        for r in runs
        if r["spec"].get("runType") == "scheduled"
        and (r.get("status") or {}).get("state") in FINISHED_RUN_STATES
    }
    return all(dag in finished_dags for dag in scheduled_dags)


@dataclass
class RunsScreen:
    """What `zonda up` shows while it runs: `kubectl get dagruns` when a run's state changes (not on
    every AGE tick), a line per new scheduled run with the time it was due, `kubectl get dags` once
    the first runs have finished."""

    cluster: Cluster
    manual: list[str]
    scheduled_dags: list[str]
    done: bool = False
    ok: bool = False
    states: dict[str, str | None] = field(default_factory=dict)
    _shown: list[tuple[str, str]] = field(default_factory=list)
    _seen_scheduled: set[str] = field(default_factory=set)

    def refresh(self) -> bool:
        """Print what changed; True the one time the first runs are found finished."""
        runs = _runs(self.cluster)
        for run in sorted(runs, key=lambda r: r["metadata"]["creationTimestamp"]):
            name = run["metadata"]["name"]
            if run["spec"].get("runType") == "scheduled" and name not in self._seen_scheduled:
                self._seen_scheduled.add(name)
                log(scheduled_run_line(run))
        self.states = {r["metadata"]["name"]: (r.get("status") or {}).get("state") for r in runs}
        shown = sorted((name, str(state)) for name, state in self.states.items())
        if shown != self._shown:
            table = self.cluster.kubectl("get", "dagruns").stdout
            print(f"$ kubectl get dagruns   # {time.strftime('%H:%M:%S')}\n{table}", flush=True)
            self._shown = shown
        if self.done or not first_runs_done(runs, self.manual, self.scheduled_dags):
            return False
        self.done = True
        self.ok = all(state == "success" for state in self.states.values() if state in FINISHED_RUN_STATES)
        print(f"$ kubectl get dags\n{self.cluster.kubectl('get', 'dags').stdout}", flush=True)
        return True


def _start_ui(
    children: list[subprocess.Popen[bytes]], cluster: Cluster, workdir: Path, state_dir: Path
) -> str:
    """Start `zonda ui` (port 8080 when free) and say where it is."""
    port = free_port_near(8080)
    kubeconfig = str(cluster.kubeconfig)
    args = ["ui", "--namespace", "default", "--kubeconfig", kubeconfig, "--state-dir", str(state_dir)]
    children.append(_spawn("ui", [*args, "--port", str(port)], cluster, workdir))
    url = f"http://127.0.0.1:{port}/dags"
    log(f"web UI started: {url}")
    return url


def main(
    *,
    executor: str = "local",
    examples: list[str],
    exit_when_done: bool = False,
    timeout: float = 300,
    real_node: bool = False,
) -> int:
    """`real_node`: task pods run as real containers on a kubelet node (controller/devtools/realnode.py)."""
    t0 = time.monotonic()
    executor = "kubernetes" if real_node else executor
    _step(1)
    needed = API_BINARIES if executor == "local" else (*API_BINARIES, *NODE_BINARIES)
    bin_dir = binaries_dir(needed, build=True)
    _step(2)
    record = last_up_record()
    if stale := clean_after_previous_up(record):
        log(f"stopped {len(stale)} process(es) a previous `zonda up` left running when it was killed")
    cluster = start_local_cluster(bin_dir=bin_dir, nodes=executor != "local", real_node=real_node)
    task_image: list[str] = []
    if cluster.real_node is not None:
        task_image = [
            "--task-image",
            next(i for i in cluster.real_node.images if "examples" in i),
            "--task-node-selector",
            json.dumps(dict([realnode.NODE_LABEL])),
            *task_rbac.grant_task_pods(cluster, "default"),
        ]
    assert cluster.workdir is not None
    workdir = cluster.workdir
    state_dir = workdir / "state"
    _record_state_dir(cluster.kubeconfig, state_dir)
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps({"pid": os.getpid(), "workdir": str(workdir)}))
    children: list[subprocess.Popen[bytes]] = []
    interrupted = False

    def on_signal(*_: object) -> None:
        nonlocal interrupted
        interrupted = True

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # SIGHUP: the terminal was closed
        signal.signal(sig, on_signal)
    try:
        _step(3)
        kubeconfig = str(cluster.kubeconfig)
        children.append(
            _spawn(
                "controller",
                [
                    *("controller", "--namespace", "default", "--executor", executor),
                    *("--state-dir", str(state_dir), "--kubeconfig", kubeconfig),
                    *task_image,
                ],
                cluster,
                workdir,
            )
        )
        children.append(
            _spawn(
                "triggerer",
                [
                    *("triggerer", "--namespace", "default", "--kubeconfig", kubeconfig),
                    *("--lease-duration", "10", "--renew-every", "2"),
                ],
                cluster,
                workdir,
            )
        )
        log(f"controller ({executor} executor) and triggerer started; logs in {workdir}")
        ui_url = _start_ui(children, cluster, workdir, state_dir)
        _step(4)
        paths = [_example_path(example) for example in examples]
        if cluster.real_node is not None:
            paths = runnable_dags(paths, cluster.real_node.images, log)
        cluster.kubectl("apply", *[arg for path in paths for arg in ("-f", str(path))])
        scheduled_dags: list[str] = []
        to_trigger: list[str] = []
        for path in paths:
            dag = yaml.safe_load(path.read_text())
            spec, name = dag["spec"], dag["metadata"]["name"]
            shown = path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path
            if (spec.get("schedule") or spec.get("timetable")) and not spec.get("paused"):
                scheduled_dags.append(name)
                log(
                    f"applied {shown}: scheduled {spec.get('schedule') or 'by its timetable'}"
                    + (
                        ""
                        if spec.get("catchup", True)
                        else "; catchup off: its first run is the latest interval"
                    )
                )
            else:
                to_trigger.append(name)
                log(f"applied {shown}: manual runs only")
        manual = _trigger_all(cluster, to_trigger)
        for run_name in manual:
            log(f"triggered {run_name}")

        print(f"\nexport KUBECONFIG={cluster.kubeconfig}\nweb UI: {ui_url}\n", flush=True)
        _step(5)
        deadline = time.monotonic() + timeout
        screen = RunsScreen(cluster, manual, scheduled_dags)
        while not interrupted:
            if screen.refresh():
                log(
                    f"first runs finished {time.monotonic() - t0:.0f}s after `zonda up` started: "
                    + ("all succeeded" if screen.ok else f"some did not succeed: {screen.states}")
                )
                if exit_when_done:
                    return 0 if screen.ok else 1
                print(
                    f"Zonda keeps running: {', '.join(scheduled_dags) or 'no DAG'} gets a new run on "
                    f"schedule. Try: export KUBECONFIG={cluster.kubeconfig}; "
                    f"zonda runs describe {(manual or ['RUN'])[0]}\nPress Ctrl-C to stop everything.",
                    flush=True,
                )
            for child in children:
                if child.poll() is not None:
                    raise RuntimeError(
                        f"a Zonda process exited ({child.returncode}); see its log in {workdir}"
                    )
            if not screen.done and time.monotonic() > deadline:
                raise RuntimeError(f"the first runs did not finish within {timeout:.0f}s; logs in {workdir}")
            time.sleep(1)
        return 130
    except ClusterError:
        if interrupted:  # Ctrl-C reaches our kubectl too (same process group): a stop, not an error
            return 130
        raise
    finally:
        log("stopping the controller, the triggerer, task processes and the control plane")
        for child in children:
            _stop(child)
        if stopped := stop_task_processes(state_dir):
            log(f"stopped {len(stopped)} task process group(s) of the local executor: {stopped}")
        cluster.stop()
        with contextlib.suppress(OSError, ValueError):
            if json.loads(record.read_text()).get("pid") == os.getpid():
                record.unlink()
