"""Removing what a real node leaves on the machine: processes, pod processes, mounts, network
namespaces, its bridge, the kubelet's cgroups and kube-proxy's and the kubelet's iptables chains.

`RealNode.stop()` calls `sweep()` after stopping its processes. A node whose owner was killed
(SIGKILL of `zonda up` or of a test session) could not: its containerd, kubelet, kube-proxy, shims
and containers keep running, with their mounts. The running node therefore records its work dir in
`STATE_FILE` while it holds the real-node lock; the next start (which holds the lock, so that node's
owner is gone) finds the record and cleans by that work dir (`clean_after_killed_node`).
`workdir_leftovers()` and `machine_leftovers()` list what is left, for the tests that assert nothing is.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shlex
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

STATE_FILE = Path("/tmp/zonda-real-node.json")
CGROUP_ROOT = Path("/sys/fs/cgroup")
POD_CGROUP = "kubepods"


def processes_mentioning(text: str) -> list[int]:
    """Pids (not ours) whose command line contains `text`, e.g. a work dir or a socket path."""
    needle, found = text.encode(), []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            with contextlib.suppress(OSError):
                if needle in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
    return found


def kill(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def pod_processes() -> list[int]:
    """Every process in the kubelet's pod cgroups (containers whose shim is gone included)."""
    pids: set[int] = set()
    for hierarchy in CGROUP_ROOT.iterdir() if CGROUP_ROOT.is_dir() else []:
        top = hierarchy / POD_CGROUP
        if hierarchy.is_symlink() or not top.is_dir():
            continue
        for procs in top.rglob("cgroup.procs"):
            with contextlib.suppress(OSError, ValueError):
                pids.update(int(line) for line in procs.read_text().split())
    return sorted(pids)


def mounts_under(prefix: Path) -> list[str]:
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        mount = line.split()[4].encode().decode("unicode_escape")
        if mount == str(prefix) or mount.startswith(f"{prefix}/"):
            found.append(mount)
    return found


def unmount_under(prefix: Path) -> int:
    """Unmount (lazily, deepest first) everything mounted under `prefix`; returns how many."""
    count = 0
    for _ in range(3):
        ours = sorted(set(mounts_under(prefix)), key=len, reverse=True)
        if not ours:
            break
        for mount in ours:
            if subprocess.run(["umount", "--lazy", mount], capture_output=True).returncode == 0:
                count += 1
    return count


def remove_pod_netns() -> int:
    """The pods' network namespaces (CNI's /run/netns/cni-*): one node runs at a time (the lock),
    so every one left once its processes are gone is this node's."""
    removed = 0
    for path in sorted(Path("/run/netns").glob("cni-*")):
        subprocess.run(["umount", str(path)], capture_output=True)
        with contextlib.suppress(OSError):
            path.unlink()
            removed += 1
    return removed


def remove_cgroups(name: str = POD_CGROUP) -> None:
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


def remove_kube_chains() -> None:
    """Delete the KUBE-* iptables chains (IPv4 and IPv6) and the built-in chains' jumps to them:
    the kubelet's (KUBE-FIREWALL, canaries) and whatever `kube-proxy --cleanup` left."""
    for binary in ("iptables", "ip6tables"):
        for table in ("mangle", "filter", "nat"):
            listed = subprocess.run([binary, "-w", "-t", table, "-S"], capture_output=True, text=True)
            if listed.returncode != 0:
                continue
            rules = listed.stdout.splitlines()
            chains = [line.split()[1] for line in rules if line.startswith("-N KUBE-")]
            for rule in rules:
                words = shlex.split(rule)
                if words[:1] == ["-A"] and not words[1].startswith("KUBE-") and "KUBE-" in rule:
                    subprocess.run([binary, "-w", "-t", table, "-D", *words[1:]], capture_output=True)
            for flag in ("-F", "-X"):
                for chain in chains:
                    subprocess.run([binary, "-w", "-t", table, flag, chain], capture_output=True)


def sweep(workdir: Path, bridge: str, bin_dir: Path) -> dict[str, int]:
    """Everything of a node whose own processes are stopped (or gone): what is left running with
    the work dir in its command line (containerd, shims), pod processes, mounts, the bridge,
    cgroups, iptables chains. Returns counts of what it removed, for saying so."""
    leftover_processes = processes_mentioning(str(workdir))
    kill(leftover_processes)
    in_pods = pod_processes()
    kill(in_pods)
    deadline = time.monotonic() + 5
    while pod_processes() and time.monotonic() < deadline:
        time.sleep(0.1)
    unmounted = unmount_under(workdir)
    netns = remove_pod_netns()
    bridge_removed = subprocess.run(["ip", "link", "delete", bridge], capture_output=True).returncode == 0
    remove_cgroups()
    proxy = bin_dir / "kube-proxy"
    if proxy.exists():
        subprocess.run([str(proxy), "--cleanup", "--v=0"], capture_output=True, timeout=60)
    remove_kube_chains()
    return {
        "processes": len(leftover_processes),
        "pod processes": len(in_pods),
        "mounts": unmounted,
        "network namespaces": netns,
        "bridges": int(bridge_removed),
    }


def record(workdir: Path, bridge: str, bin_dir: Path) -> None:
    """Note the running node (call with the real-node lock held)."""
    state = {"workdir": str(workdir), "bridge": bridge, "bin_dir": str(bin_dir), "pid": os.getpid()}
    STATE_FILE.write_text(json.dumps(state))


def forget() -> None:
    """The node stopped cleanly (call before releasing the lock)."""
    STATE_FILE.unlink(missing_ok=True)


def clean_after_killed_node(say: Callable[[str], None], *, lock: Path | None = None) -> dict[str, int] | None:
    """If a node's owner was killed before stopping it, clean what it left, by its work dir, and say
    so. With `lock`, takes the real-node lock first and does nothing if a live node holds it;
    without, the caller holds it. Returns what was removed, or None if no node was left behind."""
    with contextlib.ExitStack() as stack:
        if lock is not None:
            handle = stack.enter_context(lock.open("a"))
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return None  # a live node holds it, and its record is its own
        try:
            state = json.loads(STATE_FILE.read_text())
            workdir, bridge, bin_dir = Path(state["workdir"]), str(state["bridge"]), Path(state["bin_dir"])
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if not workdir.is_absolute():
            return None
        removed = sweep(workdir, bridge, bin_dir)
        forget()
        say(
            f"a previous real node (work dir {workdir}, owner pid {state.get('pid')}) was not stopped: "
            + ", ".join(f"{count} {what}" for what, count in removed.items())
            + " removed"
        )
        return removed
    return None


def workdir_leftovers(workdir: Path, bridge: str) -> list[str]:
    """Processes with the work dir in their command line, mounts under it, the node's bridge."""
    found = []
    for pid in processes_mentioning(str(workdir)):
        with contextlib.suppress(OSError):
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            found.append(f"process {pid}: {command}")
    found += [f"mount {mount}" for mount in mounts_under(workdir)]
    if Path(f"/sys/class/net/{bridge}").exists():
        found.append(f"network interface {bridge}")
    return found


def machine_leftovers() -> list[str]:
    """Pod processes, pod network namespaces, KUBE-* iptables chains: any node's (hold the lock)."""
    found = [f"pod process {pid}" for pid in pod_processes()]
    found += [f"network namespace {path}" for path in Path("/run/netns").glob("cni-*")]
    for table in ("filter", "nat", "mangle"):
        listed = subprocess.run(["iptables", "-w", "-t", table, "-S"], capture_output=True, text=True)
        chains = [line.split()[1] for line in listed.stdout.splitlines() if line.startswith("-N KUBE-")]
        found += [f"iptables {table} chain {chain}" for chain in chains]
    return found
