"""The pure parts of `zonda runs describe`, `zonda logs` and `zonda up`: ordering, finding, stopping."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from controller.cli import runs
from controller.cli.common import STATE_DIR
from controller.devtools import up, up_leftovers
from controller.operations import try_logs
from zonda.resources.models import DagSpec, dag_display_fields


def event(reason: str, *, rv: str, first: str, event_time: str | None = None) -> dict[str, object]:
    return {
        "metadata": {"resourceVersion": rv, "creationTimestamp": first},
        "reason": reason,
        "type": "Normal",
        "message": reason.lower(),
        "firstTimestamp": first,
        "eventTime": event_time,
    }


def test_events_within_one_second_come_out_in_the_order_they_happened() -> None:
    same_second = "2026-01-01T00:00:01Z"
    events = [
        event("TaskQueued", rv="12", first=same_second),
        event("RunStarted", rv="11", first=same_second),
        event("RunCreated", rv="30", first="2026-01-01T00:00:00Z"),
        event("TaskSucceeded", rv="9", first=same_second, event_time="2026-01-01T00:00:01.900000Z"),
    ]
    ordered = [e["reason"] for e in sorted(events, key=runs.event_sort_key)]
    assert ordered == ["RunCreated", "RunStarted", "TaskQueued", "TaskSucceeded"]


def test_describe_prints_task_instances_in_dag_order_and_events_oldest_first() -> None:
    run = {
        "metadata": {"name": "r1"},
        "spec": {"dagName": "d", "runType": "manual"},
        "status": {
            "state": "success",
            "runId": "manual__2026-01-01T00:00:00+00:00",
            "dagSpec": {"tasks": [{"id": "b"}, {"id": "a"}]},
            "taskInstances": {
                "a": {
                    "state": "success",
                    "tryNumber": 1,
                    "maxTries": 1,
                    "durationSeconds": 0.25,
                    "startDate": "2026-01-01T00:00:01.5Z",
                    "podName": "r1-a-1",
                },
                "b": {"state": "skipped", "tryNumber": 0, "reason": "branch not followed"},
            },
        },
    }
    text = runs.describe_text(run, [event("RunStarted", rv="2", first="2026-01-01T00:00:00Z")])
    rows = text.splitlines()
    table = rows[rows.index(next(r for r in rows if r.startswith("TASK"))) :]
    assert table[1].split()[:3] == ["b", "skipped", "0"] and "branch not followed" in table[1]
    assert (
        table[2].split()[:3] == ["a", "success", "1/2"] and "0.25s" in table[2] and "00:00:01.500" in table[2]
    )
    assert "Events (1, oldest first):" in text and "RunStarted" in text
    # both names of the run: the object's (kubectl, logs) and Airflow's run id (its tries' run_id)
    assert rows[0].startswith("Run:") and "r1 (manual run of d)" in rows[0]
    assert "Run ID:        manual__2026-01-01T00:00:00+00:00" in rows


def test_a_task_that_never_ran_is_reported_as_such() -> None:
    assert "has not run yet" in (try_logs.never_ran_message("r", "t", None) or "")
    message = try_logs.never_ran_message(
        "r", "t", {"state": "upstream_failed", "tryNumber": 0, "reason": "x failed"}
    )
    assert message == "task 't' of r never ran (state upstream_failed: x failed)"
    assert try_logs.never_ran_message("r", "t", {"state": "success", "tryNumber": 1}) is None


def test_the_state_dir_is_found_from_the_kubeconfig_zonda_up_wrote(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "current-context": "c",
                "contexts": [{"name": "c", "context": {"cluster": "x", "user": "y"}}],
                "clusters": [],
                "users": [],
            }
        )
    )
    assert try_logs.kubeconfig_state_dir(str(kubeconfig)) is None
    up._record_state_dir(kubeconfig, tmp_path / "state")
    assert try_logs.kubeconfig_state_dir(str(kubeconfig)) == tmp_path / "state"
    candidates = try_logs.state_dir_candidates(None, str(kubeconfig), STATE_DIR)
    assert tmp_path / "state" in candidates and candidates[-1] == STATE_DIR


def test_local_tries_groups_attempts_by_try(tmp_path: Path) -> None:
    for name, task, number, text in [("a1", "t", 1, "one"), ("a2", "t", 2, "two"), ("a3", "u", 1, "other")]:
        (tmp_path / name).mkdir()
        (tmp_path / name / "attempt.json").write_text(json.dumps({"task_id": task, "try_number": number}))
        (tmp_path / name / "log").write_text(text)
    found = try_logs.local_tries(tmp_path, "t")
    assert sorted(found) == [1, 2] and found[2].parts == ["two"]


def test_up_stops_task_process_groups_it_finds_in_the_state_dir(tmp_path: Path) -> None:
    attempt = tmp_path / "run-uid" / "attempt"
    attempt.mkdir(parents=True)
    (tmp_path / "run-uid" / "other").mkdir()
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        (attempt / "pid").write_text(str(process.pid))
        recycled = tmp_path / "run-uid" / "other" / "pid"
        recycled.write_text(str(stranger.pid))
        an_hour_ago = time.time() - 3600
        os.utime(recycled, (an_hour_ago, an_hour_ago))  # written long before this pid was reused
        assert up_leftovers.task_process_groups(tmp_path) == [process.pid]
        assert up_leftovers.stop_task_processes(tmp_path) == [process.pid]
        assert process.wait(timeout=5) == -signal.SIGTERM
        time.sleep(0.1)
        assert stranger.poll() is None
    finally:
        for p in (process, stranger):
            p.kill()
            p.wait()


@pytest.mark.parametrize(
    ("spec", "shown"),
    [
        pytest.param(
            {"schedule": "*/5 * * * *"}, {"schedule": "*/5 * * * *", "paused": False}, id="cron as written"
        ),
        pytest.param(
            {"schedule": "1m", "paused": True}, {"schedule": "1m", "paused": True}, id="a duration as written"
        ),
        pytest.param({}, {"schedule": "None", "paused": False}, id="manual only: None, as Airflow shows it"),
        pytest.param(
            {"timetable": {"class": "x.Workday"}},
            {"schedule": "Workday", "paused": False},
            id="a timetable's summary",
        ),
    ],
)
def test_kubectl_get_dags_shows_schedule_and_paused_never_empty(
    spec: dict[str, object], shown: dict[str, object]
) -> None:
    dag = DagSpec.model_validate({"tasks": [{"id": "t"}], **spec})
    summary = "Workday" if "timetable" in spec else "None"
    assert dag_display_fields(dag, summary) == shown


def test_the_example_dag_files_parse() -> None:
    for path in up.EXAMPLES_DIR.glob("*.yaml"):
        DagSpec.model_validate(yaml.safe_load(path.read_text())["spec"])


def _run(name: str, dag: str, run_type: str, state: str | None) -> dict[str, object]:
    return {
        "metadata": {"name": name, "creationTimestamp": "2026-01-01T00:01:00Z"},
        "spec": {"dagName": dag, "runType": run_type, "dataInterval": {"end": "2026-01-01T00:01:00Z"}},
        "status": {"state": state} if state else {},
    }


def test_up_waits_for_the_triggered_runs_and_a_finished_run_of_each_scheduled_dag() -> None:
    manual = _run("m", "bash", "manual", "success")
    running = _run("s1", "every-minute", "scheduled", "running")
    assert not up.first_runs_done([manual], ["m"], ["every-minute"]), "no scheduled run yet"
    assert not up.first_runs_done([manual, running], ["m"], ["every-minute"])
    assert not up.first_runs_done([_run("m", "bash", "manual", "running"), running], ["m"], [])
    finished = _run("s2", "every-minute", "scheduled", "failed")
    assert up.first_runs_done([manual, running, finished], ["m"], ["every-minute"])
    assert up.scheduled_run_line(finished) == (
        "every-minute: scheduled run s2 due 2026-01-01T00:01:00Z, created 2026-01-01T00:01:00Z"
    )


def test_a_rerun_stops_what_a_killed_up_left_behind_and_leaves_a_live_up_alone(tmp_path: Path) -> None:
    workdir = tmp_path / "zonda-cluster-x"
    workdir.mkdir()
    record = tmp_path / "up.json"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    leftover = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", str(workdir / "etcd")])
    try:
        deadline = time.monotonic() + 10
        while str(workdir).encode() not in Path(f"/proc/{leftover.pid}/cmdline").read_bytes():
            assert time.monotonic() < deadline, "the leftover process never started"
            time.sleep(0.05)  # between fork and exec the child still shows our command line
        record.write_text(json.dumps({"pid": os.getpid(), "workdir": str(workdir)}))
        assert up_leftovers.clean_after_previous_up(record) == [], "that up is alive: not ours to stop"
        assert leftover.poll() is None and workdir.exists()
        record.write_text(json.dumps({"pid": dead.pid, "workdir": str(workdir)}))
        assert up_leftovers.clean_after_previous_up(record) == [leftover.pid]
        assert leftover.wait(timeout=5) == -signal.SIGKILL
        assert not workdir.exists() and not record.exists()
    finally:
        leftover.kill()
        leftover.wait()
