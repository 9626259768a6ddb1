"""A real node whose owner is killed (SIGKILL: no `stop()`) leaves containerd, the kubelet,
kube-proxy, shims, running containers, their mounts, network namespaces, its bridge and iptables
chains; the next start cleans them by the recorded work dir, and says so.

What is real: a child process starts the local control plane with the real node and a running pod,
and is killed with SIGKILL, as `zonda up --real-node` or a test session can be.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from controller.devtools import node_cleanup, realnode
from controller.devtools.devcluster import REPO_ROOT

OWNER = """
import json, sys, time
from controller.devtools.devcluster import start_local_cluster
cluster = start_local_cluster(real_node=True)
node = cluster.real_node
image = next(i for i in node.images if i.rsplit("/", 1)[-1].startswith("zonda:"))
pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "left", "namespace": "default"},
       "spec": {"nodeSelector": {"zonda.dev/node": "real"}, "restartPolicy": "Never",
                "containers": [{"name": "c", "image": image, "imagePullPolicy": "Never",
                                "command": ["sleep", "3600"]}]}}
cluster.kubectl("apply", "-f", "-", input=json.dumps(pod))
while cluster.kubectl("get", "pod", "left", "-o", "jsonpath={.status.phase}").stdout != "Running":
    time.sleep(0.5)
print(json.dumps({"workdir": str(node.workdir), "bridge": node.bridge,
                  "cluster": str(cluster.workdir)}), flush=True)
time.sleep(3600)
"""


def test_the_next_start_cleans_what_a_killed_nodes_owner_left_and_says_so(tmp_path: Path) -> None:
    log = tmp_path / "owner.log"
    with log.open("wb") as err:
        owner = subprocess.Popen(
            [sys.executable, "-c", OWNER],
            stdout=subprocess.PIPE,
            stderr=err,
            cwd=REPO_ROOT,
            env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)),
        )
    assert owner.stdout is not None
    line = owner.stdout.readline()
    assert line, f"the owner did not start its node: {log.read_text()[-3000:]}"
    started = json.loads(line)
    workdir, bridge, cluster_dir = Path(started["workdir"]), started["bridge"], Path(started["cluster"])
    owner.send_signal(signal.SIGKILL)
    owner.wait()
    try:
        said: list[str] = []
        with realnode.LOCK_FILE.open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # what the next start takes first
            left = node_cleanup.workdir_leftovers(workdir, bridge) + node_cleanup.machine_leftovers()
            for piece in ("kubelet", "kube-proxy", "pod process", "mount ", "nat chain KUBE-SERVICES"):
                assert any(piece in item for item in left), (piece, left)
            removed = node_cleanup.clean_after_killed_node(said.append)
            assert node_cleanup.workdir_leftovers(workdir, bridge) + node_cleanup.machine_leftovers() == []
        assert removed is not None and removed["processes"] > 0 and removed["mounts"] > 0, removed
        assert len(said) == 1 and str(workdir) in said[0] and "was not stopped" in said[0], said
        assert not node_cleanup.STATE_FILE.exists()
    finally:
        # The killed owner's control plane (etcd, apiserver, ...): what `zonda up` cleans by its record.
        node_cleanup.kill(node_cleanup.processes_mentioning(str(cluster_dir)))
        shutil.rmtree(cluster_dir, ignore_errors=True)
