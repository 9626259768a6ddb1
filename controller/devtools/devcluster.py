"""A real Kubernetes control plane on loopback, without Docker: etcd, kube-apiserver,
kube-controller-manager, kube-scheduler and kwok (fake nodes whose pods follow our Stages).

The binaries are built from Go modules by `hack/build-cluster-binaries.sh` (cached outside the repo:
`make binaries`). `control_plane_files.binaries_dir()` only finds them: with an empty cache it fails
at once and names the command that builds them (7-23 minutes on 2 cores), unless called with
`build=True` (`zonda up`). Everything listens on 127.0.0.1 on free ports, lives in one work directory,
and is torn down on `stop()` (process groups are killed, so nothing is left behind).
`start_local_cluster(nodes=False)` starts etcd and the apiserver only: enough for the local executor,
which runs no pods. The apiserver's audit log (`<workdir>/audit.log`, `Cluster.audit_log`) records
every pod create, admitted or refused, and nothing else (`AUDIT_POLICY`): what tests count pod
creates from, refusals included, which no watch and no etcd key ever shows.

Which cluster is used (`connect_cluster(mode)`): an existing one only when asked explicitly
(`mode="existing"` or `ZONDA_TEST_CLUSTER=existing`: the current `KUBECONFIG` context), kind when
asked (`"kind"`, needs Docker), else the local control plane. Tests never touch a user's cluster by
accident.

Longer than 400 lines on purpose: one control plane's life (start, readiness, stop, which cluster)
reads top to bottom in one place; what it is made of (binaries, certificates, kubeconfig, kwok's Nodes)
is in `control_plane_files.py`.

    python -m controller.devtools.devcluster up --kubeconfig-out /tmp/zonda.kubeconfig   # until Ctrl-C
    python -m controller.devtools.devcluster build [etcd kube-apiserver ...]           # build, print dir
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller.devtools import realnode
from controller.devtools.control_plane_files import (
    ALL_BINARIES,
    API_BINARIES,
    NODE_BINARIES,
    SERVICE_CIDR,
    ClusterError,
    binaries_dir,
    kwok_node_manifest,
    serving_certificate,
    write_kubeconfig,
)
from controller.devtools.ports import free_port

REPO_ROOT = Path(__file__).resolve().parents[2]
DATA_DIR = Path(__file__).resolve().parent / "data"
ADMIN_TOKEN = "zonda-local-admin-token"
#: Pod creates only, with their answer (`responseStatus`), once each (at ResponseComplete).
AUDIT_POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted]
rules:
  - level: Metadata
    verbs: [create]
    resources: [{group: "", resources: [pods]}]
  - level: None
"""
NODE_COUNT = 2


def log(message: str) -> None:
    print(f"[devcluster] {time.strftime('%H:%M:%S')} {message}", file=sys.stderr, flush=True)


def crd_paths(crds_dir: Path = REPO_ROOT / "crds") -> list[Path]:
    return sorted(crds_dir.glob("*.yaml"))


@dataclass
class Cluster:
    """A cluster Zonda can use: a kubeconfig, and the binaries (kubectl, helm) to drive it."""

    kubeconfig: Path
    bin_dir: Path
    kind: str = "local"  # local | existing | kind
    workdir: Path | None = None
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    real_node: realnode.RealNode | None = None

    @property
    def audit_log(self) -> Path | None:
        """The apiserver's audit log of pod creates (a local control plane's only)."""
        return self.workdir / "audit.log" if self.kind == "local" and self.workdir is not None else None

    def pod_create_events(self, namespace: str) -> list[dict[str, Any]]:
        """The audit events of every pod create in `namespace`, admitted or refused, with its answer
        (`responseStatus`) and its times (`requestReceivedTimestamp`, `stageTimestamp`), oldest
        first, from the audit log and its rotated backup; none without an audit log."""
        log = self.audit_log
        if log is None:
            return []
        events = []
        for path in sorted(log.parent.glob("audit*.log")):  # the backup, audit-<time>.log, sorts first
            for line in path.read_text().splitlines():
                event = json.loads(line)
                ref = event.get("objectRef") or {}
                if (event.get("verb"), ref.get("resource"), ref.get("namespace")) != (
                    "create",
                    "pods",
                    namespace,
                ):
                    continue
                if not ref.get("subresource"):
                    events.append(event)
        return events

    def env(self) -> dict[str, str]:
        env = dict(os.environ, KUBECONFIG=str(self.kubeconfig))
        env["PATH"] = f"{self.bin_dir}{os.pathsep}{env.get('PATH', '')}"
        return env

    def kubectl(
        self, *args: str, check: bool = True, input: str | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        kubectl = self.bin_dir / "kubectl"
        cmd = [str(kubectl if kubectl.exists() else "kubectl"), "--kubeconfig", str(self.kubeconfig), *args]
        result = subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=timeout)
        if check and result.returncode != 0:
            raise ClusterError(f"kubectl {' '.join(args)} failed: {result.stderr.strip()}")
        return result

    def install_crds(self, crds_dir: Path = REPO_ROOT / "crds") -> None:
        """Apply the CRDs in `crds_dir` (this tree's by default; a benchmark applies another tree's)
        and return once every one is established and served."""
        paths = crd_paths(crds_dir)
        if not paths:
            raise ClusterError(f"no CRDs found in {crds_dir}")
        for path in paths:
            self.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(path))
        # Every CRD, named by its file (`<plural>.zonda.dev.yaml`): one not waited for answered 429 to
        # the first test that used it.
        names = [path.name.removesuffix(".yaml") for path in paths]
        crd_names = [f"crd/{name}" for name in names]
        self.kubectl("wait", "--for=condition=Established", "--timeout=60s", *crd_names)
        # Established is not served: the first list of a new resource answers 429 "storage is
        # (re)initializing" until its watch cache is filled. Wait for that here, once.
        deadline = time.monotonic() + 60
        while self.kubectl("get", ",".join(names), "-A", check=False).returncode != 0:
            if time.monotonic() > deadline:
                raise ClusterError("the zonda.dev resources are established but not served after 60s")
            time.sleep(0.2)

    def restart(self, name: str, sig: int = signal.SIGKILL) -> float:
        """Kill one control-plane process (`etcd`, `kube-apiserver`...) and start it again with the same
        arguments and data (fault injection: every client's connections and watches break); return once
        the apiserver answers /readyz again, with the seconds it was down."""
        if self.workdir is None or name not in self.processes:
            raise ClusterError(f"only a local control plane's processes can be restarted, not {name}")
        old = self.processes[name]
        killed = time.monotonic()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(old.pid, sig)
        old.wait(timeout=30)
        with (self.workdir / f"{name}.log").open("ab") as out:
            self.processes[name] = subprocess.Popen(
                old.args,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                cwd=self.workdir,
            )

        def ready() -> bool:
            try:
                return self.kubectl("get", "--raw", "/readyz", check=False, timeout=10).returncode == 0
            except subprocess.TimeoutExpired:  # it accepted the connection but is not serving yet
                return False

        _wait_for(
            ready,
            f"the apiserver to be ready after {name} restarted",
            self,
            timeout=120,
        )
        return time.monotonic() - killed

    def memory_rss_mib(self) -> dict[str, float]:
        """Resident memory of each control-plane process (for the notes' figures)."""
        usage: dict[str, float] = {}
        for name, proc in self.processes.items():
            with contextlib.suppress(OSError):
                for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        usage[name] = int(line.split()[1]) / 1024
        return usage

    def stop(self) -> None:
        """Stop every process (reverse start order), SIGTERM then SIGKILL, and remove the work dir."""
        if self.real_node is not None:
            self.real_node.stop()
            self.real_node = None
        for name, proc in reversed(list(self.processes.items())):
            if proc.poll() is None and name != "etcd":
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        # The apiserver drains watches for a long while on SIGTERM; a throwaway cluster need not wait.
        deadline = time.monotonic() + 2
        for name, proc in reversed(list(self.processes.items())):
            if name == "etcd" and proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
                deadline = time.monotonic() + 5
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=5)
        self.processes.clear()
        if self.workdir is not None and not os.environ.get("ZONDA_KEEP_WORKDIR"):
            shutil.rmtree(self.workdir, ignore_errors=True)


def _wait_healthy(
    url: str, ca_file: Path, token: str, process: subprocess.Popen[bytes], log_file: Path, timeout: float = 90
) -> None:
    context = (
        ssl.create_default_context(cafile=str(ca_file))
        if ca_file.exists()
        else ssl._create_unverified_context()
    )
    deadline = time.monotonic() + timeout
    last_error = ""
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise ClusterError(f"kube-apiserver exited ({process.returncode}); log: {_tail(log_file)}")
        try:
            if not ca_file.exists():
                context = ssl._create_unverified_context()
            request = urllib.request.Request(f"{url}/readyz", headers={"Authorization": f"Bearer {token}"})
            with urllib.request.urlopen(request, timeout=2, context=context) as response:
                if response.status == 200:
                    return
        except Exception as exc:  # not up yet: connection refused, 500 while post-start hooks run
            last_error = str(exc)
        time.sleep(0.2)
    raise ClusterError(f"kube-apiserver not ready after {timeout}s ({last_error}); log: {_tail(log_file)}")


def _tail(path: Path, lines: int = 15) -> str:
    with contextlib.suppress(OSError):
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    return "(no log)"


def start_local_cluster(
    workdir: Path | None = None,
    *,
    bin_dir: Path | None = None,
    install_crds: bool = True,
    nodes: bool = True,
    real_node: bool | None = None,
) -> Cluster:
    """Start etcd and the apiserver (RBAC on), and with `nodes` the controller-manager, scheduler and
    kwok with fake nodes; return when usable. `bin_dir` defaults to the cached binaries (never built).

    `real_node` (default: `$ZONDA_REAL_NODE=1`; needs `nodes`) adds a kubelet + containerd node with
    Zonda's images loaded, plain and with examples/ (controller/devtools/realnode.py).
    """
    if real_node is None:
        real_node = nodes and os.environ.get("ZONDA_REAL_NODE") == "1"
    t0 = time.monotonic()
    bin_dir = bin_dir or binaries_dir((*API_BINARIES, *NODE_BINARIES) if nodes else API_BINARIES)
    workdir = workdir or Path(tempfile.mkdtemp(prefix="zonda-cluster-"))
    workdir.mkdir(parents=True, exist_ok=True)
    certs = workdir / "certs"
    certs.mkdir(exist_ok=True)
    sa_key = certs / "sa.key"
    subprocess.run(["openssl", "genrsa", "-out", str(sa_key), "2048"], check=True, capture_output=True)
    tokens = f'{ADMIN_TOKEN},zonda-admin,zonda-admin-uid,"system:masters"\n'
    (workdir / "tokens.csv").write_text(tokens + (realnode.token_lines() if real_node else ""))
    (workdir / "audit-policy.yaml").write_text(AUDIT_POLICY)
    # With a real node, pods reach the apiserver on the host's address (through kube-proxy's
    # `kubernetes` Service); without one, nothing but this machine's processes does.
    advertise = realnode.host_ip() if real_node else "127.0.0.1"
    ca_file, serving = serving_certificate(certs, advertise)

    cluster = Cluster(kubeconfig=workdir / "kubeconfig", bin_dir=bin_dir, kind="local", workdir=workdir)

    def spawn(name: str, args: Sequence[str]) -> subprocess.Popen[bytes]:
        log_file = workdir / f"{name}.log"
        with log_file.open("wb") as out:
            proc = subprocess.Popen(
                [str(bin_dir / name), *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                cwd=workdir,
            )
        cluster.processes[name] = proc
        return proc

    try:
        etcd_client, etcd_peer = free_port(), free_port()
        spawn(
            "etcd",
            [
                "--name=zonda",
                f"--data-dir={workdir / 'etcd'}",
                f"--listen-client-urls=http://127.0.0.1:{etcd_client}",
                f"--advertise-client-urls=http://127.0.0.1:{etcd_client}",
                f"--listen-peer-urls=http://127.0.0.1:{etcd_peer}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{etcd_peer}",
                f"--initial-cluster=zonda=http://127.0.0.1:{etcd_peer}",
                "--unsafe-no-fsync=true",
                "--log-level=warn",
                "--quota-backend-bytes=4294967296",
            ],
        )
        api_port = free_port()
        server = f"https://127.0.0.1:{api_port}"
        apiserver = spawn(
            "kube-apiserver",
            [
                f"--etcd-servers=http://127.0.0.1:{etcd_client}",
                f"--bind-address={'0.0.0.0' if real_node else '127.0.0.1'}",
                f"--advertise-address={advertise}",
                f"--secure-port={api_port}",
                f"--tls-cert-file={serving[0]}",
                f"--tls-private-key-file={serving[1]}",
                f"--token-auth-file={workdir / 'tokens.csv'}",
                "--authorization-mode=Node,RBAC",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={sa_key}",
                f"--service-account-signing-key-file={sa_key}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--allow-privileged=true",
                # `kubectl logs` on a real node: dial its InternalIP, its hostname is not in DNS.
                "--kubelet-preferred-address-types=InternalIP,Hostname",
                "--enable-priority-and-fairness=false",
                "--profiling=false",
                "--v=1",
                # Fake nodes have no kubelet to clear the not-ready taint this plugin adds at creation.
                "--disable-admission-plugins=TaintNodesByCondition",
                "--event-ttl=2h",
                "--shutdown-delay-duration=0s",
                "--shutdown-watch-termination-grace-period=0s",
                f"--audit-policy-file={workdir / 'audit-policy.yaml'}",
                f"--audit-log-path={workdir / 'audit.log'}",
                "--audit-log-maxsize=64",  # MB, then rotated; one backup kept
                "--audit-log-maxbackup=1",
            ],
        )
        _wait_healthy(server, ca_file, ADMIN_TOKEN, apiserver, workdir / "kube-apiserver.log")
        write_kubeconfig(cluster.kubeconfig, server, ca_file, ADMIN_TOKEN)
        kubeconfig = str(cluster.kubeconfig)

        def component_args() -> list[str]:
            """What the controller-manager and the scheduler share: who they are, where they serve."""
            return [
                f"--kubeconfig={kubeconfig}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                f"--secure-port={free_port()}",
            ]

        if nodes:
            spawn(
                "kube-controller-manager",
                [
                    *component_args(),
                    f"--service-account-private-key-file={sa_key}",
                    f"--root-ca-file={ca_file}",
                    "--use-service-account-credentials=false",
                    "--controllers=*,-nodeipam,-nodelifecycle",
                    "--concurrent-gc-syncs=5",
                    "--v=1",
                ],
            )
            spawn(
                "kube-scheduler",
                [
                    *component_args(),
                    "--v=1",
                ],
            )
            spawn(
                "kwok",
                [
                    f"--kubeconfig={kubeconfig}",
                    # Only the fake nodes: a real node's kubelet owns its Node and pods.
                    "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
                    f"--config={DATA_DIR / 'kwok-stages.yaml'}",
                    f"--server-address=127.0.0.1:{free_port()}",
                    "--node-ip=10.244.0.1",
                    "--cidr=10.244.0.0/16",
                ],
            )
            fake_nodes = [kwok_node_manifest(f"kwok-node-{i}") for i in range(NODE_COUNT)]
            cluster.kubectl(
                "apply",
                "-f",
                "-",
                input=json.dumps({"apiVersion": "v1", "kind": "List", "items": fake_nodes}),
            )
        if install_crds:
            cluster.install_crds()
        if nodes:
            _wait_for(
                lambda: (
                    cluster.kubectl(
                        "get", "serviceaccount", "default", "-n", "default", check=False
                    ).returncode
                    == 0
                ),
                "the default ServiceAccount (controller-manager)",
                cluster,
            )
        if real_node and nodes:
            cluster.real_node = realnode.start_real_node(
                workdir / "node",
                server=server,
                ca_file=ca_file,
                kubectl=cluster.kubectl,
                images=realnode.zonda_images(),
            )
        log(f"control plane ready at {server} in {time.monotonic() - t0:.1f}s (workdir {workdir})")
        return cluster
    except BaseException:
        cluster.stop()
        raise


def _wait_for(predicate: object, what: str, cluster: Cluster, timeout: float = 60) -> None:
    assert callable(predicate)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        for name, proc in cluster.processes.items():
            if proc.poll() is not None and cluster.workdir is not None:
                raise ClusterError(
                    f"{name} exited ({proc.returncode}): {_tail(cluster.workdir / f'{name}.log')}"
                )
        time.sleep(0.2)
    raise ClusterError(f"timed out after {timeout}s waiting for {what}")


def kind_available() -> bool:
    if shutil.which("kind") is None or shutil.which("docker") is None:
        return False
    return subprocess.run(["docker", "info"], capture_output=True).returncode == 0


@contextlib.contextmanager
def connect_cluster(mode: str | None = None) -> Iterator[Cluster]:
    """Yield a cluster by `mode` (default `$ZONDA_TEST_CLUSTER` or "local"); clean up what we started.

    - "existing": the current KUBECONFIG context (opt-in only). CRDs are applied.
    - "kind": a throwaway kind cluster (Docker required).
    - "local": the Go-built local control plane.
    """
    mode = mode or os.environ.get("ZONDA_TEST_CLUSTER", "local")
    if mode == "existing":
        kubeconfig = Path(os.environ.get("KUBECONFIG", str(Path.home() / ".kube" / "config")))
        cluster = Cluster(kubeconfig=kubeconfig, bin_dir=binaries_dir(), kind="existing")
        cluster.install_crds()
        yield cluster
        return
    if mode == "kind":
        if not kind_available():
            raise ClusterError("ZONDA_TEST_CLUSTER=kind needs kind and a running Docker engine")
        name = f"zonda-{os.getpid()}"
        workdir = Path(tempfile.mkdtemp(prefix="zonda-kind-"))
        kubeconfig = workdir / "kubeconfig"
        subprocess.run(
            ["kind", "create", "cluster", "--name", name, "--kubeconfig", str(kubeconfig), "--wait", "120s"],
            check=True,
        )
        try:
            cluster = Cluster(kubeconfig=kubeconfig, bin_dir=binaries_dir(), kind="kind", workdir=workdir)
            cluster.install_crds()
            yield cluster
        finally:
            subprocess.run(["kind", "delete", "cluster", "--name", name], check=False)
            shutil.rmtree(workdir, ignore_errors=True)
        return
    if mode != "local":
        raise ClusterError(f"unknown cluster mode {mode!r}: use local, existing or kind")
    cluster = start_local_cluster()
    try:
        yield cluster
    finally:
        cluster.stop()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m controller.devtools.devcluster",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start the local control plane and keep it running until Ctrl-C")
    up.add_argument("--kubeconfig-out", type=Path, help="copy the admin kubeconfig here")
    up.add_argument("--workdir", type=Path)
    build = sub.add_parser(
        "build", help="build (or find cached) the control-plane binaries and print their directory"
    )
    build.add_argument("binaries", nargs="*", default=list(ALL_BINARIES), help="default: all")
    args = parser.parse_args(argv)
    if args.command == "build":
        print(binaries_dir(args.binaries, build=True))
        return 0
    cluster = start_local_cluster(args.workdir)
    try:
        if args.kubeconfig_out:
            shutil.copy(cluster.kubeconfig, args.kubeconfig_out)
            log(f"kubeconfig written to {args.kubeconfig_out}")
        print(cluster.kubeconfig, flush=True)
        stop = False

        def request_stop(*_: object) -> None:
            nonlocal stop
            stop = True

        signal.signal(signal.SIGTERM, request_stop)
        signal.signal(signal.SIGINT, request_stop)
        while not stop:
            time.sleep(0.5)
    finally:
        log("stopping the control plane")
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
