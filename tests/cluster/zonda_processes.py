"""Helpers for cluster tests: run Zonda's controller and triggerer as real processes, wait on runs.

The processes are the same `zonda controller` / `zonda triggerer` commands the Helm chart runs,
pointed at the test cluster and one namespace, so killing and restarting them is a real restart.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, Self

import yaml
from prometheus_client.parser import text_string_to_metric_families

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
    log_tail: int = 0,
) -> Iterator[ZondaProcess]:
    """A `zonda controller` for the test's namespace, stopped on exit; `log_tail`: print the last that
    many characters of its log then (what a failing run's story needs)."""
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
        if log_tail:
            print(f"--- controller log\n{process.log()[-log_tail:]}")
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
    """A new namespace, deleted afterwards (without waiting for it to finish).

    Yielded once its `default` ServiceAccount exists, as Kubernetes' e2e framework waits for it: the
    controller-manager makes it after the namespace, and a pod created before it is refused 403
    ("error looking up service account"), which Zonda fails as Airflow's executor does (a fault test's
    first tries failed so after an etcd restart had slowed the controller-manager)."""
    name = f"{prefix}-{uuid.uuid4().hex[:10]}"
    cluster.kubectl("create", "namespace", name)
    wait_for(
        lambda: cluster.kubectl("get", "serviceaccount", "default", "-n", name, check=False).returncode == 0,
        f"the default ServiceAccount of namespace {name}",
    )
    try:
        yield name
    finally:
        release_task_pods(cluster, name)
        cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)


def release_task_pods(cluster: Cluster, namespace: str) -> int:
    """Remove the finalizer `zonda.dev/try-tracking` from every task pod of the namespace, as an
    operator does once no controller runs there (docs/reliability.md): the test's controller has
    stopped, and its pods would otherwise keep the namespace Terminating for the session. How many."""
    from controller.kube import Kube, KubeError
    from zonda.passes.try_tracking import removal_patch
    from zonda.resources.wire import LABEL_DAGRUN_UID

    async def release() -> int:
        async with await Kube.connect(str(cluster.kubeconfig)) as kube:
            pods = await kube.list_pods(namespace, LABEL_DAGRUN_UID)
            released = 0
            for pod in pods:
                patch = removal_patch(pod)
                if patch is None:
                    continue
                with contextlib.suppress(KubeError):  # changed since the list: gone, or released
                    released += await kube.patch_pod(namespace, pod["metadata"]["name"], patch) is not None
            return released

    try:
        # in a thread of its own: a caller may be inside a running event loop (Playwright's sync API
        # in the UI tests), where asyncio.run refuses to start another
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as thread:
            return thread.submit(lambda: asyncio.run(release())).result()
    except OSError:  # the cluster itself is gone (a session ending): nothing left to hold
        return 0


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


def create_asset_events(cluster: Cluster, namespace: str, uri: str, names: list[str]) -> None:
    """AssetEvents of the URI created with kubectl in one request (Airflow 3's `POST /assets/events`)."""
    kind = {"apiVersion": "zonda.dev/v1alpha1", "kind": "AssetEvent"}
    items = [{**kind, "metadata": {"name": n}, "spec": {"uri": uri}} for n in names]
    body = {"apiVersion": "v1", "kind": "List", "items": items}
    cluster.kubectl("create", "-n", namespace, "-f", "-", input=json.dumps(body))


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
    return whole_run(cluster, namespace, result)


def whole_run(cluster: Cluster, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
    """A DagRun as kubectl read it, with a big run's task instances merged in from its DagRunShards
    (`zonda.resources.run_shards`), as Zonda's own clients read it."""
    from zonda.resources import run_shards

    status = body.get("status") or {}
    if not run_shards.is_summary(status):
        return body
    selector = f"zonda.dev/dagrun-uid={body['metadata']['uid']}"
    shards = json.loads(
        cluster.kubectl("get", "dagrunshards", "-n", namespace, "-l", selector, "-o", "json").stdout
    )["items"]
    held = {s["metadata"]["name"]: (s.get("status") or {}).get("taskInstances") or {} for s in shards}
    return {**body, "status": run_shards.merge(status, held)}


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


def metric_value(port: int, name: str, **labels: str) -> float | None:
    """One sample of a process's /metrics page; None while it is not exported (or nothing listens)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
            text = reply.read().decode()
    except OSError:
        return None
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return float(sample.value)
    return None


def wait_first_passes(port: int, kind: str, at_least: int = 1, timeout: float = 60) -> float:
    """Wait until a (re)started controller, serving metrics on `port`, has ended `at_least` reconcile
    passes of `kind` ("run", "dag"...): the signal that it has looked at its objects since it started."""
    done: float = wait_for(
        lambda: (
            (n := metric_value(port, "zonda_reconciles_done_total", kind=kind)) is not None
            and n >= at_least
            and n
        ),
        f"the controller's first {kind} passes",
        timeout,
    )
    return done


class BackgroundWatch:
    """A watch of the test's own in a thread: `__enter__` returns once its first list is made (so it
    sees everything created after), `__exit__` stops it; an error in it is raised by either.
    Subclasses write `_record`, which must call `self._listed.set()` after listing and return once
    `self._stop` is set."""

    def __init__(self, name: str) -> None:
        self._listed = threading.Event()
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True, name=name)

    def _run(self) -> None:
        try:
            asyncio.run(self._record())
        except BaseException as error:
            self._error = error
            self._listed.set()

    async def _record(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        self._thread.start()
        self._listed.wait(60)
        if self._error is not None:
            raise self._error
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)
        if self._error is not None:
            raise self._error


class CreationOrder(BackgroundWatch):
    """Records, from a watch of its own, the order in which objects of a custom resource were created
    (and the revision at which each first had a finished `status.state`).

    The watch starts at the resourceVersion of a list made before anything is created, so every
    creation arrives as an ADDED event, in etcd's revision order, with the revision it was created at:
    a total order, where `creationTimestamp` has one-second resolution and ties pass any check."""

    def __init__(self, cluster: Cluster, namespace: str, plural: str = "dagruns") -> None:
        super().__init__(f"watch-{plural}")
        self.kubeconfig, self.namespace, self.plural = str(cluster.kubeconfig), namespace, plural
        #: (name, resourceVersion at creation), in creation order.
        self.created: list[tuple[str, int]] = []
        #: name -> the resourceVersion of the first write that gave it a finished `status.state`.
        self.finished: dict[str, int] = {}

    async def _record(self) -> None:
        from controller.kube import Kube

        async with await Kube.connect(self.kubeconfig) as kube:
            _, version = await kube.list_custom_with_version(self.plural, self.namespace)
            self._listed.set()
            while not self._stop.is_set():
                async for _, obj in kube.watch_objects(
                    self.plural, self.namespace, resource_version=version, timeout_seconds=2
                ):
                    meta = obj["metadata"]
                    version = meta["resourceVersion"]
                    if not any(name == meta["name"] for name, _ in self.created):
                        self.created.append((meta["name"], int(version)))
                    state = (obj.get("status") or {}).get("state")
                    if state in ("success", "failed") and meta["name"] not in self.finished:
                        self.finished[meta["name"]] = int(version)

    def names(self) -> list[str]:
        return [name for name, _ in self.created]


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
