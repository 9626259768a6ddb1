"""The task runner end to end: `python -m controller.runner` in a subprocess, as the Pod or the local
executor runs it, with an invocation in its environment (or a file) and a temporary result path.

Real: the subprocess, imports of example and helper modules, templating, triggers' serialization.
The result file is read back as the controller reads it: `TaskResult` JSON within 4096 bytes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.runner.process import encode_result, exit_code, fit_result
from tests.paths import REPO_ROOT
from zonda.resources.dagrun_models import Deferral
from zonda.resources.invocations import (
    RESULT_LIMIT_BYTES,
    DeferralRequest,
    TaskInvocation,
    TaskOutcome,
    TaskResult,
)
from zonda.resources.run_types import RunType

REPO = REPO_ROOT

HELPERS = """
from datetime import UTC, datetime, timedelta

from zonda.exceptions import AirflowFailException
from zonda.operators.base import BaseOperator
from zonda.triggers import DateTimeTrigger

MOMENT = datetime(2030, 1, 1, tzinfo=UTC)


def wait_for_partition(operator):
    try:
        operator.defer(trigger=DateTimeTrigger(MOMENT), method_name="resume", kwargs={"partition": "p1"},
                       timeout=timedelta(minutes=5))
    except Exception:
        raise AssertionError("a broad except swallowed the deferral")


class NestedDeferOperator(BaseOperator):
    def execute(self, context):
        wait_for_partition(self)

    def resume(self, context, event=None, partition=None):
        return {"partition": partition, "event_type": type(event).__name__, "event": event.isoformat(),
                "ds": context["ds"]}


def return_set():
    return {1, 2}


def return_nan():
    return float("nan")


def return_huge_bytes_in_rows():
    return {"rows": [{"when": "2024-01-02"}] * 3 + [{"when": b"\\xff" * 10_000_000}]}


def fail_without_retry():
    raise AirflowFailException("bad input, retrying is pointless")


def exit_quietly():
    raise SystemExit(3)
"""


@pytest.fixture(scope="module")
def helpers_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("helpers")
    (directory / "runner_helpers.py").write_text(HELPERS)
    return directory


def invocation(operator: str | None, args: dict[str, Any], **fields: Any) -> dict[str, Any]:
    defaults: dict[str, Any] = {
        "dag_name": "etl",
        "run_name": "scheduled-2024-01-02",
        "run_type": RunType.SCHEDULED,
        "task_id": "task",
        "try_number": 1,
        "max_tries": 2,
        "logical_date": datetime(2024, 1, 2, tzinfo=UTC),
        "data_interval_start": datetime(2024, 1, 2, tzinfo=UTC),
        "data_interval_end": datetime(2024, 1, 3, tzinfo=UTC),
        "params": {"region": "eu"},
        "xcoms": {"extract": {"rows": 42}},
    }
    return TaskInvocation(operator=operator, args=args, **{**defaults, **fields}).to_wire()


@dataclass
class Ran:
    exit_code: int
    result: dict[str, Any]
    stdout: str
    stderr: str


def run_runner(
    helpers_dir: Path, tmp_path: Path, wire: dict[str, Any] | str | None, *, via_file: bool = False
) -> Ran:
    result_path = tmp_path / "termination-log"
    env = {key: value for key, value in os.environ.items() if not key.startswith("ZONDA_")}
    env.update(PYTHONPATH=os.pathsep.join([str(helpers_dir), str(REPO)]), ZONDA_RESULT_PATH=str(result_path))
    command = [sys.executable, "-m", "controller.runner"]
    text = wire if isinstance(wire, str) else json.dumps(wire)
    if wire is not None and via_file:
        (tmp_path / "invocation.json").write_text(text)
        command += ["--invocation-file", str(tmp_path / "invocation.json")]
    elif wire is not None:
        env["ZONDA_TASK_INVOCATION"] = text
    process = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    payload = result_path.read_bytes()
    assert len(payload) <= RESULT_LIMIT_BYTES
    result = json.loads(payload)
    TaskResult.from_wire(result)  # the controller's parse must succeed
    return Ran(process.returncode, result, process.stdout, process.stderr)


CALLABLES = "examples.operators.callables"

CASES = [
    pytest.param(
        "BashOperator",
        {"bash_command": "echo hello; echo {{ ds }} {{ params.region }}"},
        {},
        {"outcome": "success", "xcom": "2024-01-02 eu"},
        0,
        "hello",
        id="a Bash echo succeeds with the last line as XCom and its output in the log",
    ),
    pytest.param(
        "BashOperator",
        {"bash_command": "echo partial; exit 99"},
        {},
        {"outcome": "skipped"},
        0,
        "partial",
        id="a Bash exit code 99 skips the task",
    ),
    pytest.param(
        "BashOperator",
        {"bash_command": "exit 3"},
        {},
        {
            "outcome": "failed",
            "message": "zonda.exceptions.AirflowException: Bash command failed. "
            "The command returned a non-zero exit code 3.",
        },
        1,
        "",
        id="a Bash non-zero exit code fails the try, to be retried",
    ),
    pytest.param(
        "PythonOperator",
        {
            "python_callable": f"{CALLABLES}:return_value",
            "op_kwargs": {"value": {"day": "{{ ds }}", "rows": "{{ ti.xcom_pull('extract') }}"}},
        },
        {},
        {"outcome": "success", "xcom": {"day": "2024-01-02", "rows": "{'rows': 42}"}},
        0,
        "",
        id="a Python callable by import path gets templated op_kwargs with upstream XComs",
    ),
    pytest.param(
        "PythonOperator",
        {"python_callable": f"{CALLABLES}:print_context"},
        {},
        {"outcome": "success", "xcom": "Whatever you return gets printed in the logs"},
        0,
        "2024-01-02",
        id="what a callable prints is the task log",
    ),
    pytest.param(
        "BranchPythonOperator",
        {
            "python_callable": f"{CALLABLES}:choose_branch",
            "op_kwargs": {"follow": "load_{{ params.region }}"},
        },
        {},
        {"outcome": "success", "xcom": "load_eu", "followTaskIds": ["load_eu"]},
        0,
        "",
        id="a branch reports the task ids to follow",
    ),
    pytest.param(
        "BranchPythonOperator",
        {"python_callable": f"{CALLABLES}:choose_branch"},
        {},
        {"outcome": "success", "followTaskIds": []},
        0,
        "",
        id="a branch returning None follows no downstream task",
    ),
    pytest.param(
        "ShortCircuitOperator",
        {"python_callable": f"{CALLABLES}:return_value", "op_args": [0]},
        {},
        {"outcome": "success", "xcom": 0, "skipAllDownstream": True},
        0,
        "",
        id="a falsy short circuit skips everything downstream",
    ),
    pytest.param(
        "ShortCircuitOperator",
        {
            "python_callable": f"{CALLABLES}:return_value",
            "op_args": [""],
            "ignore_downstream_trigger_rules": False,
        },
        {},
        {"outcome": "success", "xcom": "", "followTaskIds": []},
        0,
        "",
        id="a falsy short circuit respecting trigger rules skips only the direct downstream",
    ),
    pytest.param(
        "ShortCircuitOperator",
        {"python_callable": f"{CALLABLES}:return_value", "op_args": [True]},
        {},
        {"outcome": "success", "xcom": True},  # skipAllDownstream: false is the default, left out
        0,
        "",
        id="a truthy short circuit follows everything",
    ),
    pytest.param(
        "PythonOperator",
        {"python_callable": f"{CALLABLES}:always_fail"},
        {},
        {"outcome": "failed", "message": "RuntimeError: This task always fails"},
        1,
        "",
        id="an exception fails the try with the traceback's last line as message",
    ),
    pytest.param(
        "PythonOperator",
        {"python_callable": "runner_helpers:fail_without_retry"},
        {},
        {
            "outcome": "failed_no_retry",
            "message": "zonda.exceptions.AirflowFailException: bad input, retrying is pointless",
        },
        1,
        "",
        id="AirflowFailException fails without retry",
    ),
    pytest.param(
        "PythonOperator",
        {"python_callable": "runner_helpers:exit_quietly"},
        {},
        {"outcome": "failed", "message": "SystemExit: 3"},
        1,
        "",
        id="a callable calling sys.exit fails the try and still writes the result",
    ),
    pytest.param(
        "PythonSensor",
        {
            "python_callable": f"{CALLABLES}:return_value",
            "op_args": [False],
            "mode": "reschedule",
            "timeout": "1h",
        },
        {"first_try_start": datetime.now(UTC) - timedelta(hours=2)},
        {"outcome": "failed_no_retry"},
        1,
        "",
        id="a rescheduled sensor past its timeout since the first try fails without retry",
    ),
    pytest.param(
        "PythonSensor",
        {
            "python_callable": f"{CALLABLES}:return_value",
            "op_args": [False],
            "mode": "reschedule",
            "timeout": "1h",
            "soft_fail": True,
        },
        {"first_try_start": datetime.now(UTC) - timedelta(hours=2)},
        {"outcome": "skipped"},
        0,
        "",
        id="a soft-failing rescheduled sensor past its timeout skips",
    ),
    pytest.param(
        "runner_helpers.NestedDeferOperator",
        {},
        {},
        {
            "outcome": "deferred",
            "deferral": {
                "triggerClasspath": "zonda.triggers.temporal.DateTimeTrigger",
                "triggerKwargs": {"moment": "2030-01-01T00:00:00+00:00", "end_from_trigger": False},
                "methodName": "resume",
                "kwargs": {"partition": "p1"},
                "timeoutSeconds": 300.0,
            },
        },
        0,
        "",
        id="a deferral from a nested helper function defers the try with its trigger",
    ),
    pytest.param(
        "runner_helpers:NestedDeferOperator",
        {},
        {"next_method": "resume", "next_kwargs": {"partition": "p1", "event": "2030-01-01T00:00:00+00:00"}},
        {
            "outcome": "success",
            "xcom": {
                "partition": "p1",
                "event_type": "datetime",
                "event": "2030-01-01T00:00:00+00:00",
                "ds": "2024-01-02",
            },
        },
        0,
        "",
        id="a resumed try calls next_method on a new instance with the event as a datetime",
    ),
    pytest.param(
        "runner_helpers.NestedDeferOperator",
        {},
        {"next_method": "__fail__", "next_kwargs": {"error": "Trigger failure", "traceback": ["boom"]}},
        {"outcome": "failed", "message": "zonda.exceptions.TaskDeferralError: Trigger failure"},
        1,
        "",
        id="a resumed try whose trigger failed fails",
    ),
    pytest.param(
        "TimeDeltaSensorAsync",
        {"delta": "1h"},
        {"data_interval_end": datetime(2100, 1, 1, tzinfo=UTC)},
        {"outcome": "deferred", "deferral": {"triggerKwargs": {"moment": "2100-01-01T01:00:00+00:00"}}},
        0,
        "",
        id="a deferrable sensor defers",
    ),
    pytest.param(
        "PythonOperator",
        {"python_callable": f"{CALLABLES}:return_value", "op_args": ["x" * 5000]},
        {},
        {
            "outcome": "success",
            "xcom": {
                "__zonda_xcom_stored__": {
                    "url": "memory://zonda-xcom/default/scheduled-2024-01-02/task/1/return_value.json",
                    "bytes": 5002,
                }
            },
        },
        0,
        "",
        id="a large XCom of a try with no cluster (no namespace: dags test) is kept in the process's memory",
    ),
    pytest.param(
        "PythonOperator",
        {"python_callable": "runner_helpers:return_set"},
        {},
        {"outcome": "failed"},
        1,
        "",
        id="a return value that is not JSON fails",
    ),
    pytest.param(
        "PythonOperator",
        {"python_callable": "runner_helpers:return_nan"},
        {},
        {"outcome": "failed"},
        1,
        "",
        id="a NaN return value, which JSON cannot carry, fails",
    ),
    pytest.param(
        "BashOperator",
        {"bash_comand": "echo typo"},
        {},
        {"outcome": "failed_no_retry"},
        1,
        "",
        id="a misspelt argument fails without retry naming the operator and the argument",
    ),
    pytest.param(
        "BashOperator",
        {"bash_command": "echo {{ params.missing }}"},
        {},
        {"outcome": "failed"},
        1,
        "",
        id="an undefined template variable fails the try",
    ),
    pytest.param(
        "no_such_package.Operator",
        {},
        {},
        {"outcome": "failed_no_retry"},
        1,
        "",
        id="an operator that cannot be imported fails without retry",
    ),
    pytest.param(
        None,
        {},
        {},
        {"outcome": "failed_no_retry"},
        1,
        "",
        id="a container task has nothing for the runner to run",
    ),
]


def contains(actual: Any, expected: Any) -> bool:
    """Whether `actual` holds everything in `expected` (dicts compared key by key, the rest equal)."""
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(
            k in actual and contains(actual[k], v) for k, v in expected.items()
        )
    return bool(actual == expected)


@pytest.mark.parametrize(("operator", "args", "fields", "expected", "expected_exit", "log_line"), CASES)
def test_runner(
    helpers_dir: Path,
    tmp_path: Path,
    operator: str | None,
    args: dict[str, Any],
    fields: dict[str, Any],
    expected: dict[str, Any],
    expected_exit: int,
    log_line: str,
) -> None:
    ran = run_runner(helpers_dir, tmp_path, invocation(operator, args, **fields))
    assert contains(ran.result, expected), (ran.result, ran.stderr)
    assert ran.exit_code == expected_exit, ran.stderr
    assert log_line in ran.stdout.splitlines() or not log_line, ran.stdout


def test_do_xcom_push_false_drops_the_return_value(helpers_dir: Path, tmp_path: Path) -> None:
    ran = run_runner(
        helpers_dir,
        tmp_path,
        invocation(
            "PythonOperator",
            {"python_callable": f"{CALLABLES}:return_value", "op_args": [[1, 2]], "do_xcom_push": False},
        ),
    )
    assert ran.result["outcome"] == "success" and "xcom" not in ran.result


def test_failures_name_their_cause(helpers_dir: Path, tmp_path: Path) -> None:
    typo = run_runner(helpers_dir, tmp_path, invocation("BashOperator", {"bash_comand": "echo"})).result
    assert "BashOperator" in typo["message"] and "'bash_comand'" in typo["message"]
    assert "did you mean 'bash_command'" in typo["message"]
    not_json = run_runner(
        helpers_dir, tmp_path, invocation("PythonOperator", {"python_callable": "runner_helpers:return_set"})
    ).result
    assert "not JSON-serializable" in not_json["message"] and "set" in not_json["message"]
    huge = run_runner(
        helpers_dir,
        tmp_path,
        invocation("PythonOperator", {"python_callable": "runner_helpers:return_huge_bytes_in_rows"}),
    ).result
    assert huge["outcome"] == "failed", huge
    where = """XCom 'return_value' at ["rows"][3]["when"]"""
    assert huge["message"].startswith(f"PythonOperator: {where}: bytes b'")
    assert "it is 10000000 bytes: return text instead" in huge["message"] and len(huge["message"]) < 600
    undefined = run_runner(
        helpers_dir, tmp_path, invocation("BashOperator", {"bash_command": "echo {{ params.missing }}"})
    ).result
    assert "bash_command" in undefined["message"] and "missing" in undefined["message"]


def test_a_failure_prints_its_traceback_to_stderr(helpers_dir: Path, tmp_path: Path) -> None:
    ran = run_runner(
        helpers_dir, tmp_path, invocation("PythonOperator", {"python_callable": f"{CALLABLES}:always_fail"})
    )
    assert "Traceback (most recent call last)" in ran.stderr and "always_fail" in ran.stderr
    assert "Traceback" not in ran.stdout


def test_reschedule_mode_reports_the_next_poke(helpers_dir: Path, tmp_path: Path) -> None:
    before = datetime.now(UTC)
    ran = run_runner(
        helpers_dir,
        tmp_path,
        invocation(
            "PythonSensor",
            {
                "python_callable": f"{CALLABLES}:return_value",
                "op_args": [False],
                "mode": "reschedule",
                "poke_interval": "5m",
            },
        ),
    )
    after = datetime.now(UTC)
    assert (ran.exit_code, ran.result["outcome"]) == (0, "reschedule")
    reschedule_at = datetime.fromisoformat(ran.result["rescheduleAt"])
    assert before + timedelta(minutes=5) <= reschedule_at <= after + timedelta(minutes=5)


def test_the_invocation_may_come_from_a_file(helpers_dir: Path, tmp_path: Path) -> None:
    ran = run_runner(
        helpers_dir, tmp_path, invocation("BashOperator", {"bash_command": "echo from-file"}), via_file=True
    )
    assert (ran.exit_code, ran.result["xcom"]) == (0, "from-file")


@pytest.mark.parametrize(
    "wire",
    [
        pytest.param(None, id="without an invocation the runner fails and says so"),
        pytest.param("{not json", id="an invocation that is not JSON fails the try"),
        pytest.param({"dagName": "etl"}, id="an invocation missing fields fails the try"),
    ],
)
def test_invalid_invocations_fail_with_a_result(helpers_dir: Path, tmp_path: Path, wire: Any) -> None:
    ran = run_runner(helpers_dir, tmp_path, wire)
    assert (ran.exit_code, ran.result["outcome"]) == (1, "failed")
    assert "invocation" in ran.result["message"]


# --------------------------------------------------------------------------- result encoding, in-process


@given(
    outcome=st.sampled_from(list(TaskOutcome)),
    xcom=st.one_of(st.none(), st.text(max_size=6000), st.lists(st.integers(), max_size=1500)),
    message=st.one_of(st.none(), st.text(max_size=1000)),
)
def test_an_encoded_result_always_fits_the_termination_message(
    outcome: TaskOutcome, xcom: Any, message: str | None
) -> None:
    result = TaskResult(outcome=outcome, xcom=xcom, message=message)
    fitted = fit_result(result)
    payload = encode_result(fitted)
    assert len(payload) <= RESULT_LIMIT_BYTES
    assert TaskResult.decode(payload) == fitted
    assert fitted == result or (
        fitted.outcome is TaskOutcome.FAILED and "the limit is 4096" in (fitted.message or "")
    )


def test_an_oversized_deferral_fails_saying_the_result_is_too_large() -> None:
    deferral = DeferralRequest(trigger_classpath="t.T", trigger_kwargs={"blob": "x" * 5000})
    fitted = fit_result(TaskResult(outcome=TaskOutcome.DEFERRED, deferral=deferral))
    assert fitted.outcome is TaskOutcome.FAILED and "the limit is 4096" in (fitted.message or "")


@pytest.mark.parametrize(
    "fields",
    [
        pytest.param({}, id="only the trigger"),
        pytest.param(
            {"trigger_kwargs": {"moment": "2026-01-01T00:00:00+00:00"}, "method_name": "resume",
             "kwargs": {"n": 1}, "timeout_seconds": 30.0},
            id="every field set",
        ),
    ],
)  # fmt: skip
def test_a_deferral_request_becomes_the_same_deferral_in_the_run_status(fields: dict[str, Any]) -> None:
    """The runner's `DeferralRequest` mirrors the status model `Deferral` field for field."""
    request = DeferralRequest(trigger_classpath="t.T", **fields)
    assert request.to_status() == Deferral(trigger_classpath="t.T", **fields)
    assert set(request.__struct_fields__) == set(Deferral.model_fields)
    decoded = TaskResult.decode(TaskResult(outcome=TaskOutcome.DEFERRED, deferral=request).encode())
    assert decoded.deferral == request


def test_an_invalid_invocation_or_result_is_refused_naming_the_field() -> None:
    with pytest.raises(ValueError, match=r"invalid TaskResult: .*\$\.outcome"):
        TaskResult.decode(b'{"outcome": "exploded"}')
    with pytest.raises(ValueError, match="unknown field `surprise`"):
        TaskResult.from_wire({"outcome": "success", "surprise": 1})
    with pytest.raises(ValueError, match=r"invalid TaskInvocation: .*\$\.tryNumber"):
        TaskInvocation.decode(json.dumps({**invocation("BashOperator", {}), "tryNumber": "one"}))


@pytest.mark.parametrize(
    ("outcome", "code"),
    [
        pytest.param(
            outcome,
            1 if outcome.value.startswith("failed") else 0,
            id=f"{outcome.value} exits {1 if outcome.value.startswith('failed') else 0}",
        )
        for outcome in TaskOutcome
    ],
)
def test_exit_codes(outcome: TaskOutcome, code: int) -> None:
    assert exit_code(outcome) == code


def is_running(pid: int) -> bool:
    """Whether `pid` is a live process (a zombie awaiting its reaper is not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[-1][0] != "Z"
    except FileNotFoundError:
        return False


def test_sigterm_stops_the_command_and_fails_the_try_with_a_result(helpers_dir: Path, tmp_path: Path) -> None:
    result_path = tmp_path / "termination-log"
    env = {key: value for key, value in os.environ.items() if not key.startswith("ZONDA_")}
    env.update(
        PYTHONPATH=str(REPO),
        ZONDA_RESULT_PATH=str(result_path),
        ZONDA_TASK_INVOCATION=json.dumps(
            invocation("BashOperator", {"bash_command": "sleep 60 & echo $!; wait"})
        ),
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "controller.runner"],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    lines = iter(process.stdout.readline, "")
    sleep_pid = int(next(line for line in lines if line.strip().isdigit()))
    assert is_running(sleep_pid)
    process.terminate()
    process.communicate(timeout=30)
    result = json.loads(result_path.read_text())
    assert (process.returncode, result["outcome"]) == (1, "failed")
    assert "Task received SIGTERM signal" in result["message"]
    # The group's SIGTERM is delivered asynchronously: on a loaded machine `sleep` may take a moment to
    # die after the runner exits. It would live 60 s if the runner had not signalled it.
    deadline = time.monotonic() + 15
    while is_running(sleep_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not is_running(sleep_pid), "the command's children outlived the try"


def test_an_invocation_with_pendulum_datetimes_encodes_as_the_same_instants() -> None:
    """A run's start and its timetable give pendulum DateTimes; the wire carries them as any datetime."""
    import pendulum

    moment = pendulum.datetime(2026, 3, 29, 2, 30, tz="Europe/Paris")
    wire = TaskInvocation(
        dag_name="etl", run_name="manual-1", run_type=RunType.MANUAL, task_id="t", try_number=1,
        logical_date=moment, data_interval_start=moment, data_interval_end=pendulum.now("UTC"),
        args={"day": pendulum.date(2026, 3, 29)},
    )  # fmt: skip
    decoded = TaskInvocation.decode(wire.encode())
    assert decoded.logical_date == moment and decoded.data_interval_end == wire.data_interval_end
    assert decoded.args == {"day": "2026-03-29"} and wire.to_wire()["args"] == {"day": "2026-03-29"}
