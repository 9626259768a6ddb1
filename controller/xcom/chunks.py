"""The Kubernetes XCom backend's I/O: write a value as `XComChunk` objects, read one back.

What the objects are and why is in `zonda.resources.xcom_chunks`. Writes are creates (measured four times
cheaper than server-side applies of a 1 MiB object), and a server-side apply when the chunk exists
(a try that runs again rewrites its own chunks); reads are `get`s by name (no list), so task pods
need exactly create/patch/get on `xcomchunks` (the chart's task Role).
"""

from __future__ import annotations

from controller.kube.rest import KubeRest, KubeRestError
from zonda.resources import xcom_chunks
from zonda.resources.models import GROUP, VERSION

FIELD_MANAGER = "zonda-runner"


def write(
    kube: KubeRest,
    data: bytes,
    *,
    namespace: str,
    run_name: str,
    run_uid: str | None,
    task_id: str,
    map_index: int,
    try_number: int,
    key: str,
) -> str:
    """Store `data` in chunks owned by the run; the reference URL to keep in status."""
    base = xcom_chunks.base_name(run_name, task_id, map_index, try_number, key)
    specs = xcom_chunks.chunk_specs(
        data, run_name=run_name, task_id=task_id, map_index=map_index, try_number=try_number, key=key
    )
    for spec in specs:
        body = xcom_chunks.manifest(namespace, base, spec, run_name, run_uid)
        try:
            kube.create_custom(GROUP, VERSION, xcom_chunks.PLURAL, body, FIELD_MANAGER)
        except KubeRestError as error:
            if error.status != 409:
                raise
            # The same try ran again (its pod was replaced): make the existing chunk this value.
            kube.apply_custom(GROUP, VERSION, xcom_chunks.PLURAL, body, FIELD_MANAGER)
    return xcom_chunks.reference_url(namespace, base, len(specs))


def read(kube: KubeRest, url: str, size: int | None = None) -> bytes:
    """The bytes a reference URL points to; ChunkError when a chunk is missing or does not fit."""
    namespace, base, count = xcom_chunks.parse_url(url)
    specs = []
    for index in range(count):
        name = xcom_chunks.chunk_name(base, index)
        body = kube.get_custom(GROUP, VERSION, namespace, xcom_chunks.PLURAL, name)
        if body is None:
            raise xcom_chunks.ChunkError(
                f"XComChunk {namespace}/{name} is gone (deleted with its DagRun, or never written)"
            )
        specs.append(xcom_chunks.XComChunkSpec.model_validate(body.get("spec") or {}))
    return xcom_chunks.join(url, specs, size)
