"""The values in the XCom backend that a run's mapped KubernetesPodOperators map over, read for a
pass: their pods are built by the controller, so it picks each instance's items
(`zonda.passes.container_mapping`), including from a list too large for the run's status.

XComChunks are read with the controller's own client (the chart lets it `get` them); a value in
object storage (the fsspec backend) with the controller's credentials for that storage. A value read
once is kept (by URL, which names the try that wrote it, so it never changes), a few at a time. A
value that cannot be read (gone, forbidden, not JSON) is reported by URL, and the pass fails the
instances that need it, saying why; any other API error fails the reconcile, which is retried.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from controller.kube import KubeApi, KubeError
from controller.xcom.backends import XComStore
from controller.xcom.reads import read_chunks
from zonda.resources import xcom_chunks
from zonda.tries import xcoms

#: Values kept between passes: a few lists, each mapped over by a run's pods for many passes.
CACHED_VALUES = 16
#: API answers that will not change on a retry: the value is reported unreadable.
_FOR_GOOD = frozenset({403, 404})


@dataclass
class StoredXComReader:
    kube: KubeApi
    _cache: OrderedDict[str, Any] = field(default_factory=OrderedDict)

    async def read(self, urls: Mapping[str, int | None]) -> tuple[dict[str, Any], dict[str, str]]:
        """The values by URL (`urls` maps each to its size), and why any other could not be read."""
        values: dict[str, Any] = {}
        unreadable: dict[str, str] = {}
        for url, size in urls.items():
            if url in self._cache:
                self._cache.move_to_end(url)
                values[url] = self._cache[url]
                continue
            try:
                values[url] = await self._read(url, size)
            except KubeError as error:
                if error.status not in _FOR_GOOD:
                    raise
                unreadable[url] = f"{error.status}: {error.api_message}"
                continue
            except (xcoms.XComError, ValueError) as error:  # ChunkError is a ValueError
                unreadable[url] = str(error)
                continue
            self._cache[url] = values[url]
            while len(self._cache) > CACHED_VALUES:
                self._cache.popitem(last=False)
        return values, unreadable

    async def _read(self, url: str, size: int | None) -> Any:
        if xcom_chunks.is_chunk_url(url):
            return await read_chunks(self.kube, url, size)
        reference = xcoms.stored_reference(url, size or 0)
        return await asyncio.to_thread(XComStore(backend="none").load, reference)
