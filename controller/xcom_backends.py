"""Where XCom values too large for the DagRun's status are written: object storage through fsspec.

The backend is a base URL in `$ZONDA_XCOM_BACKEND_URL` (the chart's `xcom.backendUrl`): any URL fsspec
opens — `s3://bucket/xcom`, `gcs://...`, `abfs://...` with their fsspec package installed, or
`file:///mnt/xcom` on a shared volume. Without one, a value larger than the inline limit fails the task
saying so. `$ZONDA_XCOM_MAX_BYTES` caps a value (default `zonda.xcoms.DEFAULT_MAX_BYTES`).

A reference holds the object's full URL, so reading needs no configuration: `zonda xcom get` and a
downstream task read what the upstream wrote wherever they run (given the storage's credentials).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import fsspec

from zonda import xcoms
from zonda.invocations import TaskInvocation
from zonda.templating import XComReader

BACKEND_URL_ENV = "ZONDA_XCOM_BACKEND_URL"
MAX_BYTES_ENV = "ZONDA_XCOM_MAX_BYTES"


def task_environment(environ: Mapping[str, str]) -> tuple[dict[str, str], ...]:
    """The controller's XCom settings as env entries for task pods (local tries inherit them)."""
    names = (BACKEND_URL_ENV, MAX_BYTES_ENV)
    return tuple({"name": name, "value": environ[name]} for name in names if environ.get(name))


@dataclass(frozen=True)
class XComStore:
    """Writes values over the inline limit to `base_url` (None: no backend) and reads references back."""

    base_url: str | None = None
    max_bytes: int = xcoms.DEFAULT_MAX_BYTES
    inline_limit: int = xcoms.INLINE_LIMIT_BYTES
    _cache: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_environment(cls) -> XComStore:
        max_bytes = os.environ.get(MAX_BYTES_ENV)
        return cls(
            base_url=os.environ.get(BACKEND_URL_ENV) or None,
            max_bytes=int(max_bytes) if max_bytes else xcoms.DEFAULT_MAX_BYTES,
        )

    def prepare(self, invocation: TaskInvocation, key: str, value: Any) -> Any:
        """The value as the result carries it: its JSON form inline, or a reference to what was written.

        Raises `XComError` for a value that is not JSON, over the maximum, or too large without a backend.
        """
        data = xcoms.serialize(key, value)
        xcoms.check_size(key, len(data), self.max_bytes)
        if len(data) <= self.inline_limit:
            return xcoms.deserialize(data)
        if self.base_url is None:
            raise xcoms.XComError(
                f"XCom {key!r} is {len(data)} bytes; values over {self.inline_limit} bytes need an XCom "
                f"backend: set xcom.backendUrl in the chart (${BACKEND_URL_ENV}), or return less"
            )
        path = xcoms.object_path(
            invocation.namespace or "default",
            invocation.run_name,
            invocation.task_id,
            invocation.try_number,
            key,
            invocation.map_index,  # mapped instances of one task write apart
        )
        url = f"{self.base_url.rstrip('/')}/{path}"
        with fsspec.open(url, "wb", auto_mkdir=True) as stream:
            stream.write(data)
        return xcoms.stored_reference(url, len(data))

    def load(self, value: Any) -> Any:
        """A value read from status: a reference is read from storage (once per URL), any other as is."""
        if not xcoms.is_stored(value):
            return value
        url = xcoms.stored_url(value)
        if url not in self._cache:
            try:
                with fsspec.open(url, "rb") as stream:
                    self._cache[url] = xcoms.deserialize(stream.read())
            except (OSError, ValueError) as error:
                raise xcoms.XComError(f"cannot read the stored XCom at {url}: {error}") from error
        return self._cache[url]

    def loading(self, reader: XComReader) -> XComReader:
        """`reader`, with stored references read back."""

        def read(task_id: str, key: str) -> Any:
            return self.load(reader(task_id, key))

        return read
