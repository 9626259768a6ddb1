"""The standard provider's file triggers (`airflow.providers.standard.triggers.file`), Airflow's names
and arguments: `FileTrigger` fires once a file, or a directory holding a file, exists at a path or glob;
`FileDeleteTrigger` and `DirectoryFileDeleteTrigger` fire when a file appears and delete it, so an
asset watcher built on them (Airflow 3's `example_asset_with_watchers`) updates the asset once per file.
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat
import warnings
from collections.abc import AsyncIterator, Hashable
from datetime import datetime
from glob import glob
from typing import Any

from zonda.triggers.base import BaseEventTrigger, BaseTrigger, TriggerEvent


class FileTrigger(BaseTrigger):
    """Poll for `filepath` every `poke_interval` seconds and fire ``TriggerEvent(True)`` when found.

    The path is on the triggerer's filesystem (a volume mounted into the triggerer Pod).

    :param filepath: a path or a glob pattern.
    :param recursive: let ``**`` in `filepath` match any files and directories, as `glob.glob` does.
    :param poke_interval: seconds between checks. Airflow's deprecated `poll_interval` is accepted too.
    """

    def __init__(
        self, filepath: str, recursive: bool = False, poke_interval: float = 5.0, **kwargs: Any
    ) -> None:
        super().__init__()
        self.filepath = filepath
        self.recursive = recursive
        if kwargs.get("poll_interval") is not None:
            warnings.warn(
                "`poll_interval` has been deprecated and will be removed in future. "
                "Please use `poke_interval` instead.",
                DeprecationWarning,
                stacklevel=2,
            )
            self.poke_interval = float(kwargs["poll_interval"])
        else:
            self.poke_interval = float(poke_interval)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            "zonda.triggers.file.FileTrigger",
            {"filepath": self.filepath, "recursive": self.recursive, "poke_interval": self.poke_interval},
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        """Check, then sleep `poke_interval`, until a match.

        The check itself is a synchronous `glob`, as in Airflow: cheap for a plain path, but a
        recursive glob over a large tree blocks the loop (the triggerer's watchdog reports it).
        """
        while True:
            found = self._find()
            if found is not None:
                self.log.info("Found %s", found)
                yield TriggerEvent(True)
                return
            await asyncio.sleep(self.poke_interval)

    def _find(self) -> str | None:
        for path in glob(self.filepath, recursive=self.recursive):
            if os.path.isfile(path):
                modified = datetime.fromtimestamp(os.path.getmtime(path)).strftime("%Y%m%d%H%M%S")
                return f"file {path} last modified: {modified}"
            # Airflow walks the pattern itself here; walking the matched directory is what it means.
            for directory, _, files in os.walk(path):
                if files:
                    return f"directory {directory} holding {files[0]}"
        return None


def _occurrence(found: os.stat_result) -> str:
    """One file's identity, the same wherever it is read: a new file at the same path (or the same file
    written again) differs in its inode or its times."""
    return f"{found.st_dev}-{found.st_ino}-{found.st_mtime_ns}-{found.st_ctime_ns}-{found.st_size}"


def _take(path: str) -> str | None:
    """Delete the file at `path` and return its occurrence key; None when it is no file (any more):
    another replica, or a sibling trigger, took it first."""
    try:
        found = os.stat(path)
        if not stat.S_ISREG(found.st_mode):
            return None
        os.remove(path)
    except FileNotFoundError:
        return None
    return _occurrence(found)


class FileDeleteTrigger(BaseEventTrigger):
    """Fire ``TriggerEvent(True)`` once the file `filepath` exists, after deleting it (Airflow's).

    As an asset watcher it is started again after each event, so every file that appears at the path
    is one AssetEvent: the payload is ``True`` each time, and `event_key` (the deleted file's inode and
    times) tells them apart. The path is on the triggerer's filesystem (a volume in its Pod).

    :param filepath: the file's path (no glob).
    :param poke_interval: seconds between checks.
    """

    def __init__(self, filepath: str, poke_interval: float = 5.0, **kwargs: Any) -> None:
        super().__init__()
        self.filepath = filepath
        self.poke_interval = float(poke_interval)
        self._taken: str | None = None

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            "zonda.triggers.file.FileDeleteTrigger",
            {"filepath": self.filepath, "poke_interval": self.poke_interval},
        )

    def event_key(self, event: TriggerEvent) -> str | None:
        return self._taken

    async def run(self) -> AsyncIterator[TriggerEvent]:
        while True:
            self._taken = self._take()
            if self._taken is not None:
                yield TriggerEvent(True)
                return
            await asyncio.sleep(self.poke_interval)

    def _take(self) -> str | None:
        if not os.path.isfile(self.filepath):
            return None
        modified = datetime.fromtimestamp(os.path.getmtime(self.filepath)).strftime("%Y%m%d%H%M%S")
        self.log.info("Found file %s last modified: %s", self.filepath, modified)
        # Airflow's unlink raises when the file went meanwhile; here it is the next check's.
        taken = _take(self.filepath)
        if taken is not None:
            self.log.info("File %s has been deleted", self.filepath)
        return taken


class DirectoryFileDeleteTrigger(BaseEventTrigger):
    """Fire ``TriggerEvent({"filepath": ...})`` once `filename` appears in `directory`, after deleting
    it (Airflow 3.3's). Airflow's triggerer lets siblings with the same directory and `poke_interval`
    share one listing (`shared_stream_key`); Zonda's runs each one's own listing (`run`, Airflow's
    standalone fallback), with the same events. Each file is one AssetEvent, as `FileDeleteTrigger`'s.

    :param directory: the directory to list.
    :param filename: the file name (without directory) that fires it.
    :param poke_interval: seconds between listings.
    """

    def __init__(self, *, directory: str, filename: str, poke_interval: float = 5.0) -> None:
        super().__init__()
        self.directory = directory
        self.filename = filename
        self.poke_interval = float(poke_interval)
        self._taken: str | None = None

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            "zonda.triggers.file.DirectoryFileDeleteTrigger",
            {"directory": self.directory, "filename": self.filename, "poke_interval": self.poke_interval},
        )

    def event_key(self, event: TriggerEvent) -> str | None:
        return self._taken

    def shared_stream_key(self) -> Hashable | None:
        return ("directory-scan", os.path.realpath(self.directory), self.poke_interval)

    @classmethod
    async def open_shared_stream(cls, kwargs: dict[str, Any]) -> AsyncIterator[Any]:
        """List the directory every `poke_interval` seconds: ``{"directory", "names"}``. A missing
        directory lists as empty; a permanent misconfiguration (a permission, a path that is a file)
        raises; another OSError skips that listing, as Airflow's."""
        directory = str(kwargs["directory"])
        poke_interval = float(kwargs["poke_interval"])
        while True:
            try:
                names = set(os.listdir(directory))
            except FileNotFoundError:
                names = set()
            except (PermissionError, NotADirectoryError, IsADirectoryError):
                raise
            except OSError:
                logging.getLogger(__name__).warning(
                    "Failed to list %s; retrying after %ss", directory, poke_interval, exc_info=True
                )
                await asyncio.sleep(poke_interval)
                continue
            yield {"directory": directory, "names": names}
            await asyncio.sleep(poke_interval)

    async def filter_shared_stream(self, shared_stream: AsyncIterator[Any]) -> AsyncIterator[TriggerEvent]:
        async for snapshot in shared_stream:
            if self.filename not in snapshot["names"]:
                continue
            filepath = os.path.join(snapshot["directory"], self.filename)
            self._taken = _take(filepath)
            if self._taken is None:
                continue  # a sibling or another replica took it, or it went: the next listing's
            self.log.info("File %s has been deleted", filepath)
            yield TriggerEvent({"filepath": filepath})
            return

    async def run(self) -> AsyncIterator[TriggerEvent]:
        stream = type(self).open_shared_stream(self.serialize()[1])
        try:
            async for event in self.filter_shared_stream(stream):
                yield event
                return
        finally:
            await stream.aclose()  # type: ignore[attr-defined]
