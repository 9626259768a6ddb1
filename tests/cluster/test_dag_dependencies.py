"""DAG dependencies end to end (the seed's "DAG Dependencies"): controller + triggerer processes on a
real apiserver, task code run for real by the local executor.

A parent DAG's `TriggerDagRunOperator` creates a run of the child DAG and waits for it in the
triggerer (deferrable); the child's deferrable `ExternalTaskSensor` waits for the parent's task at
the same logical date; then `zonda clear` of the parent's task follows its `ExternalTaskMarker`
into the child's run, and both run again without a second child run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from controller.devtools.devcluster import Cluster
from tests.cluster.zonda_processes import (
    apply,
    controller,
    get,
    runs_of,
    ti_states,
    trigger,
    triggerer,
    wait_for,
    wait_run_finished,
    zonda,
)
from zonda.resources import wire


def dag(name: str, tasks: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "zonda.dev/v1alpha1",
        "kind": "DAG",
        "metadata": {"name": name},
        "spec": {"schedule": None, "tasks": tasks},
    }


PARENT = dag(
    "dd-parent",
    [
        {"id": "extract", "operator": "BashOperator", "args": {"bash_command": "echo extracted"}},
        {
            "id": "mark_child",
            "operator": "ExternalTaskMarker",
            "dependsOn": ["extract"],
            "args": {"external_dag_id": "dd_child", "external_task_id": "wait_for_parent"},
        },
        {
            "id": "trigger_child",
            "operator": "TriggerDagRunOperator",
            "dependsOn": ["extract"],
            "args": {
                "trigger_dag_id": "dd-child",
                "logical_date": "{{ logical_date.isoformat() }}",
                "conf": {"parent_run": "{{ run_id }}"},
                "wait_for_completion": True,
                "deferrable": True,
                "poke_interval": 1,
            },
        },
    ],
)
CHILD = dag(
    "dd-child",
    [
        {
            "id": "wait_for_parent",
            "operator": "ExternalTaskSensor",
            "args": {
                "external_dag_id": "dd_parent",
                "external_task_id": "extract",
                "failed_states": ["failed"],
                "deferrable": True,
                "poke_interval": 1,
                "timeout": 120,
            },
        },
        {
            "id": "report",
            "operator": "PythonOperator",
            "dependsOn": ["wait_for_parent"],
            "args": {
                "python_callable": "examples.operators.callables:return_value",
                "op_kwargs": {"value": "{{ dag_run.conf['parent_run'] }}"},
            },
        },
    ],
)


def test_a_parent_triggers_a_child_and_waits_deferred_while_the_child_senses_the_parents_task(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    apply(cluster, namespace, PARENT)
    apply(cluster, namespace, CHILD)
    with controller(cluster, namespace, tmp_path, executor="local"), triggerer(cluster, namespace, tmp_path):
        parent_run = trigger(cluster, namespace, "dd-parent")

        # The parent's trigger task defers to a DagStateTrigger while the child runs.
        deferred = wait_for(
            lambda: (
                (b := get(cluster, namespace, "dagrun", parent_run))
                .get("status", {})
                .get("taskInstances", {})
                .get("trigger_child", {})
                .get("state")
                == "deferred"
                and b
            ),
            "the parent's TriggerDagRunOperator to defer",
            timeout=120,
        )
        trigger_name = deferred["status"]["taskInstances"]["trigger_child"]["triggerName"]
        pushed = deferred["status"]["taskInstances"]["trigger_child"]["xcoms"]
        assert set(pushed) == {"trigger_run_id", "trigger_logical_date_iso"}, "pushed before deferring"
        trigger_obj = get(cluster, namespace, "trigger", trigger_name)
        assert trigger_obj["spec"]["classpath"].endswith("DagStateTrigger")

        children = runs_of(cluster, namespace, "dd-child")
        assert len(children) == 1
        child = children[0]
        labels = child["metadata"]["labels"]
        assert labels[wire.LABEL_TRIGGERED_BY_RUN] == parent_run
        assert child["metadata"]["annotations"][wire.ANNOTATION_TRIGGERED_BY_TASK] == "trigger_child"
        assert child["spec"]["runType"] == "manual"
        listed = cluster.kubectl(
            "get", "dagruns", "-n", namespace, "-l", f"{wire.LABEL_TRIGGERED_BY_RUN}={parent_run}",
            "-o", "name",
        ).stdout.split()  # fmt: skip
        assert listed == [f"dagrun.zonda.dev/{child['metadata']['name']}"], "kubectl shows the chain"

        child_body = wait_run_finished(cluster, namespace, child["metadata"]["name"], timeout=120)
        assert ti_states(child_body) == {"wait_for_parent": "success", "report": "success"}
        sensor = child_body["status"]["taskInstances"]["wait_for_parent"]
        assert sensor["deferralCount"] == 1, "the sensor waited in the triggerer"
        parent = get(cluster, namespace, "dagrun", parent_run)
        assert child_body["status"]["logicalDate"] == parent["status"]["logicalDate"]
        # conf was templated with the parent try's run_id: Airflow's run id, not the DagRun's name
        templated = child_body["status"]["taskInstances"]["report"]["xcom"]
        assert templated == parent["status"]["runId"] != parent_run

        parent_body = wait_run_finished(cluster, namespace, parent_run, timeout=120)
        assert ti_states(parent_body) == {
            "extract": "success",
            "mark_child": "success",
            "trigger_child": "success",
        }
        trigger_ti = parent_body["status"]["taskInstances"]["trigger_child"]
        assert (trigger_ti["tryNumber"], trigger_ti["deferralCount"]) == (1, 1)
        assert trigger_ti["xcoms"]["trigger_run_id"] == child["metadata"]["name"]

        listing = zonda(cluster, "runs", "list", "dd-child", "-n", namespace).stdout
        assert f"{parent_run}/trigger_child" in listing, listing

        # Clearing the parent's extract with its downstream follows the marker into the child's run.
        out = zonda(cluster, "clear", parent_run, "--task", "extract", "--downstream", "-n", namespace).stdout
        assert f"(through ExternalTaskMarker {parent_run}/mark_child)" in out, out
        assert "wait_for_parent: success -> none" in out and "report: success -> none" in out, out

        def rerun_finished() -> dict[str, Any] | None:
            body = get(cluster, namespace, "dagrun", child["metadata"]["name"])
            ti = body["status"]["taskInstances"]["report"]
            return body if ti.get("tryNumber") == 2 and ti["state"] == "success" else None

        child_again = wait_for(rerun_finished, "the child's tasks to run again", timeout=180)
        assert child_again["status"]["taskInstances"]["wait_for_parent"]["tryNumber"] == 2
        parent_again = wait_for(
            lambda: (
                (b := get(cluster, namespace, "dagrun", parent_run))["status"]["taskInstances"][
                    "trigger_child"
                ].get("tryNumber")
                == 2
                and b["status"].get("state") == "success"
                and b
            ),
            "the parent to succeed again",
            timeout=180,
        )
        assert ti_states(parent_again)["trigger_child"] == "success"
        assert len(runs_of(cluster, namespace, "dd-child")) == 1, (
            "the retry found its child run, no second one"
        )


def test_a_rescheduling_sensor_finds_the_external_run_by_logical_date_and_fails_with_it(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    """Poking from the task's own process (no triggerer), in reschedule mode, with failed_states."""
    apply(cluster, namespace, dag("dd-upstream", [{"id": "load", "operator": "BashOperator",
                                                   "args": {"bash_command": "exit 1"}}]))  # fmt: skip
    apply(
        cluster,
        namespace,
        dag(
            "dd-watcher",
            [
                {
                    "id": "wait",
                    "operator": "ExternalTaskSensor",
                    "args": {
                        "external_dag_id": "dd_upstream",
                        "external_task_id": "load",
                        "failed_states": ["failed"],
                        "mode": "reschedule",
                        "poke_interval": 1,
                        "timeout": 120,
                    },
                }
            ],
        ),
    )
    with controller(cluster, namespace, tmp_path, executor="local"):
        upstream = trigger(cluster, namespace, "dd-upstream")
        logical_date = wait_for(
            lambda: get(cluster, namespace, "dagrun", upstream).get("status", {}).get("logicalDate"),
            "the upstream run to start",
        )
        apply(
            cluster,
            namespace,
            {
                "apiVersion": "zonda.dev/v1alpha1",
                "kind": "DagRun",
                "metadata": {"name": "dd-watcher-same-date"},
                "spec": {"dagName": "dd-watcher", "logicalDate": logical_date},
            },
        )
        body = wait_run_finished(cluster, namespace, "dd-watcher-same-date", timeout=120)
    sensor = body["status"]["taskInstances"]["wait"]
    assert sensor["state"] == "failed"
    said = f"{sensor.get('reason')} {sensor.get('message')}"
    assert "The external task(s) load of DAG dd-upstream" in said and "failed" in said, sensor
