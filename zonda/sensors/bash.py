"""Airflow's `BashSensor`: done when a Bash command exits 0."""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any

from zonda.context import Context
from zonda.exceptions import AirflowFailException
from zonda.sensors.base import BaseSensorOperator


class BashSensor(BaseSensorOperator):
    """Run `bash_command` at each poke: exit 0 is done.

    :param bash_command: the command or script. (templated)
    :param env: the command's whole environment; None inherits the runner's. (templated)
    :param output_encoding: encoding of the command's output.
    :param retry_exit_code: the exit code that means "not yet"; any other non-zero code then fails the
        task. None (default): every non-zero code means "not yet", until the sensor times out.
    """

    template_fields: Sequence[str] = ("bash_command", "env")

    def __init__(
        self,
        *,
        bash_command: str,
        env: Mapping[str, str] | None = None,
        output_encoding: str = "utf-8",
        retry_exit_code: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.bash_command = bash_command
        self.env = env
        self.output_encoding = output_encoding
        self.retry_exit_code = retry_exit_code

    def poke(self, context: Context) -> bool:
        with tempfile.TemporaryDirectory(prefix="airflowtmp") as tmp_dir:
            script = os.path.join(tmp_dir, self.task_id or "bash_sensor")
            with open(script, "w", encoding="utf-8") as file:
                file.write(self.bash_command)
            self.log.info("Running command: %s", self.bash_command)
            done = subprocess.run(
                ["bash", script], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=tmp_dir,
                env=dict(self.env) if self.env is not None else None, start_new_session=True, check=False,
            )  # fmt: skip
        for line in done.stdout.decode(self.output_encoding, errors="replace").splitlines():
            self.log.info(line)
        self.log.info("Command exited with return code %s", done.returncode)
        if done.returncode == 0:
            return True
        if self.retry_exit_code is not None and done.returncode != self.retry_exit_code:
            raise AirflowFailException(f"Command exited with return code {done.returncode}")
        return False
