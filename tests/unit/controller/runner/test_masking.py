"""Secrets masked in what a try writes to its log, and in the message its result carries to the run.

Real: `python -m controller.runner` as a task pod runs it (its stdout and stderr are the pod's log),
with the variables and connections in its environment as the kubelet gives them. Each run also
logs a variable that is not sensitive, in clear: the positive control that the place a secret would
be printed was printed at all. In process: Airflow's filter on log records
(`tests/utils/log/test_secrets_masker.py`'s test_message/test_args/test_extra/test_exception) and
the masked stream (its `RedactedIO`).
"""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from controller.runner import masking
from tests.paths import REPO_ROOT
from zonda import secrets_masker
from zonda.resources.invocations import TaskInvocation
from zonda.resources.run_types import RunType
from zonda.secrets_masker import SecretsMasker

SECRETS = {
    "AIRFLOW_CONN_WAREHOUSE": "postgres://etl:hunter2-pw@db.internal:5432/sales?api_key=key-8f3e1c&region=eu",
    "AIRFLOW_VAR_API_TOKEN": "tok-0a1b2c3d",
    "AIRFLOW_VAR_REGION": "eu-west-1",
}
HIDDEN = ("hunter2-pw", "key-8f3e1c", "tok-0a1b2c3d")

HELPERS = """
from zonda.variables import BaseHook, Variable

def leaky():
    conn = BaseHook.get_connection("warehouse")
    print("password:", conn.password, "uri:", conn.get_uri())
    print("token:", Variable.get("api_token"), "region:", Variable.get("region"))
    raise ValueError(f"cannot log in as {conn.login} with {conn.password}")
"""


def run_try(
    tmp_path: Path, operator: str, args: dict[str, Any], version: str = "2"
) -> tuple[str, dict[str, Any]]:
    """One try in its own process; (its log, its result)."""
    (tmp_path / "mask_helpers.py").write_text(HELPERS)
    moment = datetime(2026, 1, 1, tzinfo=UTC)
    invocation = TaskInvocation(
        dag_name="dag", run_name="run", run_type=RunType.MANUAL, task_id="t", try_number=1,
        operator=operator, args=args, logical_date=moment, data_interval_start=moment,
        data_interval_end=moment, airflow_version=version,
    )  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ZONDA_", "AIRFLOW_"))}
    env.update(
        SECRETS,
        PYTHONPATH=os.pathsep.join([str(tmp_path), str(REPO_ROOT)]),
        ZONDA_TASK_INVOCATION=invocation.encode().decode(),
        ZONDA_RESULT_PATH=str(tmp_path / "result.json"),
    )
    ran = subprocess.run(
        [sys.executable, "-m", "controller.runner"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO_ROOT,
    )
    return ran.stdout + ran.stderr, json.loads((tmp_path / "result.json").read_text())


def test_a_bash_try_logs_its_rendered_command_and_output_with_the_secrets_masked(tmp_path: Path) -> None:
    command = (
        "echo pw={{ conn.warehouse.password }} tok=$AIRFLOW_VAR_API_TOKEN "
        "region={{ var.value.region }} uri=$AIRFLOW_CONN_WAREHOUSE; echo done"
    )
    log, result = run_try(tmp_path, "BashOperator", {"bash_command": command})
    assert result["outcome"] == "success", log
    assert "pw=*** tok=*** region=eu-west-1" in log, log
    assert "uri=postgres://etl:***@db.internal:5432/sales?api_key=***&region=eu" in log
    assert "Running command:" in log and "echo pw=*** " in log, "the rendered command, masked"
    assert not [secret for secret in HIDDEN if secret in log]
    # an XCom is the value as returned (the last line here), as in Airflow: masking is for logs
    assert result["xcom"] == "done"


@pytest.mark.parametrize("version", ["2", "3"])
def test_a_python_try_prints_and_raises_with_the_secrets_masked_and_so_is_its_result(
    tmp_path: Path, version: str
) -> None:
    log, result = run_try(tmp_path, "PythonOperator", {"python_callable": "mask_helpers:leaky"}, version)
    assert result["outcome"] == "failed"
    assert "password: *** uri: postgres://etl:***@db.internal:5432/sales" in log, log
    assert "token: *** region: eu-west-1" in log
    assert "ValueError: cannot log in as etl with ***" in log, "the traceback"
    assert result["message"].endswith("cannot log in as etl with ***"), "what the run's status shows"
    assert not [secret for secret in HIDDEN if secret in log + json.dumps(result)]


@pytest.fixture
def masked_logger(monkeypatch: pytest.MonkeyPatch) -> tuple[logging.Logger, io.StringIO]:
    masker = SecretsMasker.for_airflow("2", {})
    masker.add_mask("password")
    monkeypatch.setattr(secrets_masker, "_masker", masker)
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    handler.addFilter(masking.MaskingFilter())
    logger = logging.getLogger("test_masking")
    monkeypatch.setattr(logger, "handlers", [handler])
    monkeypatch.setattr(logger, "propagate", False)
    logger.setLevel(logging.INFO)
    return logger, out


def test_the_filter_masks_a_records_message_arguments_extras_and_exception(
    masked_logger: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, out = masked_logger
    logger.info("XpasswordY")
    logger.info("Cannot connect to %s", "user:password")
    logger.info("a dict: %s", {"api_key": "never registered", "other": "foo"})
    logger.handlers[0].setFormatter(logging.Formatter("%(levelname)s %(message)s %(conn)s"))
    logger.info("Cannot connect", extra={"conn": "user:password"})
    logger.handlers[0].setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    try:
        raise RuntimeError("Cannot connect to user:password")
    except RuntimeError:
        logger.exception("Err")
    lines = out.getvalue().splitlines()
    assert lines[:4] == [
        "INFO X***Y",
        "INFO Cannot connect to user:***",
        "INFO a dict: {'api_key': '***', 'other': 'foo'}",
        "INFO Cannot connect user:***",
    ]
    assert lines[-1] == "RuntimeError: Cannot connect to user:***"
    # the source line of the traceback keeps its literal, as in Airflow (its test_exc_tb is xfail)


def test_the_masked_stream_replaces_what_it_writes_and_passes_the_rest_through(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    masker = SecretsMasker.for_airflow("3", {})
    masker.add_mask("s3cr3t-value")
    monkeypatch.setattr(secrets_masker, "_masker", masker)
    target = io.StringIO()
    stream = masking.MaskedStream(target)
    print("a s3cr3t-value b", file=stream)
    stream.writelines(["s3cr3t-value\n", "plain\n"])
    stream.flush()
    assert target.getvalue() == "a *** b\n***\nplain\n"
    assert stream.getvalue() == target.getvalue(), "anything else is the target's"


def test_the_environment_registers_connections_and_sensitive_variables_only() -> None:
    masker = SecretsMasker.for_airflow("2", {})
    masking.register_environment(masker, {**SECRETS, "AIRFLOW_CONN_BAD": "not a uri", "PATH": "/usr/bin"})
    assert masker.redact_text(" ".join(SECRETS.values())).count("***") == 3
    assert "eu-west-1" in masker.redact_text(SECRETS["AIRFLOW_VAR_REGION"])
