"""Airflow 3 manual runs with no logical date, on a real apiserver under the controller.

Two unchanged Airflow 3 files (`airflow3_manual_dags/`): `zonda trigger` of the one without
`--logical-date`, and the other's `TriggerDagRunOperator(logical_date=None)`, each make a run with no
logical date (Airflow 3.1.8's `trigger_dag._trigger_dag`, the standard provider's operator) whose task
sees Airflow 3's context for it (task-sdk `get_template_context`: no `ds`/`ts`/`logical_date`/data
interval, `dag_run.run_after`). A positive control: the same DAG triggered with `--logical-date` has it.
Runs are counted from the apiserver; the local executor runs the tasks for real.
"""

from __future__ import annotations

from pathlib import Path

from controller.devtools.devcluster import Cluster
from tests.cluster.zonda_processes import (
    controller,
    get,
    runs_of,
    ti_states,
    trigger,
    wait_run_finished,
    zonda,
)

FOLDER = Path(__file__).parent / "airflow3_manual_dags"
CHILD, PARENT = "af3-no-logical-date", "af3-trigger-parent"
DATE_KEYS = ["data_interval_end", "data_interval_start", "ds", "logical_date", "ts", "ts_nodash"]


def test_airflow3_manual_runs_without_a_logical_date_run_with_airflow3s_context(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    zonda(cluster, "dags", "apply", str(FOLDER), "--airflow-compat", "-n", namespace)
    dags = {d["metadata"]["name"]: d for d in get(cluster, namespace, "dags")["items"]}
    assert {name: d["spec"]["airflowVersion"] for name, d in dags.items()} == {CHILD: "3", PARENT: "3"}
    env = {"ZONDA_DAGS_FOLDER": str(FOLDER)}
    with controller(cluster, namespace, tmp_path, executor="local", env=env) as process:
        try:
            run = trigger(cluster, namespace, CHILD)
            body = wait_run_finished(cluster, namespace, run, timeout=120)
            assert ti_states(body) == {"look": "success", "echo": "success"}, body["status"]
            assert "logicalDate" not in body["spec"] and "logicalDate" not in body["status"]
            run_after = body["spec"]["runAfter"]
            assert body["status"]["runAfter"] == run_after
            assert body["status"]["runId"].startswith("manual__")
            seen = body["status"]["taskInstances"]["look"]["xcom"]
            assert seen["present"] == [] and seen["logical_date"] is None, seen
            assert seen["data_interval_start"] is None
            run_id = body["status"]["runId"]  # Airflow's run id, not the resource name
            assert seen["run_id"] == run_id and run_id != run
            assert seen["task_instance_key_str"] == f"{CHILD}__look__{run_id}"
            assert seen["run_after"].replace("+00:00", "Z") == run_after

            header, *rows = cluster.kubectl("get", "dagruns", "-n", namespace).stdout.splitlines()
            row = next(line for line in rows if line.startswith(run))
            logical_at, after_at = header.index("LOGICAL DATE"), header.index("RUN AFTER")
            assert row[logical_at:after_at].strip() == "", (header, row)  # no logical date: blank
            assert row[after_at:].startswith(run_after), (header, row)

            # positive control: given a logical date, the same DAG's run has it and its task the keys
            dated = zonda(
                cluster, "trigger", CHILD, "-n", namespace, "--logical-date", "2026-01-01T00:00:00+00:00"
            ).stdout.split()[0].split("/", 1)[1]  # fmt: skip
            dated_body = wait_run_finished(cluster, namespace, dated, timeout=120)
            assert dated_body["status"]["logicalDate"] == "2026-01-01T00:00:00Z"
            assert dated_body["status"]["taskInstances"]["look"]["xcom"]["present"] == DATE_KEYS

            parent_run = trigger(cluster, namespace, PARENT)
            parent = wait_run_finished(cluster, namespace, parent_run, timeout=120)
            assert ti_states(parent) == {"trigger": "success"}, parent["status"]
            child_name = parent["status"]["taskInstances"]["trigger"]["xcoms"]["trigger_run_id"]
            assert "trigger_logical_date_iso" not in parent["status"]["taskInstances"]["trigger"]["xcoms"]
            child = wait_run_finished(cluster, namespace, child_name, timeout=120)
            assert ti_states(child) == {"look": "success", "echo": "success"}
            assert "logicalDate" not in child["status"]
            assert child["status"]["taskInstances"]["look"]["xcom"]["present"] == []

            names = [r["metadata"]["name"] for r in runs_of(cluster, namespace, CHILD)]
            assert sorted(names) == sorted([run, dated, child_name]), "one run per trigger"
        finally:
            print(f"--- controller log\n{process.log()[-6000:]}")
