"""A newcomer's first hour against a real apiserver: the README's DAG applies and runs on schedule,
`kubectl get` prints every printer column of every kind truthfully (checked with the real kubectl),
`zonda logs` finds the local executor's logs from the kubeconfig alone, `zonda runs describe` tells
the run's story, and `zonda up` leaves no task process behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from controller.devtools import up, up_leftovers
from controller.devtools.devcluster import REPO_ROOT, Cluster
from tests.cluster.zonda_processes import (
    apply,
    controller,
    get,
    load_example,
    runs_of,
    trigger,
    wait_for,
    wait_run_finished,
)
from tests.unit.zonda.authoring.test_readme_examples import readme_yaml_blocks
from zonda.resources import crds

AGE = re.compile(r"^\d+(\.\d+)?[smhdy](\d+[smh])?$")  # kubectl's rendering of a past date column
ISO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")


def json_path(obj: dict[str, Any], path: str) -> Any:
    """The printer-column JSONPaths the CRDs use: `.a.b` and `.list[?(@.key=="v")].field`."""
    node: Any = obj
    for part in re.findall(r'\.(\w+)(?:\[\?\(@\.(\w+)=="([^"]+)"\)\])?', path):
        name, key, value = part
        node = node.get(name) if isinstance(node, dict) else None
        if key and node is not None:
            node = next((item for item in node if item.get(key) == value), None)
    return node


def printed_table(cluster: Cluster, namespace: str, resource: str) -> list[dict[str, str]]:
    """`kubectl get RESOURCE -o wide` parsed by the header's column positions."""
    out = cluster.kubectl("get", resource, "-n", namespace, "-o", "wide").stdout.splitlines()
    header = out[0]
    starts = [m.start() for m in re.finditer(r"(?:(?<=\s\s)|^)\S", header)]
    names = [header[s:e].strip() for s, e in zip(starts, [*starts[1:], None], strict=True)]
    rows = []
    for line in out[1:]:
        cells = [line[s:e].strip() for s, e in zip(starts, [*starts[1:], None], strict=True)]
        rows.append(dict(zip(names, cells, strict=True)))
    return rows


def same_objects_and_table(
    cluster: Cluster, namespace: str, plural: str
) -> tuple[dict[str, dict[str, Any]], list[dict[str, str]]] | None:
    """The objects and kubectl's table of them, read while nothing changed (None if something did).

    The every-minute DAG creates and finishes a run whenever a minute turns, which can fall between
    the two reads; the objects read again after the table, unchanged, say the table shows them."""

    def read() -> dict[str, dict[str, Any]]:
        return {o["metadata"]["name"]: o for o in get(cluster, namespace, plural)["items"]}

    def versions(objects: dict[str, dict[str, Any]]) -> dict[str, str]:
        return {name: o["metadata"]["resourceVersion"] for name, o in objects.items()}

    objects = read()
    rows = printed_table(cluster, namespace, plural)
    return (objects, rows) if versions(read()) == versions(objects) else None


def check_columns(cluster: Cluster, namespace: str, plural: str) -> list[dict[str, str]]:
    """Every printer column of `plural` shows what its JSONPath names in the object, as kubectl renders it."""
    crd = crds.generate()[f"{plural}.zonda.dev.yaml"]
    columns = crd["spec"]["versions"][0]["additionalPrinterColumns"]
    objects, rows = wait_for(
        lambda: same_objects_and_table(cluster, namespace, plural), f"{plural} unchanged while printed"
    )
    assert sorted(r["NAME"] for r in rows) == sorted(objects)
    for row in rows:
        obj = objects[row["NAME"]]
        for column in columns:
            printed, value = row[column["name"].upper()], json_path(obj, column["jsonPath"])
            where = f"{plural}/{row['NAME']} column {column['name']}: {printed!r} for {value!r}"
            assert printed != "<invalid>", where
            if value is None:
                assert printed in ("", "<none>"), where
            elif column["type"] == "date":
                assert AGE.match(printed), where
            elif column["type"] == "boolean":
                assert printed == str(value).lower(), where
            else:
                assert printed == str(value), where
    return rows


def test_readme_dag_runs_on_schedule_and_every_printer_column_tells_the_truth(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    readme_dags = [d for d in map(yaml.safe_load, readme_yaml_blocks((REPO_ROOT / "README.md").read_text()))]
    assert readme_dags
    with controller(cluster, namespace, tmp_path, executor="local"):
        for dag in readme_dags:
            apply(cluster, namespace, dag)  # the README's own text, on the real apiserver
        apply(cluster, namespace, load_example("example_bash"))
        paused = load_example("example_scheduled", paused=True)
        paused["metadata"]["name"] = "paused-every-minute"
        apply(cluster, namespace, paused)
        workday = {
            "apiVersion": "zonda.dev/v1alpha1",
            "kind": "DAG",
            "metadata": {"name": "workday"},
            "spec": {
                "timetable": {
                    "class": "examples.timetables.workday.SometimeAfterWorkdayTimetable",
                    "params": {"schedule_at": "08:00:00"},
                },
                "catchup": False,
                "tasks": [{"id": "noop", "operator": "EmptyOperator"}],
            },
        }
        apply(cluster, namespace, workday)
        scheduled = readme_dags[0]["metadata"]["name"]
        first = wait_for(lambda: runs_of(cluster, namespace, scheduled), "the first scheduled run", 60)[0]
        assert first["spec"]["runType"] == "scheduled"
        assert (
            wait_run_finished(cluster, namespace, first["metadata"]["name"])["status"]["state"] == "success"
        )
        manual = trigger(cluster, namespace, "example-bash")
        assert wait_run_finished(cluster, namespace, manual)["status"]["state"] == "success"
        wait_for(
            lambda: all(
                (d.get("status") or {}).get("lastRunState") == "success"
                for d in get(cluster, namespace, "dags")["items"]
                if d["metadata"]["name"] not in ("paused-every-minute", "workday")
            ),
            "every DAG to show its last run's state",
        )
        # a Trigger as a deferred task leaves it, and its status as a triggerer writes it
        cluster.kubectl(
            "create",
            "-n",
            namespace,
            "-f",
            "-",
            input=json.dumps(
                {
                    "apiVersion": "zonda.dev/v1alpha1",
                    "kind": "Trigger",
                    "metadata": {"name": "t1"},
                    "spec": {
                        "classpath": "zonda.triggers.temporal.DateTimeTrigger",
                        "kwargs": {"moment": "2030-01-01T00:00:00+00:00"},
                        "dagRun": manual,
                        "taskId": "extract",
                        "tryNumber": 1,
                        "shard": 3,
                    },
                }
            ),
        )
        cluster.kubectl(
            "patch",
            "trigger",
            "t1",
            "-n",
            namespace,
            "--subresource=status",
            "--type=merge",
            "-p",
            json.dumps(
                {"status": {"state": "fired", "holder": "triggerer-a", "firedAt": "2026-01-01T00:00:00Z"}}
            ),
        )

        dags = {row["NAME"]: row for row in check_columns(cluster, namespace, "dags")}
        check_columns(cluster, namespace, "dagruns")
        triggers = check_columns(cluster, namespace, "triggers")

    assert dags[scheduled]["SCHEDULE"] == "* * * * *" and dags[scheduled]["PAUSED"] == "false"
    assert ISO_TIME.match(dags[scheduled]["NEXT RUN"]), dags[scheduled]
    assert (
        dags["paused-every-minute"]["PAUSED"] == "true" and dags["paused-every-minute"]["READY"] == "Paused"
    )
    assert dags["example-bash"]["SCHEDULE"] == "None" and dags["example-bash"]["PAUSED"] == "false"
    assert dags["example-bash"]["LAST RUN STATE"] == "success" and dags["example-bash"]["LAST RUN"] == manual
    assert dags["workday"]["SCHEDULE"] == "after each workday, at 08:00:00", dags["workday"]
    assert ISO_TIME.match(dags["workday"]["NEXT RUN"]), dags["workday"]
    assert triggers[0]["STATE"] == "fired" and triggers[0]["HOLDER"] == "triggerer-a"


def test_logs_found_from_the_kubeconfig_and_the_run_story_in_order(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    dag = load_example("example_bash")
    dag["spec"]["tasks"][0]["args"]["bash_command"] = "echo first-try-$((1 + 1)); exit 1"
    dag["spec"]["tasks"][0]["retries"] = 0
    with controller(cluster, namespace, tmp_path, executor="local"):
        apply(cluster, namespace, dag)
        run = trigger(cluster, namespace, "example-bash")
        assert wait_run_finished(cluster, namespace, run)["status"]["state"] == "failed"
    kubeconfig = tmp_path / "kubeconfig"
    shutil.copy(cluster.kubeconfig, kubeconfig)
    # only the kubeconfig says where the controller's state dir is, as `zonda up` writes it
    up._record_state_dir(kubeconfig, tmp_path / "state")
    env = {"KUBECONFIG": str(kubeconfig), "ZONDA_STATE_DIR": ""}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "controller.cli", *args, "-n", namespace],
            capture_output=True,
            text=True,
            env={**cluster.env(), **env},
            cwd=REPO_ROOT,
        )

    found = cli("logs", run, "extract")
    assert found.returncode == 0, found.stderr
    assert "first-try-2" in found.stdout and "tries with a log: 1" in found.stderr
    missing = cli("logs", run, "extract", "--try", "3")
    assert missing.returncode != 0
    assert "no log for try 3" in missing.stderr and str(tmp_path / "state") in missing.stderr
    never = cli("logs", run, "load")
    assert never.returncode != 0 and "never ran (state upstream_failed" in never.stderr, never.stderr

    story = cli("runs", "describe", run)
    assert story.returncode == 0, story.stderr
    lines = story.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("TASK"))
    assert [line.split()[0] for line in lines[header + 1 : header + 4]] == ["extract", "transform", "load"]
    assert lines[header + 1].split()[1:3] == ["failed", "1/1"]
    events_at = next(i for i, line in enumerate(lines) if line.startswith("Events ("))
    times = [line.split()[0] for line in lines[events_at + 2 :]]
    assert times and times == sorted(times), story.stdout


def live_processes_with(marker: str) -> list[int]:
    pids = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if marker.encode() in cmdline.read_bytes():
                pids.append(int(cmdline.parent.name))
        except OSError:
            continue
    return pids


@contextlib.contextmanager
def zonda_up_running_a_long_task(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], str, Path, Path]]:
    """`zonda up` with one DAG whose task sleeps: yields the up process, the task's marker, the
    work directory and up's output, once the task's process runs. Kills what is left at the end."""
    marker = f"zonda-up-test-{uuid.uuid4().hex[:8]}"
    dag = {
        "apiVersion": "zonda.dev/v1alpha1",
        "kind": "DAG",
        "metadata": {"name": "long-task"},
        "spec": {
            "schedule": None,
            "tasks": [
                {
                    "id": "sleep",
                    "operator": "BashOperator",
                    "args": {"bash_command": f"sleep 300; echo {marker}"},
                }
            ],
        },
    }
    path = tmp_path / "long-task.yaml"
    path.write_text(yaml.safe_dump(dag))
    output = tmp_path / "up.log"
    with output.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "controller.cli", "up", "--example", str(path)],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=REPO_ROOT,
            env={**os.environ, "ZONDA_UP_RECORD": str(tmp_path / "up.json")},
            start_new_session=True,
        )
    workdir = tmp_path / "unknown"
    try:
        wait_for(lambda: live_processes_with(marker), "the task's process to run", timeout=120)
        workdir = Path(re.findall(r"logs in (\S+)", output.read_text())[0])
        assert workdir.exists()
        yield process, marker, workdir, output
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        for pid in up_leftovers.processes_mentioning(str(workdir)):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def test_zonda_up_stops_the_task_processes_it_started_and_leaves_nothing_behind(tmp_path: Path) -> None:
    with zonda_up_running_a_long_task(tmp_path) as (process, marker, workdir, output):
        os.killpg(process.pid, signal.SIGINT)  # Ctrl-C
        assert process.wait(timeout=60) == 130, output.read_text()
        # a killed process can take a moment to go (uninterruptible I/O on a loaded machine)
        wait_for(lambda: live_processes_with(marker) == [], "the task processes to be gone", timeout=30)
        assert "stopped 1 task process group(s)" in output.read_text()
        assert not workdir.exists(), "a rerun starts clean: the work dir (etcd, state, logs) is gone"
        assert not (tmp_path / "up.json").exists()


def test_after_a_killed_zonda_up_the_next_one_stops_what_it_left(tmp_path: Path) -> None:
    with zonda_up_running_a_long_task(tmp_path) as (process, marker, workdir, _):
        process.kill()  # kill -9: no chance to clean up
        process.wait()
        time.sleep(0.5)
        left = up_leftovers.processes_mentioning(str(workdir))
        assert len(left) >= 4 and live_processes_with(marker), "etcd, apiserver, controller, triggerer, task"
        assert set(left) <= set(
            up_leftovers.clean_after_previous_up(tmp_path / "up.json")
        )  # what `zonda up` does first
        wait_for(
            lambda: not up_leftovers.processes_mentioning(str(workdir)) and not live_processes_with(marker),
            "the SIGKILLed leftovers to be gone",
            timeout=30,
        )
        assert not workdir.exists()
