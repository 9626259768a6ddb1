"""Airflow's `FileSensor`: waits until a file, or a non-empty directory, exists at a path or glob."""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import datetime
from glob import glob
from typing import Any

from zonda.context import Context
from zonda.exceptions import AirflowException
from zonda.sensors.base import BaseSensorOperator


class FileSensor(BaseSensorOperator):
    """Poke until `filepath` (a path or a glob) matches a file, or a directory holding a file.

    :param filepath: path or glob pattern, on the filesystem the task runs on (a volume mounted in the
        try's Pod, say). (templated)
    :param recursive: let `**` in `filepath` match any files and directories, as `glob.glob` does.
    :param fs_conn_id: Airflow's filesystem connection; Zonda has none, paths are absolute, so the
        argument is accepted and only `fs_default` is allowed.
    :param deferrable: wait in the triggerer (`FileTrigger`) instead of the task's own process, as
        Airflow 2.9+'s; the path is then on the triggerer's filesystem.
    """

    template_fields: Sequence[str] = ("filepath",)

    def __init__(
        self,
        *,
        filepath: str,
        recursive: bool = False,
        fs_conn_id: str = "fs_default",
        deferrable: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.deferrable = deferrable
        if fs_conn_id != "fs_default":
            raise AirflowException(
                f"FileSensor: connections do not exist in Zonda (fs_conn_id={fs_conn_id!r}); "
                "give the full path in filepath"
            )
        self.filepath = filepath
        self.recursive = recursive

    def execute(self, context: Context) -> Any:
        if not self.deferrable:
            return super().execute(context)
        if not self.poke(context):
            from datetime import timedelta

            from zonda.triggers.file import FileTrigger

            self.defer(
                trigger=FileTrigger(self.filepath, self.recursive, self.poke_interval),
                method_name="execute_complete",
                timeout=timedelta(seconds=self.timeout),
            )
        return None

    def execute_complete(self, context: Context, event: Any = None) -> None:
        if not event:
            raise AirflowException(f"{self.task_id} task failed as {self.filepath} not found.")
        self.log.info("%s completed successfully as %s found.", self.task_id, self.filepath)

    def poke(self, context: Context) -> bool:
        self.log.info("Poking for file %s", self.filepath)
        for path in glob(self.filepath, recursive=self.recursive):
            if os.path.isfile(path):
                modified = datetime.fromtimestamp(os.path.getmtime(path)).strftime("%Y%m%d%H%M%S")
                self.log.info("Found File %s last modified: %s", path, modified)
                return True
            for _, _, files in os.walk(path):
                if files:
                    return True
        return False
