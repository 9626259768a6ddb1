"""A real Kubernetes node beside the local control plane's kwok nodes: containerd, runc, CNI and a
kubelet, so task pods run real containers.

The pieces are built or installed by `hack/node/build-node.sh` (Debian containerd 1.6 + runc + CNI
plugins, a 1.36 kubelet and kube-proxy built from their Go module, the pause image as an OCI
archive), cached outside the repo. Everything runs as plain processes in one work directory:
containerd with its own root, state and socket; the kubelet registers the Node `zonda-real-node`
labelled `zonda.dev/node: real` (kwok leaves it alone: it only manages nodes annotated
`kwok.x-k8s.io/node: fake`); kube-proxy (iptables mode) makes Services' ClusterIPs work, so pods
reach the apiserver through the `kubernetes` Service with in-cluster config, as on any cluster
(the apiserver then serves on the host's address too: devcluster.py). Pods otherwise reach only the
host (CNI bridge, no masquerade).

One real node per machine at a time (the kubelet owns the `kubepods` cgroups, kube-proxy the KUBE-*
iptables chains): a lock file serialises starts. `stop()` removes every pod sandbox (tasks, netns,
mounts), then node_cleanup.sweep() whatever is left (bridge, cgroups, iptables chains), so nothing
is left behind; a node whose owner was killed is cleaned by the next start (node_cleanup.py, which
also lists what is left).
Configuration files: node_configs.py.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from controller.devtools import node_cleanup, node_configs
from controller.devtools.ports import free_port

NODE_NAME = node_configs.NODE_NAME

REPO_ROOT = Path(__file__).resolve().parents[2]
NODE_LABEL = ("zonda.dev/node", "real")
NODE_TOKEN = "zonda-real-node-token"
#: kube-proxy authenticates as `system:kube-proxy`, bound by default to the `system:node-proxier` role.
PROXY_TOKEN = "zonda-kube-proxy-token"
LOCK_FILE = Path("/tmp/zonda-real-node.lock")


class NodeError(RuntimeError):
    """A piece of the real node could not be built or started; the message names it and its log."""


def log(message: str) -> None:
    print(f"[realnode] {time.strftime('%H:%M:%S')} {message}", file=sys.stderr, flush=True)


def token_lines() -> str:
    """The apiserver's token-file lines for the kubelet (as its node, for the Node authorizer) and
    for kube-proxy."""
    return (
        f'{NODE_TOKEN},system:node:{NODE_NAME},{NODE_NAME}-uid,"system:nodes"\n'
        f"{PROXY_TOKEN},system:kube-proxy,kube-proxy-uid\n"
    )


def _run_script(script: str, what: str, *args: str) -> list[Path]:
    """Runs a hack/node script; returns the paths it printed (one a line, build logs go to stderr)."""
    path = REPO_ROOT / "hack" / "node" / script
    result = subprocess.run(["bash", str(path), *args], stdout=subprocess.PIPE, text=True)
    if result.returncode != 0:
        raise NodeError(
            f"{what}: hack/node/{script} failed (exit {result.returncode}); its log is on stderr above"
        )
    return [Path(line) for line in result.stdout.strip().splitlines()]


def node_pieces() -> Path:
    """The directory with bin/kubelet and pause.oci.tar: `$ZONDA_NODE_DIR`, else built (or cached)."""
    if env := os.environ.get("ZONDA_NODE_DIR"):
        return Path(env)
    return _run_script("build-node.sh", "building the node's kubelet and pause image")[-1]


def zonda_images() -> list[tuple[str, Path]]:
    """(name, OCI archive) of Zonda's image built from the Dockerfile, then of the same image with
    the repository's examples/ package (hack/node/examples.Dockerfile), built or found cached."""
    archives = _run_script("build-image.sh", "building the images", "--examples")[-2:]
    return [((archive.parent / "IMAGE").read_text().strip(), archive) for archive in archives]


def host_ip() -> str:
    """The address the kubelet serves on: the host's outbound address (a kubelet refuses loopback)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.connect(("198.51.100.1", 9))  # no packet is sent: this only picks the route's source
        address: str = sock.getsockname()[0]
        return address


def _tail(path: Path, lines: int = 20) -> str:
    with contextlib.suppress(OSError):
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    return "(no log)"


@dataclass
class RealNode:
    """A running kubelet + containerd; `stop()` leaves no process, mount, netns or bridge behind."""

    name: str
    workdir: Path
    bin_dir: Path
    bridge: str
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    lock: IO[str] | None = None
    images: list[str] = field(default_factory=list)
    started_seconds: float = 0.0
    #: What stop() found left on the machine after cleaning, while it held the lock.
    left_behind: list[str] = field(default_factory=list)

    @property
    def socket(self) -> Path:
        return self.workdir / "containerd.sock"

    def ctr(self, *args: str, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """Runs `ctr` against this node's containerd, in the CRI (`k8s.io`) namespace."""
        result = subprocess.run(
            ["ctr", "--address", str(self.socket), "--namespace", "k8s.io", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and result.returncode != 0:
            raise NodeError(f"ctr {' '.join(args)} failed: {result.stderr.strip()}")
        return result

    def import_image(self, archive: Path, name: str) -> None:
        """Loads an OCI archive into the node's containerd under `name` (pods use it without pulling)."""
        t0 = time.monotonic()
        self.ctr("images", "import", "--base-name", name.rsplit(":", 1)[0], str(archive))
        if name not in self.ctr("images", "list", "--quiet").stdout.split():
            raise NodeError(f"importing {archive} did not yield image {name}")
        self.images.append(name)
        log(f"imported {name} in {time.monotonic() - t0:.1f}s")

    def stop(self) -> None:
        """Kubelet first (so it starts nothing new), then every sandbox, the other processes, then
        whatever they leave on the machine (node_cleanup.sweep)."""
        kubelet = self.processes.pop("kubelet", None)
        if kubelet is not None:
            _terminate(kubelet)
        if "containerd" in self.processes and self.processes["containerd"].poll() is None:
            self._remove_containers()
        for proc in reversed(list(self.processes.values())):
            _terminate(proc)
        self.processes.clear()
        node_cleanup.sweep(self.workdir, self.bridge, self.bin_dir)
        self.left_behind = node_cleanup.machine_leftovers()
        if self.lock is not None:
            node_cleanup.forget()
            self.lock.close()
            self.lock = None

    def _remove_containers(self) -> None:
        listed = self.ctr("containers", "list", "--quiet", check=False, timeout=30).stdout.split()
        netns: set[str] = set()
        for container in listed:
            info = self.ctr("containers", "info", container, check=False, timeout=30).stdout
            with contextlib.suppress(ValueError, KeyError, TypeError):
                for namespace in json.loads(info)["Spec"]["linux"]["namespaces"]:
                    if namespace.get("type") == "network" and namespace.get("path"):
                        netns.add(namespace["path"])
            self.ctr("tasks", "kill", "--signal", "SIGKILL", container, check=False, timeout=30)
        for container in listed:
            for _ in range(50):
                if self.ctr("tasks", "delete", container, check=False, timeout=30).returncode == 0:
                    break
                if "not found" in self.ctr("tasks", "ps", container, check=False, timeout=30).stderr:
                    break
                time.sleep(0.1)
            self.ctr("containers", "delete", container, check=False, timeout=30)
        for path in netns:
            subprocess.run(["umount", path], capture_output=True)
            with contextlib.suppress(OSError):
                os.unlink(path)


def cordon_fake_nodes(kubectl: Callable[..., subprocess.CompletedProcess[str]]) -> None:
    """Mark the kwok nodes unschedulable, so every new pod lands on the real node."""
    for name in kubectl("get", "nodes", "-l", "type=kwok", "-o", "name").stdout.split():
        kubectl("cordon", name)


def leftovers(node: RealNode) -> list[str]:
    """What a stopped node left behind (empty when stop() was clean): processes, mounts and bridge
    now, and what `stop()` found on the machine while it still held the lock (pod processes, pod
    network namespaces, iptables chains: after it, they may be the next node's)."""
    return node_cleanup.workdir_leftovers(node.workdir, node.bridge) + node.left_behind


def _terminate(proc: subprocess.Popen[bytes], grace: float = 10) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=5)


def _write_kubeconfig(path: Path, server: str, ca_file: Path, user: str, token: str) -> None:
    cluster = {"server": server, "certificate-authority": str(ca_file)}
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "local", "cluster": cluster}],
                "users": [{"name": user, "user": {"token": token}}],
                "contexts": [{"name": "local", "context": {"cluster": "local", "user": user}}],
                "current-context": "local",
            }
        )
    )


def _wait(predicate: Callable[[], bool], what: str, node: RealNode, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        for name, proc in node.processes.items():
            if proc.poll() is not None:
                log_file = node.workdir / f"{name}.log"
                raise NodeError(
                    f"{name} exited ({proc.returncode}) while waiting for {what}; log {log_file}:\n"
                    f"{_tail(log_file)}"
                )
        time.sleep(0.2)
    raise NodeError(f"timed out after {timeout}s waiting for {what}; logs in {node.workdir}")


def _healthz_ok(port: int) -> bool:
    url = f"http://127.0.0.1:{port}/healthz"
    with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=2) as resp:
        return bool(resp.status == 200)
    return False


def _start_kube_proxy(
    node: RealNode,
    spawn: Callable[[str, Sequence[str]], None],
    server: str,
    ca_file: Path,
    timeout: float,
) -> None:
    """kube-proxy makes the `kubernetes` Service's ClusterIP lead to the apiserver, so pods (the
    chart's controller and triggerer) use in-cluster config as on any cluster."""
    workdir = node.workdir
    _write_kubeconfig(workdir / "kube-proxy.kubeconfig", server, ca_file, "kube-proxy", PROXY_TOKEN)
    healthz_port = free_port("")
    config = node_configs.kube_proxy_config(workdir, healthz_port, free_port(""))
    (workdir / "kube-proxy.yaml").write_text(json.dumps(config))
    spawn(
        "kube-proxy", [str(node.bin_dir / "kube-proxy"), f"--config={workdir / 'kube-proxy.yaml'}", "--v=1"]
    )

    # /healthz answers 200 once the rules were written after the Services were listed.
    _wait(lambda: _healthz_ok(healthz_port), "kube-proxy's first sync (/healthz)", node, timeout)


def start_real_node(
    workdir: Path,
    *,
    server: str,
    ca_file: Path,
    kubectl: Callable[..., subprocess.CompletedProcess[str]],
    images: Sequence[tuple[str, Path]] = (),
    timeout: float = 120,
) -> RealNode:
    """Start containerd and a kubelet registering `zonda-real-node`; return once the Node is Ready.

    `kubectl(*args, check=...)` drives the cluster (the admin's); `images` are (name, OCI archive)
    pairs loaded into containerd before the kubelet starts.
    """
    t0 = time.monotonic()
    pieces = node_pieces()
    bin_dir = pieces / "bin"
    workdir.mkdir(parents=True, exist_ok=True)
    lock = LOCK_FILE.open("w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        log(f"another real node holds {LOCK_FILE}; waiting for it to stop")
        fcntl.flock(lock, fcntl.LOCK_EX)
    bridge = f"zonda{os.getpid() % 100000}"
    node = RealNode(name=NODE_NAME, workdir=workdir, bin_dir=bin_dir, bridge=bridge, lock=lock)

    def spawn(name: str, command: Sequence[str]) -> None:
        with (workdir / f"{name}.log").open("wb") as out:
            node.processes[name] = subprocess.Popen(
                command,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                cwd=workdir,
            )

    try:
        node_cleanup.clean_after_killed_node(log)  # we hold the lock: its owner is gone
        node_cleanup.record(workdir, bridge, bin_dir)
        pause_image = (pieces / "PAUSE_IMAGE").read_text().strip()
        (workdir / "containerd.toml").write_text(node_configs.containerd_config(workdir, pause_image))
        (workdir / "cni" / "net.d").mkdir(parents=True, exist_ok=True)
        (workdir / "cni" / "net.d" / "10-zonda.conflist").write_text(
            json.dumps(node_configs.cni_config(workdir, bridge))
        )
        spawn("containerd", ["containerd", "--config", str(workdir / "containerd.toml")])
        _wait(
            lambda: node.socket.exists() and node.ctr("version", check=False, timeout=10).returncode == 0,
            "containerd to serve its socket",
            node,
            30,
        )
        for name, archive in ((pause_image, pieces / "pause.oci.tar"), *images):
            node.import_image(archive, name)

        kubeconfig = workdir / "kubelet.kubeconfig"
        _write_kubeconfig(kubeconfig, server, ca_file, NODE_NAME, NODE_TOKEN)
        address, healthz_port = host_ip(), free_port("")
        config = node_configs.kubelet_config(workdir, address, free_port(""), healthz_port)
        (workdir / "kubelet.yaml").write_text(json.dumps(config))
        spawn(
            "kubelet",
            [
                str(bin_dir / "kubelet"),
                f"--config={workdir / 'kubelet.yaml'}",
                f"--kubeconfig={kubeconfig}",
                f"--root-dir={workdir / 'kubelet'}",
                f"--hostname-override={NODE_NAME}",
                f"--node-ip={address}",
                f"--node-labels={NODE_LABEL[0]}={NODE_LABEL[1]}",
                "--v=1",
            ],
        )

        _wait(lambda: _healthz_ok(healthz_port), "the kubelet's /healthz", node, timeout)

        def ready() -> bool:
            result = kubectl(
                "get",
                "node",
                NODE_NAME,
                "-o",
                'jsonpath={.status.conditions[?(@.type=="Ready")].status}',
                check=False,
            )
            return result.returncode == 0 and result.stdout.strip() == "True"

        _wait(ready, f"Node {NODE_NAME} to be Ready", node, timeout)
        _start_kube_proxy(node, spawn, server, ca_file, timeout)
        node.started_seconds = time.monotonic() - t0
        log(f"real node {NODE_NAME} Ready in {node.started_seconds:.1f}s (logs in {workdir})")
        return node
    except BaseException:
        node.stop()
        raise
