"""Helpers for cluster tests: run Zonda's controller and triggerer as real processes, wait on runs.

The processes are the same `zonda controller` / `zonda triggerer` commands the Helm chart runs,
pointed at the test cluster and one namespace, so killing and restarting them is a real restart.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from controller.devtools.devcluster import REPO_ROOT, Cluster

EXAMPLES = REPO_ROOT / "examples" / "dags"


class ZondaProcess:
    def __init__(
        self,
        name: str,
        args: list[str],
        cluster: Cluster,
        log_dir: Path,
        *,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.name = name
        self.args = args
        self.cluster = cluster
        self.log_path = log_dir / f"{name}.log"
        #: Added to (and winning over) the cluster's environment, e.g. POD_NAMESPACE or KUBECONFIG.
        self.env = dict(env or {})
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> ZondaProcess:
        with self.log_path.open("ab") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "controller.cli", *self.args],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**self.cluster.env(), **self.env},
                cwd=REPO_ROOT,
                start_new_session=True,
            )
        return self

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, sig)
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


@contextlib.contextmanager
def controller(
    cluster: Cluster,
    namespace: str,
    tmp_path: Path,
    *,
    executor: str = "kubernetes",
    extra: list[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> Iterator[ZondaProcess]:
    process = ZondaProcess(
        "controller",
        [
            "controller",
            "--namespace",
            namespace,
            "--executor",
            executor,
            "--state-dir",
            str(tmp_path / "state"),
            "--kubeconfig",
            str(cluster.kubeconfig),
            *(extra or []),
        ],
        cluster,
        tmp_path,
        env=env,
    ).start()
    try:
        yield process
    finally:
        process.stop()
        print(f"--- controller log ({process.log_path})\n{process.log()[-6000:]}")


@contextlib.contextmanager
def triggerer(
    cluster: Cluster,
    namespace: str,
    tmp_path: Path,
    *,
    identity: str = "triggerer-a",
    extra: list[str] | None = None,
) -> Iterator[ZondaProcess]:
    process = ZondaProcess(
        f"triggerer-{identity}",
        [
            "triggerer",
            "--namespace",
            namespace,
            "--identity",
            identity,
            "--kubeconfig",
            str(cluster.kubeconfig),
            "--lease-duration",
            "4",
            "--renew-every",
            "1",
            *(extra or []),
        ],
        cluster,
        tmp_path,
    ).start()
    try:
        yield process
    finally:
        process.stop()


@contextlib.contextmanager
def fresh_namespace(cluster: Cluster, prefix: str = "t") -> Iterator[str]:
    """A new namespace, deleted afterwards (without waiting for it to finish)."""
    name = f"{prefix}-{uuid.uuid4().hex[:10]}"
    cluster.kubectl("create", "namespace", name)
    try:
        yield name
    finally:
        cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)


def load_example(name: str, **spec_changes: Any) -> dict[str, Any]:
    dag: dict[str, Any] = yaml.safe_load((EXAMPLES / f"{name}.yaml").read_text())
    dag["spec"].update(spec_changes)
    return dag


def deferrable_example(delta: str = "10s") -> dict[str, Any]:
    """examples/dags/example_deferrable.yaml with its sensor's `delta`, counted from the trigger time.

    The example's 5 s can pass before a loaded machine has started the sensor's try, which then
    succeeds at once instead of deferring: tests that need the deferral give it more room."""
    dag = load_example("example_deferrable")
    dag["spec"]["tasks"][1]["args"]["delta"] = delta
    return dag


def apply(cluster: Cluster, namespace: str, obj: dict[str, Any]) -> None:
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(obj))


def get(cluster: Cluster, namespace: str, resource: str, name: str | None = None) -> Any:
    args = ["get", resource, "-n", namespace, "-o", "json"]
    if name:
        args.insert(2, name)
    return json.loads(cluster.kubectl(*args).stdout)


def runs_of(cluster: Cluster, namespace: str, dag: str) -> list[dict[str, Any]]:
    items = get(cluster, namespace, "dagruns")["items"]
    found = [r for r in items if r["spec"]["dagName"] == dag]
    return sorted(
        found, key=lambda r: (r.get("status") or {}).get("logicalDate") or r["spec"].get("logicalDate", "")
    )


def wait_for(predicate: Callable[[], Any], what: str, timeout: float = 60, interval: float = 0.3) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


def wait_run_finished(cluster: Cluster, namespace: str, run: str, timeout: float = 90) -> dict[str, Any]:
    def finished() -> dict[str, Any] | None:
        body = get(cluster, namespace, "dagrun", run)
        return body if (body.get("status") or {}).get("state") in ("success", "failed") else None

    result: dict[str, Any] = wait_for(finished, f"DagRun {run} to finish", timeout)
    return result


def trigger(cluster: Cluster, namespace: str, dag: str, conf: dict[str, Any] | None = None) -> str:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "controller.cli",
            "trigger",
            dag,
            "-n",
            namespace,
            "--conf",
            json.dumps(conf or {}),
        ],
        capture_output=True,
        text=True,
        env=cluster.env(),
        cwd=REPO_ROOT,
        check=True,
    )
    return result.stdout.split()[0].split("/", 1)[1]


def zonda(cluster: Cluster, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "controller.cli", *args],
        capture_output=True,
        text=True,
        env=cluster.env(),
        cwd=REPO_ROOT,
        check=check,
    )


def ti_states(run: dict[str, Any]) -> dict[str, str]:
    return {tid: ti["state"] for tid, ti in run["status"]["taskInstances"].items()}


def most_at_once(spans: Iterable[Mapping[str, Any]]) -> int:
    """The most objects between their recorded `startDate` and `endDate` at one moment (runs or
    task instances: what an Airflow concurrency limit promises, read from what was recorded)."""
    moments: list[tuple[datetime, int]] = []
    for span in spans:
        moments.append((datetime.fromisoformat(span["startDate"]), 1))
        moments.append((datetime.fromisoformat(span["endDate"]), -1))
    current = best = 0
    for _, change in sorted(moments):  # an end sorts before a start at the same instant
        current += change
        best = max(best, current)
    return best
