"""What the CLI shows of mapped task instances: `zonda tasks states` in map-index order, `zonda logs
--map-index` (the local executor's files), `zonda xcom get --map-index`. Real: the CLI's functions
over a run's status and a local executor state directory; no cluster."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest

from controller.cli.listings import task_state_rows
from controller.cli.xcom import find_xcom
from controller.operations import try_logs
from zonda.resources.dagrun_models import DagRunStatus, TaskInstanceStatus
from zonda.resources.models import TaskInstanceState

DONE = TaskInstanceStatus(state=TaskInstanceState.SUCCESS, try_number=1)


def mapped_status() -> DagRunStatus:
    instances = {f"work[{index}]": DONE.model_copy(update={"xcom": index * 10}) for index in (10, 2, 0, 1)}
    return DagRunStatus(
        task_instances={"make": DONE.model_copy(update={"xcom": [1]}), **instances, "end": DONE}
    )


def test_tasks_states_lists_mapped_instances_by_map_index() -> None:
    run = {
        "status": {
            **mapped_status().to_wire(),
            "dagSpec": {"tasks": [{"id": "make"}, {"id": "work"}, {"id": "end"}]},
        }
    }
    assert [row[0] for row in task_state_rows(run)] == [
        "make",
        "work[0]",
        "work[1]",
        "work[2]",
        "work[10]",
        "end",
    ]


def test_xcom_get_reads_one_mapped_instance() -> None:
    status = mapped_status()
    assert find_xcom(status, "r", "work", "return_value", 10) == 100
    with pytest.raises(click.ClickException, match=r"is mapped: give --map-index \(0 to 10\)"):
        find_xcom(status, "r", "work", "return_value", -1)
    with pytest.raises(click.ClickException, match="is not mapped"):
        find_xcom(status, "r", "make", "return_value", 0)


def test_logs_of_a_mapped_instance_come_from_its_own_attempts(tmp_path: Path) -> None:
    for name, index, text in [("a0", 0, "zero"), ("a1", 1, "one"), ("plain", -1, "unmapped")]:
        (tmp_path / name).mkdir()
        record = {"task_id": "work", "try_number": 1, "map_index": index}
        (tmp_path / name / "attempt.json").write_text(json.dumps(record))
        (tmp_path / name / "log").write_text(text)
    assert try_logs.local_tries(tmp_path, "work[1]")[1].parts == ["one"]
    assert try_logs.local_tries(tmp_path, "work")[1].parts == ["unmapped"]


def test_a_mapped_instance_pod_carries_its_map_index_label() -> None:
    from controller.executors import pods
    from tests.unit.controller.executors.test_pod_snapshot import DEFAULTS, OWNER, invocation, task
    from zonda.resources.names import attempt_name
    from zonda.resources.wire import LABEL_MAP_INDEX

    mapped = task("work", "BashOperator", {})
    name = attempt_name("etl-manual-20260102", "work[7]", 2)
    pod = pods.build_task_pod(
        invocation=invocation("work", "BashOperator", {}).replace(map_index=7),
        task=mapped, namespace="data", name=name, owner=OWNER, defaults=DEFAULTS,
    )  # fmt: skip
    assert pod["metadata"]["labels"][LABEL_MAP_INDEX] == "7"
    assert pod["metadata"]["name"] == name and "-work-7-2-" in name
    unmapped = pods.build_task_pod(
        invocation=invocation("work", "BashOperator", {}), task=mapped, namespace="data", name=name,
        owner=OWNER, defaults=DEFAULTS,
    )  # fmt: skip
    assert LABEL_MAP_INDEX not in unmapped["metadata"]["labels"]


def test_the_ui_summarises_a_mapped_task_as_airflows_grid_does() -> None:
    from controller.ui import views

    tis = {"make": {"state": "success"}, "work[0]": {"state": "success"}, "work[1]": {"state": "failed"},
           "work[2]": {"state": "running"}, "end": {}}  # fmt: skip
    assert views.task_states(tis) == {"make": "success", "work": "failed", "end": "none"}
