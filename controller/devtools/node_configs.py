"""The real node's configuration files: containerd's, the CNI network's, the kubelet's and
kube-proxy's, each a function of the work dir and ports (controller/devtools/realnode.py writes them)."""

from __future__ import annotations

from pathlib import Path

NODE_NAME = "zonda-real-node"
POD_SUBNET = "10.89.0.0/16"


def containerd_config(workdir: Path, pause_image: str) -> str:
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


def cni_config(workdir: Path, bridge: str) -> dict[str, object]:
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


def kubelet_config(workdir: Path, address: str, port: int, healthz_port: int) -> dict[str, object]:
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


def kube_proxy_config(workdir: Path, healthz_port: int, metrics_port: int) -> dict[str, object]:
    """iptables mode, touching no sysctl the shared machine owns (conntrack sizes and timeouts,
    route_localnet), so it only adds its own KUBE-* chains, which `kube-proxy --cleanup` removes."""
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(workdir / "kube-proxy.kubeconfig")},
        "hostnameOverride": NODE_NAME,
        "mode": "iptables",
        "clusterCIDR": POD_SUBNET,
        "detectLocalMode": "ClusterCIDR",
        "healthzBindAddress": f"127.0.0.1:{healthz_port}",
        "metricsBindAddress": f"127.0.0.1:{metrics_port}",
        "iptables": {"localhostNodePorts": False, "syncPeriod": "30s", "minSyncPeriod": "0s"},
        "conntrack": {
            "maxPerCore": 0,
            "min": 0,
            "tcpEstablishedTimeout": "0s",
            "tcpCloseWaitTimeout": "0s",
            "udpTimeout": "0s",
            "udpStreamTimeout": "0s",
        },
    }
