"""`include_prior_dates` finds the DAG's earlier runs by the `zonda.dev/dag` label on a real apiserver:
runs of other DAGs are never listed, and a run made by hand without the label is not seen (its
controller posts a `MissingDagLabel` Warning saying so, tested in tests/unit)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from controller.devtools.devcluster import Cluster
from controller.xcom.backends import XComStore
from tests.cluster.zonda_processes import apply
from zonda.resources.dagrun_models import dagrun_labels
from zonda.resources.invocations import TaskInvocation
from zonda.resources.run_types import RunType


def finished_run(
    cluster: Cluster, namespace: str, name: str, dag: str, day: int, value: int, *, labelled: bool
) -> None:
    """A DagRun whose `count` task returned `value`, its status written as the controller would."""
    metadata: dict[str, Any] = {"name": name}
    if labelled:
        metadata["labels"] = dagrun_labels(dag, RunType.MANUAL)
    apply(cluster, namespace, {
        "apiVersion": "zonda.dev/v1alpha1", "kind": "DagRun", "metadata": metadata,
        "spec": {"dagName": dag, "logicalDate": f"2024-01-0{day}T00:00:00Z"},
    })  # fmt: skip
    status = {
        "state": "success",
        "logicalDate": f"2024-01-0{day}T00:00:00Z",
        "taskInstances": {"count": {"state": "success", "xcom": value}},
    }
    cluster.kubectl(
        "patch", "dagrun", name, "-n", namespace, "--subresource=status", "--type=merge",
        "-p", json.dumps({"status": status}),
    )  # fmt: skip


def test_prior_runs_are_the_dags_labelled_runs_only(cluster: Cluster, namespace: str) -> None:
    finished_run(cluster, namespace, "nightly-1", "nightly", 1, 10, labelled=True)
    finished_run(cluster, namespace, "nightly-2", "nightly", 2, 20, labelled=True)
    finished_run(cluster, namespace, "other-3", "other", 3, 99, labelled=True)
    finished_run(cluster, namespace, "nightly-by-hand-4", "nightly", 4, 40, labelled=False)
    when = datetime(2024, 1, 5, tzinfo=UTC)
    invocation = TaskInvocation(
        dag_name="nightly", run_name="nightly-5", namespace=namespace, run_type=RunType.MANUAL,
        task_id="report", try_number=1, logical_date=when, data_interval_start=when, data_interval_end=when,
    )  # fmt: skip
    read = XComStore(kubeconfig=str(cluster.kubeconfig)).earlier_reader(invocation)
    assert read("count", "return_value") == [20, 10], (
        "latest first; the other DAG's and the unlabelled run unseen"
    )
