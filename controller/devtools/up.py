"""`zonda up`: Zonda's main job on a local default, from nothing.

Starts the local control plane (building its binaries the first time), installs the CRDs, starts
the controller and the triggerer as child processes, applies example DAGs, triggers a run of each,
and shows `kubectl get dagruns` as the runs progress. Ctrl-C stops everything it started.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from controller.devtools.devcluster import REPO_ROOT, Cluster, log, start_local_cluster

FINISHED = ("success", "failed")


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
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _run_states(cluster: Cluster, names: list[str]) -> dict[str, str]:
    out = cluster.kubectl(
        "get", "dagruns", "-o", 'jsonpath={range .items[*]}{.metadata.name}={.status.state}{"\\n"}{end}'
    ).stdout
    states = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    return {name: states.get(name, "") for name in names}


def main(
    *, executor: str = "local", examples: list[str], exit_when_done: bool = False, timeout: float = 300
) -> int:
    cluster = start_local_cluster()
    assert cluster.workdir is not None
    workdir = cluster.workdir
    children: list[subprocess.Popen[bytes]] = []
    interrupted = False

    def on_signal(*_: object) -> None:
        nonlocal interrupted
        interrupted = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        children.append(
            _spawn(
                "controller",
                [
                    "controller",
                    "--namespace",
                    "default",
                    "--executor",
                    executor,
                    "--state-dir",
                    str(workdir / "state"),
                    "--kubeconfig",
                    str(cluster.kubeconfig),
                ],
                cluster,
                workdir,
            )
        )
        children.append(
            _spawn(
                "triggerer",
                [
                    "triggerer",
                    "--namespace",
                    "default",
                    "--kubeconfig",
                    str(cluster.kubeconfig),
                    "--lease-duration",
                    "10",
                    "--renew-every",
                    "2",
                ],
                cluster,
                workdir,
            )
        )
        log(f"controller ({executor} executor) and triggerer started; logs in {workdir}")
        runs: list[str] = []
        for example in examples:
            path = REPO_ROOT / "examples" / "dags" / f"{example}.yaml"
            cluster.kubectl("apply", "-f", str(path))
            dag = cluster.kubectl("get", "-f", str(path), "-o", "jsonpath={.metadata.name}").stdout.strip()
            created = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "controller.cli.main",
                    "trigger",
                    dag,
                    "--kubeconfig",
                    str(cluster.kubeconfig),
                ],
                capture_output=True,
                text=True,
                env=cluster.env(),
                cwd=REPO_ROOT,
            )
            if created.returncode != 0:
                raise RuntimeError(f"zonda trigger {dag} failed: {created.stderr.strip()}")
            runs.append(created.stdout.strip().split("/", 1)[-1].split()[0])
            log(f"applied {path.relative_to(REPO_ROOT)} and triggered {runs[-1]}")

        print(f"\nexport KUBECONFIG={cluster.kubeconfig}\n", flush=True)
        deadline = time.monotonic() + timeout
        last = ""
        while not interrupted:
            table = cluster.kubectl("get", "dagruns", check=False).stdout
            if table != last:
                print(f"$ kubectl get dagruns   # {time.strftime('%H:%M:%S')}\n{table}", flush=True)
                last = table
            states = _run_states(cluster, runs)
            if all(state in FINISHED for state in states.values()):
                break
            for child in children:
                if child.poll() is not None:
                    raise RuntimeError(
                        f"a Zonda process exited ({child.returncode}); see its log in {workdir}"
                    )
            if time.monotonic() > deadline:
                raise RuntimeError(f"runs did not finish within {timeout:.0f}s: {states}")
            time.sleep(1)
        if interrupted:
            return 130
        states = _run_states(cluster, runs)
        print(f"$ kubectl get dags,dagruns\n{cluster.kubectl('get', 'dags,dagruns').stdout}", flush=True)
        ok = all(state == "success" for state in states.values())
        log("all example runs succeeded" if ok else f"some runs did not succeed: {states}")
        if exit_when_done:
            return 0 if ok else 1
        print(
            f"Zonda keeps running. Try: KUBECONFIG={cluster.kubeconfig} kubectl describe dagrun {runs[0]}\n"
            "Press Ctrl-C to stop everything.",
            flush=True,
        )
        while not interrupted:
            time.sleep(0.5)
        return 0 if ok else 1
    finally:
        log("stopping the controller, the triggerer and the control plane")
        for child in children:
            _stop(child)
        cluster.stop()
