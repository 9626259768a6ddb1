"""What a local control plane is made of before anything starts: the Go-built binaries (found, or
built on request), the apiserver's CA and serving certificate, its kubeconfig, and kwok's fake Nodes.

Apart from `devcluster.py`, which starts and stops the processes, because these are the inputs it
hands them: files and manifests, each made by one function that is easy to read (and test) alone.
`ClusterError` lives here since finding the binaries is the first thing that can fail.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from collections.abc import Sequence
from pathlib import Path

#: What the main job's first screen needs (the local executor runs tasks as processes, not pods).
API_BINARIES = ("etcd", "kube-apiserver", "kubectl")
#: What pods need on top: scheduling, kwok's simulated kubelets, service accounts and GC.
NODE_BINARIES = ("kube-controller-manager", "kube-scheduler", "kwok")
#: Every binary: the tests also render the chart with helm.
ALL_BINARIES = (*API_BINARIES, *NODE_BINARIES, "helm")
BUILD_SCRIPT = Path(__file__).resolve().parents[2] / "hack" / "build-cluster-binaries.sh"


class ClusterError(RuntimeError):
    """The control plane could not be built, started or reached; the message says which part."""


def binaries_dir(required: Sequence[str] = ALL_BINARIES, *, build: bool = False) -> Path:
    """The directory holding the `required` Go-built binaries: `$ZONDA_BIN_DIR`, else the build cache.

    Cached only unless `build`: a missing binary raises at once with the command that builds it, so
    nothing starts a many-minute build behind a test's or a tool's back. With `build=True` the hack
    script builds what is missing, printing its progress on stderr.
    """
    if env := os.environ.get("ZONDA_BIN_DIR"):
        found = Path(env)
        _require(found, required, "$ZONDA_BIN_DIR")
        return found
    if not BUILD_SCRIPT.exists():
        raise ClusterError("set ZONDA_BIN_DIR: hack/build-cluster-binaries.sh is not next to this package")
    if not build:
        cached = subprocess.run(["bash", str(BUILD_SCRIPT), "--print-dir"], stdout=subprocess.PIPE, text=True)
        found = Path(cached.stdout.strip())
        _require(found, required, "the build cache")
        return found
    result = subprocess.run(["bash", str(BUILD_SCRIPT), *required], stdout=subprocess.PIPE, text=True)
    if result.returncode != 0:
        raise ClusterError(f"building the control-plane binaries failed (exit {result.returncode})")
    return Path(result.stdout.strip().splitlines()[-1])


def _require(directory: Path, required: Sequence[str], where: str) -> None:
    missing = [name for name in required if not (directory / name).is_file()]
    if missing:
        raise ClusterError(
            f"control-plane binaries not built: {', '.join(missing)} missing in {where} ({directory}). "
            f"Build them once with `bash hack/build-cluster-binaries.sh {' '.join(missing)}` "
            "(`make binaries` builds all seven): 7-23 minutes on 2 cores from empty Go caches, then cached."
        )


def write_kubeconfig(path: Path, server: str, ca_file: Path | None, token: str) -> None:
    cluster: dict[str, object] = {"server": server}
    if ca_file is not None:
        cluster["certificate-authority"] = str(ca_file)
    else:
        cluster["insecure-skip-tls-verify"] = True
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "zonda-local", "cluster": cluster}],
        "users": [{"name": "zonda-admin", "user": {"token": token}}],
        "contexts": [{"name": "zonda-local", "context": {"cluster": "zonda-local", "user": "zonda-admin"}}],
        "current-context": "zonda-local",
    }
    path.write_text(json.dumps(config, indent=2))


SERVICE_CIDR = "10.96.0.0/16"
#: The `kubernetes` Service's ClusterIP: the first address of SERVICE_CIDR.
KUBERNETES_SERVICE_IP = "10.96.0.1"


def serving_certificate(certs: Path, advertise: str) -> tuple[Path, tuple[Path, Path]]:
    """A CA and the apiserver's serving certificate signed by it: (CA file, (cert, key)).

    Its names are every way a client reaches the apiserver: loopback (kubeconfigs), the advertised
    host address, and the `kubernetes` Service (ClusterIP and DNS names) that in-cluster clients use.
    The apiserver's own self-signed fallback would name only one address.
    """
    ca_key, ca_crt, key, csr, crt = (
        certs / n for n in ("ca.key", "ca.crt", "apiserver.key", "apiserver.csr", "apiserver.crt")
    )
    names = ["localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"]
    names.append("kubernetes.default.svc.cluster.local")
    addresses = sorted({"127.0.0.1", advertise, KUBERNETES_SERVICE_IP})
    san = ",".join([*(f"DNS:{n}" for n in names), *(f"IP:{a}" for a in addresses)])
    extensions = certs / "apiserver.ext"
    extensions.write_text(
        f"subjectAltName={san}\nbasicConstraints=critical,CA:FALSE\n"
        "keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n"
        "authorityKeyIdentifier=keyid\nsubjectKeyIdentifier=hash\n"
    )
    q = {name: shlex.quote(str(path)) for name, path in locals().items() if isinstance(path, Path)}
    for command in (
        f"req -x509 -newkey rsa:2048 -nodes -days 3650 -subj /CN=zonda-local-ca -keyout {q['ca_key']}"
        f" -out {q['ca_crt']}",
        f"req -newkey rsa:2048 -nodes -subj /CN=kube-apiserver -keyout {q['key']} -out {q['csr']}",
        f"x509 -req -CAcreateserial -days 3650 -CA {q['ca_crt']} -CAkey {q['ca_key']} -in {q['csr']}"
        f" -out {q['crt']} -extfile {q['extensions']}",
    ):
        subprocess.run(["openssl", *shlex.split(command)], check=True, capture_output=True)
    return ca_crt, (crt, key)


def kwok_node_manifest(name: str) -> dict[str, object]:
    resources = {"cpu": "64", "memory": "256Gi", "pods": "1000", "ephemeral-storage": "1Ti"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "type": "kwok",
            },
        },
        "status": {
            "allocatable": resources,
            "capacity": resources,
            "nodeInfo": {
                "architecture": "amd64",
                "operatingSystem": "linux",
                "kubeletVersion": "fake",
                "kernelVersion": "",
                "osImage": "",
                "containerRuntimeVersion": "",
                "kubeProxyVersion": "",
                "bootID": "",
                "machineID": "",
                "systemUUID": "",
            },
        },
    }
