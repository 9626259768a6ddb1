"""Airflow's `airflow.io.path.ObjectStoragePath`: a path in object storage, read and written through fsspec.

`ObjectStoragePath("s3://aws_default@bucket/key")` names the bucket and key and, before `@`, the
connection (`conn_id`) whose credentials Airflow would use; Zonda passes `storage_options` (and the
connection's `extra` as storage options when the connection can be read) to fsspec's filesystem for
the protocol, whose package (`s3fs`, `gcsfs`, `adlfs`...) must be installed where the task runs.
Nothing is contacted until a method reads or writes: a DAG file may build paths at import time.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit


class ObjectStoragePath:
    """A `pathlib`-like path over any fsspec filesystem (`file://`, `s3://`, `gs://`, `memory://`...)."""

    conn_id: str | None
    storage_options: dict[str, Any]

    def __init__(self, path: str | ObjectStoragePath, *, conn_id: str | None = None, **storage_options: Any):
        if isinstance(path, ObjectStoragePath):
            conn_id = conn_id or path.conn_id
            storage_options = {**path.storage_options, **storage_options}
            path = str(path)
        parts = urlsplit(path)
        self.protocol = parts.scheme or "file"
        netloc = parts.netloc
        if "@" in netloc:
            given, netloc = netloc.rsplit("@", 1)
            conn_id = conn_id or given
        self.conn_id = conn_id
        self.storage_options = storage_options
        self._bucket = netloc
        self._key = parts.path if self.protocol == "file" and not netloc else parts.path.lstrip("/")
        self._fs: Any = None

    # ---- naming
    @property
    def bucket(self) -> str:
        return self._bucket

    @property
    def key(self) -> str:
        return self._key

    @property
    def path(self) -> str:
        """The path fsspec is given: `bucket/key` (or the local path)."""
        if not self._bucket:
            return self._key
        return posixpath.join(self._bucket, self._key) if self._key else self._bucket

    def __str__(self) -> str:
        if self.protocol == "file" and not self._bucket:
            return f"file://{self._key}"
        return f"{self.protocol}://{self.path}"

    def __repr__(self) -> str:
        return f"ObjectStoragePath({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ObjectStoragePath) and str(self) == str(other)

    def __hash__(self) -> int:
        return hash(str(self))

    def __fspath__(self) -> str:
        return self.path

    def _with_key(self, key: str) -> ObjectStoragePath:
        copied = ObjectStoragePath(str(self), conn_id=self.conn_id, **self.storage_options)
        copied._key = key
        copied._fs = self._fs
        return copied

    def __truediv__(self, other: str) -> ObjectStoragePath:
        return self.joinpath(other)

    def joinpath(self, *others: str) -> ObjectStoragePath:
        return self._with_key(posixpath.join(self._key, *(str(o) for o in others)))

    @property
    def name(self) -> str:
        return posixpath.basename(self._key.rstrip("/"))

    @property
    def stem(self) -> str:
        return posixpath.splitext(self.name)[0]

    @property
    def suffix(self) -> str:
        return posixpath.splitext(self.name)[1]

    @property
    def parent(self) -> ObjectStoragePath:
        return self._with_key(posixpath.dirname(self._key.rstrip("/")))

    # ---- the filesystem
    @property
    def fs(self) -> Any:
        """The fsspec filesystem for the protocol (imported and built on first use)."""
        if self._fs is None:
            import fsspec

            options = dict(self.storage_options)
            if self.conn_id:
                options = {**_connection_options(self.conn_id), **options}
            self._fs = fsspec.filesystem(self.protocol, **options)
        return self._fs

    def open(self, mode: str = "rb", **kwargs: Any) -> Any:
        return self.fs.open(self.path, mode, **kwargs)

    def exists(self) -> bool:
        return bool(self.fs.exists(self.path))

    def is_dir(self) -> bool:
        return bool(self.fs.isdir(self.path))

    def is_file(self) -> bool:
        return bool(self.fs.isfile(self.path))

    def mkdir(self, mode: int = 0o777, parents: bool = True, exist_ok: bool = False) -> None:
        if self.exists() and not exist_ok:
            raise FileExistsError(str(self))
        self.fs.makedirs(self.path, exist_ok=True)

    def iterdir(self) -> Iterator[ObjectStoragePath]:
        for entry in self.fs.ls(self.path, detail=False):
            yield self._with_key(posixpath.join(self._key, posixpath.basename(str(entry).rstrip("/"))))

    def unlink(self, missing_ok: bool = False) -> None:
        if missing_ok and not self.exists():
            return
        self.fs.rm(self.path)

    def read_bytes(self) -> bytes:
        with self.open("rb") as file:
            return bytes(file.read())

    def read_text(self, encoding: str = "utf-8") -> str:
        return self.read_bytes().decode(encoding)

    def write_bytes(self, data: bytes) -> int:
        with self.open("wb") as file:
            file.write(data)
        return len(data)

    def write_text(self, data: str, encoding: str = "utf-8") -> int:
        return self.write_bytes(data.encode(encoding))

    def stat(self) -> dict[str, Any]:
        return dict(self.fs.info(self.path))

    def size(self) -> int:
        return int(self.fs.size(self.path))

    def copy(self, destination: ObjectStoragePath) -> None:
        with self.open("rb") as source, destination.open("wb") as target:
            target.write(source.read())


def _connection_options(conn_id: str) -> dict[str, Any]:
    """The connection's `extra` as storage options, where the task can read it; none otherwise."""
    try:
        from zonda.variables import get_connection

        extra = get_connection(conn_id).extra_dejson
    except Exception:  # no such connection, or not in a cluster: fsspec's own defaults apply
        return {}
    return dict(extra) if isinstance(extra, dict) else {}
