"""Airflow's `FileTrigger`: fires once a file, or a directory holding a file, exists at a path or glob."""

from __future__ import annotations

import asyncio
import os
import warnings
from collections.abc import AsyncIterator
from datetime import datetime
from glob import glob
from typing import Any

from zonda.triggers.base import BaseTrigger, TriggerEvent


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
