"""A real Kubernetes node beside the local control plane's kwok nodes: containerd, runc, CNI and a
kubelet, so task pods run real containers.

The pieces are built or installed by `hack/node/build-node.sh` (Debian containerd 1.6 + runc + CNI
plugins, a 1.36 kubelet built from its Go module, the pause image as an OCI archive), cached
outside the repo. Everything runs as plain processes in one work directory: containerd with its
own root, state and socket; the kubelet registers the Node `zonda-real-node` labelled
`zonda.dev/node: real` (kwok leaves it alone: it only manages nodes annotated
`kwok.x-k8s.io/node: fake`). Pods reach nothing but the host (CNI bridge, no masquerade); task pods
report through their termination message and need no route to the apiserver.

One real node per machine at a time (the kubelet owns the `kubepods` cgroups): a lock file
serialises starts. `stop()` removes every pod sandbox (tasks, netns, mounts), the bridge and the
kubelet's cgroups, so nothing is left behind.
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

REPO_ROOT = Path(__file__).resolve().parents[2]
NODE_NAME = "zonda-real-node"
NODE_LABEL = ("zonda.dev/node", "real")
NODE_TOKEN = "zonda-real-node-token"
LOCK_FILE = Path("/tmp/zonda-real-node.lock")
POD_SUBNET = "10.89.0.0/16"
CGROUP_ROOT = Path("/sys/fs/cgroup")


class NodeError(RuntimeError):
    """A piece of the real node could not be built or started; the message names it and its log."""


def log(message: str) -> None:
    print(f"[realnode] {time.strftime('%H:%M:%S')} {message}", file=sys.stderr, flush=True)


def token_line() -> str:
    """The apiserver's token-file line that authenticates the kubelet as its node (Node authorizer)."""
    return f'{NODE_TOKEN},system:node:{NODE_NAME},{NODE_NAME}-uid,"system:nodes"\n'


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


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("", 0))
        port: int = sock.getsockname()[1]
        return port


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
        """Kubelet first (so it starts nothing new), then every sandbox, containerd, network, cgroups."""
        kubelet = self.processes.pop("kubelet", None)
        if kubelet is not None:
            _terminate(kubelet)
        if "containerd" in self.processes and self.processes["containerd"].poll() is None:
            self._remove_containers()
        for proc in reversed(list(self.processes.values())):
            _terminate(proc)
        self.processes.clear()
        self._kill_shims()
        self._unmount_all()
        subprocess.run(["ip", "link", "delete", self.bridge], capture_output=True)
        _remove_cgroups("kubepods")
        if self.lock is not None:
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

    def _kill_shims(self) -> None:
        """containerd's shims outlive it by design; ours are the ones started with our socket."""
        marker = str(self.socket).encode()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError):
                if marker in (entry / "cmdline").read_bytes():
                    os.kill(int(entry.name), signal.SIGKILL)

    def _unmount_all(self) -> None:
        """Unmount, deepest first, whatever the kubelet and containerd mounted under the work dir."""
        prefix = str(self.workdir)
        for _ in range(3):
            mounts = [
                line.split()[4].encode().decode("unicode_escape")
                for line in Path("/proc/self/mountinfo").read_text().splitlines()
            ]
            ours = sorted({m for m in mounts if m.startswith(prefix)}, key=len, reverse=True)
            if not ours:
                return
            for mount in ours:
                subprocess.run(["umount", "--lazy", mount], capture_output=True)


def runnable_dags(paths: Sequence[Path], images: Sequence[str], say: Callable[[str], None]) -> list[Path]:
    """The DAG files whose container tasks use only images loaded on the node; says why others are
    left out. No registry is reachable here, and a pod whose image cannot be pulled stays Pending."""
    import yaml

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


def cordon_fake_nodes(kubectl: Callable[..., subprocess.CompletedProcess[str]]) -> None:
    """Mark the kwok nodes unschedulable, so every new pod lands on the real node."""
    for name in kubectl("get", "nodes", "-l", "type=kwok", "-o", "name").stdout.split():
        kubectl("cordon", name)


def leftovers(workdir: Path, bridge: str) -> list[str]:
    """What a stopped node left behind: processes, mounts, its bridge (empty when stop() was clean)."""
    marker = str(workdir).encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            with contextlib.suppress(OSError):
                cmdline = (entry / "cmdline").read_bytes()
                if marker in cmdline:
                    command = cmdline.replace(b"\0", b" ").decode(errors="replace")
                    found.append(f"process {entry.name}: {command}")
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        if line.split()[4].startswith(str(workdir)):
            found.append(f"mount {line.split()[4]}")
    if Path(f"/sys/class/net/{bridge}").exists():
        found.append(f"network interface {bridge}")
    return found


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


def _remove_cgroups(name: str) -> None:
    """rmdir the kubelet's cgroup tree in every hierarchy, deepest first (empty once pods are gone)."""
    for hierarchy in CGROUP_ROOT.iterdir() if CGROUP_ROOT.is_dir() else []:
        top = hierarchy / name
        if not top.is_dir() or hierarchy.is_symlink():
            continue
        for directory in sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
            with contextlib.suppress(OSError):
                directory.rmdir()
        with contextlib.suppress(OSError):
            top.rmdir()


def _containerd_config(workdir: Path, pause_image: str) -> str:
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    return f"""version = 2
root = "{workdir}/containerd/root"
state = "{workdir}/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]

[grpc]
  address = "{workdir}/containerd.sock"
[ttrpc]
  address = "{workdir}/containerd.sock.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "{workdir}/containerd/opt"
[{cri}]
  sandbox_image = "{pause_image}"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  # This machine does not let us lower an OOM score (the kubelet asks -998 for sandboxes).
  restrict_oom_score_adj = true
  [{cri}.containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [{cri}.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [{cri}.containerd.runtimes.runc.options]
        SystemdCgroup = false
  [{cri}.cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{workdir}/cni/net.d"
"""


def _cni_config(workdir: Path, bridge: str) -> dict[str, object]:
    return {
        "cniVersion": "1.0.0",
        "name": "zonda",
        "plugins": [
            {
                "type": "bridge",
                "bridge": bridge,
                "isGateway": True,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": POD_SUBNET}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": str(workdir / "cni" / "ipam"),
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }


def _kubelet_config(workdir: Path, address: str, port: int, healthz_port: int) -> dict[str, object]:
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        # This machine has cgroup v1 (hybrid); containerd 1.6 has no RuntimeConfig, so the kubelet
        # falls back to this driver.
        "failCgroupV1": False,
        "cgroupDriver": "cgroupfs",
        "containerRuntimeEndpoint": f"unix://{workdir}/containerd.sock",
        "address": address,
        "port": port,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": healthz_port,
        # Local only: the apiserver reaches /containerLogs without a client certificate.
        "authentication": {"anonymous": {"enabled": True}, "webhook": {"enabled": False}},
        "authorization": {"mode": "AlwaysAllow"},
        "failSwapOn": False,
        "podLogsDir": str(workdir / "pod-logs"),
        "resolvConf": "/etc/resolv.conf",
        # A shared developer disk must not make the node evict pods or refuse new ones.
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1%",
            "imagefs.available": "1%",
            "nodefs.inodesFree": "1%",
        },
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "serializeImagePulls": False,
        "nodeStatusUpdateFrequency": "10s",
        "syncFrequency": "10s",
        "cgroupsPerQOS": True,
        "enforceNodeAllocatable": ["pods"],
        "maxPods": 110,
    }


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
        _remove_cgroups("kubepods")  # a previous node killed without stop() leaves them
        pause_image = (pieces / "PAUSE_IMAGE").read_text().strip()
        (workdir / "containerd.toml").write_text(_containerd_config(workdir, pause_image))
        (workdir / "cni" / "net.d").mkdir(parents=True, exist_ok=True)
        (workdir / "cni" / "net.d" / "10-zonda.conflist").write_text(json.dumps(_cni_config(workdir, bridge)))
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
        kubeconfig.write_text(
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [
                        {
                            "name": "local",
                            "cluster": {"server": server, "certificate-authority": str(ca_file)},
                        }
                    ],
                    "users": [{"name": NODE_NAME, "user": {"token": NODE_TOKEN}}],
                    "contexts": [{"name": "local", "context": {"cluster": "local", "user": NODE_NAME}}],
                    "current-context": "local",
                }
            )
        )
        address, healthz_port = host_ip(), _free_port()
        config = _kubelet_config(workdir, address, _free_port(), healthz_port)
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

        def healthy() -> bool:
            url = f"http://127.0.0.1:{healthz_port}/healthz"
            with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=2) as resp:
                return bool(resp.status == 200)
            return False

        _wait(healthy, "the kubelet's /healthz", node, timeout)

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
        node.started_seconds = time.monotonic() - t0
        log(f"real node {NODE_NAME} Ready in {node.started_seconds:.1f}s (logs in {workdir})")
        return node
    except BaseException:
        node.stop()
        raise
