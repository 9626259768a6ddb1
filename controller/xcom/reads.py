"""Reading a stored XCom value's XComChunks with the async client (the controller and the UI; the
task runner reads them with its own small REST client, `controller.xcom.chunks`)."""

from __future__ import annotations

from typing import Any

from controller.kube.protocol import KubeApi
from zonda.resources import xcom_chunks
from zonda.tries import xcoms


async def read_chunks(kube: KubeApi, url: str, size: int | None) -> Any:
    """A stored value's XComChunks, joined and parsed (ChunkError when one is missing)."""
    namespace, base, count = xcom_chunks.parse_url(url)
    specs = []
    for index in range(count):
        name = xcom_chunks.chunk_name(base, index)
        body = await kube.get_custom(xcom_chunks.PLURAL, namespace, name)
        if body is None:
            raise xcom_chunks.ChunkError(f"XComChunk {namespace}/{name} is gone")
        specs.append(xcom_chunks.XComChunkSpec.model_validate(body.get("spec") or {}))
    return xcoms.deserialize(xcom_chunks.join(url, specs, size))
