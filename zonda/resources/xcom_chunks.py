"""The Kubernetes XCom backend's objects: a large value as `XComChunk` resources owned by its DagRun.

A value too large for the DagRun's status is split into chunks of `CHUNK_BYTES` (768 KiB, 1 MiB once
base64-encoded: well under etcd's 1.5 MiB request limit, with room for metadata) and each chunk is an
`XComChunk` object named `<run>-<digest>-<index>`, the digest covering (run, task, map index, try,
key): a chunk's name is known without listing, so a reader needs only `get`, and a retry of the same
try rewrites the same objects. Each chunk is owned by the DagRun (`ownerReferences`), so the garbage
collector deletes a run's XComs with the run. The stored reference kept in status is the URL
`xcomchunks://<namespace>/<base name>?chunks=<n>`.

A dedicated kind rather than ConfigMaps: the chart can grant task pods exactly this resource
(create, get, patch) without opening every ConfigMap of the namespace to task code.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any
from urllib.parse import parse_qs, urlsplit

from pydantic import Field

from zonda.resources.models import API_VERSION, CrdModel

KIND = "XComChunk"
PLURAL = "xcomchunks"
URL_SCHEME = "xcomchunks"
#: Raw bytes per chunk; its base64 text (1 MiB) plus metadata stays under etcd's 1.5 MiB request limit.
CHUNK_BYTES = 768 * 1024
#: Room kept for `-<digest>-<index>` in a Kubernetes name (253 characters at most).
_RUN_PREFIX_CHARS = 200


class XComChunkSpec(CrdModel):
    """One piece of one XCom value; the pieces of a value, joined by `index`, are its JSON."""

    dag_run: str = Field(description="The DagRun whose task pushed the value (also the owner).")
    task_id: str
    map_index: int = Field(default=-1, description="The mapped instance; -1 for an unmapped task.")
    key: str = Field(description="The XCom key (return_value for a return value).")
    try_number: int
    index: int = Field(ge=0, description="This chunk's position among the value's chunks.")
    count: int = Field(ge=1, description="How many chunks the value has.")
    size: int = Field(ge=0, description="The value's JSON, in bytes (all chunks).")
    data: str = Field(description="This chunk's bytes, base64-encoded.")


class ChunkError(ValueError):
    """Stored chunks that do not make up the value their reference announces."""


def base_name(run_name: str, task_id: str, map_index: int, try_number: int, key: str) -> str:
    """The chunks' common name: the run (truncated) and a digest of everything identifying the value."""
    identity = "\0".join((run_name, task_id, str(map_index), str(try_number), key))
    digest = hashlib.sha256(identity.encode()).hexdigest()[:16]
    prefix = run_name[:_RUN_PREFIX_CHARS].rstrip("-.")
    return f"{prefix}-{digest}"


def chunk_name(base: str, index: int) -> str:
    return f"{base}-{index}"


def split(data: bytes, chunk_bytes: int = CHUNK_BYTES) -> list[bytes]:
    """The value's bytes in chunks of at most `chunk_bytes` (one empty chunk for empty data)."""
    return [data[start : start + chunk_bytes] for start in range(0, len(data), chunk_bytes)] or [b""]


def reference_url(namespace: str, base: str, count: int) -> str:
    return f"{URL_SCHEME}://{namespace}/{base}?chunks={count}"


def is_chunk_url(url: str) -> bool:
    return url.startswith(f"{URL_SCHEME}://")


def parse_url(url: str) -> tuple[str, str, int]:
    """(namespace, base name, chunk count) of a reference URL; ChunkError when it is not one."""
    parts = urlsplit(url)
    counts = parse_qs(parts.query).get("chunks", [])
    base = parts.path.strip("/")
    well_formed = parts.scheme == URL_SCHEME and parts.netloc and base
    if not well_formed or len(counts) != 1 or not counts[0].isdigit():
        raise ChunkError(f"not an XComChunk reference: {url!r}")
    return parts.netloc, base, int(counts[0])


def manifest(
    namespace: str, base: str, spec: XComChunkSpec, owner_name: str, owner_uid: str | None
) -> dict[str, Any]:
    """The chunk's object; owned by its DagRun when the run's uid is known (deleted with the run)."""
    metadata: dict[str, Any] = {
        "name": chunk_name(base, spec.index),
        "namespace": namespace,
        "labels": {"app.kubernetes.io/managed-by": "zonda"},
    }
    if owner_uid:
        metadata["ownerReferences"] = [
            {"apiVersion": API_VERSION, "kind": "DagRun", "name": owner_name, "uid": owner_uid}
        ]
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": metadata, "spec": spec.to_wire()}


def chunk_specs(
    data: bytes, *, run_name: str, task_id: str, map_index: int, try_number: int, key: str
) -> list[XComChunkSpec]:
    """The specs of the chunks holding `data`."""
    pieces = split(data)
    return [
        XComChunkSpec(
            dag_run=run_name,
            task_id=task_id,
            map_index=map_index,
            key=key,
            try_number=try_number,
            index=index,
            count=len(pieces),
            size=len(data),
            data=base64.b64encode(piece).decode("ascii"),
        )
        for index, piece in enumerate(pieces)
    ]


def join(url: str, specs: list[XComChunkSpec], size: int | None = None) -> bytes:
    """The value's bytes from its chunks in order; ChunkError naming what is missing or inconsistent."""
    _, base, count = parse_url(url)
    if len(specs) != count:
        raise ChunkError(f"{url}: {len(specs)} of {count} chunks")
    pieces = []
    for index, spec in enumerate(specs):
        if spec.index != index or spec.count != count:
            raise ChunkError(
                f"{chunk_name(base, index)} is chunk {spec.index} of {spec.count}, not {index} of {count}"
            )
        pieces.append(base64.b64decode(spec.data))
    data = b"".join(pieces)
    expected = specs[0].size if size is None else size
    if len(data) != expected:
        raise ChunkError(f"{url}: the chunks hold {len(data)} bytes, the value has {expected}")
    return data
