"""The CRDs on a real apiserver: schemas accept what users write, reject what they must not."""

from __future__ import annotations

import json

import pytest

from controller.devtools.devcluster import Cluster

VALID_DAG = {
    "apiVersion": "zonda.dev/v1alpha1",
    "kind": "DAG",
    "metadata": {"name": "hello"},
    "spec": {
        "schedule": "@daily",
        "startDate": "2026-01-01T00:00:00Z",
        "defaultArgs": {"retries": 2, "retryDelay": "30s"},
        "tasks": [
            {"id": "extract", "operator": "BashOperator", "args": {"bash_command": "echo {{ ds }}"}},
            {
                "id": "load",
                "operator": "PythonOperator",
                "dependsOn": ["extract"],
                "args": {"python_callable": "examples.operators.callables:print_context"},
            },
        ],
    },
}


def apply(cluster: Cluster, namespace: str, obj: dict[str, object]) -> tuple[int, str]:
    result = cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(obj), check=False)
    return result.returncode, result.stdout + result.stderr


def with_spec(**changes: object) -> dict[str, object]:
    dag = json.loads(json.dumps(VALID_DAG))
    dag["spec"].update(changes)
    return dag


@pytest.mark.parametrize(
    ("obj", "error"),
    [
        pytest.param(
            with_spec(timetable={"class": "x.Y"}),
            "set either schedule or timetable, not both",
            id="a DAG with both schedule and timetable is rejected",
        ),
        pytest.param(
            with_spec(dagrunTimeout="ten minutes"),
            "dagrunTimeout",
            id="a duration that is not a duration is rejected",
        ),
        pytest.param(with_spec(maxActiveRuns=0), "maxActiveRuns", id="zero maxActiveRuns is rejected"),
        pytest.param(
            with_spec(tasks=[{"id": "a", "triggerRule": "sometimes"}]),
            "triggerRule",
            id="an unknown trigger rule is rejected",
        ),
        pytest.param(
            with_spec(tasks=[{"id": "a"}, {"id": "a"}]),
            "Duplicate value",
            id="duplicate task ids are rejected",
        ),
        pytest.param(
            with_spec(tasks=[{"id": "a", "retries": -1}]), "retries", id="negative retries are rejected"
        ),
        pytest.param(
            with_spec(tasks=[{"id": "a", "colour": "blue"}]), "colour", id="an unknown task field is rejected"
        ),
        pytest.param(with_spec(tasks=[]), "tasks", id="a DAG without tasks is rejected"),
    ],
)
def test_invalid_dags_are_rejected_by_the_apiserver(
    cluster: Cluster, namespace: str, obj: dict[str, object], error: str
) -> None:
    code, output = apply(cluster, namespace, obj)
    assert code != 0, output
    assert error in output


def test_a_valid_dag_is_stored_as_written(cluster: Cluster, namespace: str) -> None:
    code, output = apply(cluster, namespace, VALID_DAG)
    assert code == 0, output
    stored = json.loads(cluster.kubectl("get", "dag", "hello", "-n", namespace, "-o", "json").stdout)
    assert stored["spec"] == VALID_DAG["spec"]


def test_kubectl_lists_all_three_kinds_by_category_with_columns(cluster: Cluster, namespace: str) -> None:
    assert apply(cluster, namespace, VALID_DAG)[0] == 0
    run = {
        "apiVersion": "zonda.dev/v1alpha1",
        "kind": "DagRun",
        "metadata": {"name": "hello-manual-1"},
        "spec": {"dagName": "hello", "runType": "manual", "conf": {"x": 1}},
    }
    trigger = {
        "apiVersion": "zonda.dev/v1alpha1",
        "kind": "Trigger",
        "metadata": {"name": "hello-t"},
        "spec": {
            "classpath": "zonda.triggers.temporal.DateTimeTrigger",
            "dagRun": "hello-manual-1",
            "taskId": "wait",
            "tryNumber": 1,
            "shard": 0,
            "kwargs": {"moment": "2026-01-01T00:00:00+00:00"},
        },
    }
    assert apply(cluster, namespace, run)[0] == 0
    assert apply(cluster, namespace, trigger)[0] == 0
    listing = cluster.kubectl("get", "zonda", "-n", namespace).stdout
    assert "dag.zonda.dev/hello" in listing
    assert "dagrun.zonda.dev/hello-manual-1" in listing
    assert "trigger.zonda.dev/hello-t" in listing
    headers = {
        "dags": ["SCHEDULE", "PAUSED", "NEXT RUN", "ACTIVE RUNS", "LAST RUN STATE", "AGE"],
        "dagruns": ["DAG", "STATE", "RUN TYPE", "LOGICAL DATE", "STARTED", "AGE"],
        "triggers": ["CLASSPATH", "DAGRUN", "TASK", "STATE", "AGE"],
    }
    for resource, columns in headers.items():
        header = cluster.kubectl("get", resource, "-n", namespace).stdout.splitlines()[0]
        for column in columns:
            assert column in header, (resource, header)
    short = cluster.kubectl("get", "dag,dr,trig", "-n", namespace, "-o", "name").stdout.split()
    assert len(short) == 3
