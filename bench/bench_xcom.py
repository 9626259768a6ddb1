"""Benchmark: writing and reading XCom values through each backend, by size.

    python bench/bench_xcom.py [--backend kubernetes|file|URL] [--sizes 1e3,1e5,1e6,1e7,6.7e7]
                               [--repeat 3] [--max-bytes N] [--kubeconfig PATH]

For each size, a string value of that many characters is prepared as the runner does at the end of a
try (JSON-serialised, size-checked, written to the backend: `XComStore.prepare`) and read back as a
downstream try does (`XComStore.load`, with a fresh store: no cache). Prints the median write and read
times, the chunks (Kubernetes), the bytes kept in the DagRun's status for it, and the machine's load.

`kubernetes` (the default) writes XComChunks through the runner's REST client: to `--kubeconfig`'s
cluster, or to a local control plane (etcd + kube-apiserver, `controller.devtools.devcluster`) started
for the run and stopped after, in a namespace of its own, owned by a DagRun created for the purpose.
`file` writes to a temporary directory through fsspec; any other value is an fsspec base URL.
`--max-bytes` raises the maximum (default 64 MiB) to find where a backend stops.
Asserts nothing: performance is measured here.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from controller.kube.rest import KubeRest
from controller.xcom.backends import XComStore
from zonda.resources import xcom_chunks
from zonda.resources.invocations import TaskInvocation
from zonda.resources.models import API_VERSION, GROUP, VERSION
from zonda.resources.run_types import RunType
from zonda.tries import xcoms


@contextlib.contextmanager
def kubernetes_target(kubeconfig: str | None) -> Iterator[tuple[str, str, str]]:
    """(kubeconfig, namespace, owner DagRun uid): the given cluster's, or a local control plane's."""
    with contextlib.ExitStack() as stack:
        if kubeconfig is None:
            from controller.devtools.devcluster import start_local_cluster

            cluster = start_local_cluster(nodes=False)
            stack.callback(cluster.stop)
            kubeconfig = str(cluster.kubeconfig)
        kube = KubeRest.connect(kubeconfig)
        namespace = f"bench-xcom-{uuid.uuid4().hex[:6]}"
        kube.request("POST", "/api/v1/namespaces", {"metadata": {"name": namespace}})
        stack.callback(kube.request, "DELETE", f"/api/v1/namespaces/{namespace}")
        run = {
            "apiVersion": API_VERSION,
            "kind": "DagRun",
            "metadata": {"name": "bench", "namespace": namespace},
            "spec": {"dagName": "bench", "runType": "manual"},
        }
        created = kube.request("POST", KubeRest.custom_path(GROUP, VERSION, namespace, "dagruns"), run) or {}
        yield kubeconfig, namespace, created["metadata"]["uid"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", default="kubernetes", help="kubernetes, file, or an fsspec base URL")
    parser.add_argument("--sizes", default="1e3,1e5,1e6,1e7,6.7e7")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--max-bytes", type=int, default=xcoms.DEFAULT_MAX_BYTES)
    parser.add_argument("--kubeconfig", default=None, help="kubernetes: this cluster (default: a local one)")
    arguments = parser.parse_args()
    with contextlib.ExitStack() as stack:
        namespace, uid, kubeconfig = "bench", None, None
        if arguments.backend == "kubernetes":
            kubeconfig, namespace, uid = stack.enter_context(kubernetes_target(arguments.kubeconfig))
            store = XComStore(backend="kubernetes", kubeconfig=kubeconfig, max_bytes=arguments.max_bytes)
            where = f"XComChunks in namespace {namespace} ({xcom_chunks.CHUNK_BYTES} bytes a chunk)"
        else:
            url = arguments.backend
            if url == "file":
                url = f"file://{stack.enter_context(tempfile.TemporaryDirectory())}"
            store = XComStore(backend="fsspec", base_url=url, max_bytes=arguments.max_bytes)
            where = url
        print(f"backend {where}; max {store.max_bytes} bytes; inline up to {store.inline_limit} bytes")
        print(f"{'value bytes':>12} {'write ms':>10} {'read ms':>10} {'chunks':>7} {'in status':>10}")
        for size in (int(float(s)) for s in arguments.sizes.split(",")):
            measure(store, size, arguments.repeat, namespace, uid, kubeconfig)
    load = os.getloadavg()
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs")


def measure(
    store: XComStore, size: int, repeat: int, namespace: str, uid: str | None, kubeconfig: str | None
) -> None:
    value = "x" * (size - 2)  # its JSON (quoted) is `size` bytes
    writes, reads, kept, chunks = [], [], 0, "-"
    for attempt in range(repeat):
        at = datetime(2024, 1, 1, tzinfo=UTC)
        invocation = TaskInvocation(
            dag_name="bench", run_name="bench", run_uid=uid, namespace=namespace, run_type=RunType.MANUAL,
            task_id=f"produce-{size}", try_number=attempt + 1, operator="PythonOperator",
            logical_date=at, data_interval_start=at, data_interval_end=at,
        )  # fmt: skip
        started = time.perf_counter()
        try:
            prepared = store.prepare(invocation, xcoms.RETURN_KEY, value)
        except (xcoms.XComError, OSError) as error:
            print(f"{size:>12} refused: {str(error)[:300]}")
            return
        writes.append(time.perf_counter() - started)
        kept = len(json.dumps(prepared))
        if xcoms.is_stored(prepared) and xcom_chunks.is_chunk_url(xcoms.stored_url(prepared)):
            chunks = str(xcom_chunks.parse_url(xcoms.stored_url(prepared))[2])
        reader = XComStore(backend=store.chosen_backend, base_url=store.base_url, kubeconfig=kubeconfig)
        started = time.perf_counter()
        assert len(reader.load(prepared)) == len(value)
        reads.append(time.perf_counter() - started)
    write_ms = statistics.median(writes) * 1000
    read_ms = statistics.median(reads) * 1000
    print(f"{size:>12} {write_ms:>10.1f} {read_ms:>10.1f} {chunks:>7} {kept:>10}", flush=True)


if __name__ == "__main__":
    main()
