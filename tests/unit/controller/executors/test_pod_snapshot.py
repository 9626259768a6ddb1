"""Snapshot of the task pods the pure builder makes (Argo snapshot-tests its pod builder the same way).

The golden files under `tests/unit/controller/executors/golden/` are the whole manifests. A change to the
builder that
changes a pod fails here; when the change is meant, regenerate them deliberately and review the diff:

    ZONDA_UPDATE_GOLDEN=1 python -m pytest tests/unit/controller/executors/test_pod_snapshot.py
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.executors import pods
from zonda.resources.invocations import TaskInvocation
from zonda.resources.run_types import RunType
from zonda.specs.dags import ResolvedTask

GOLDEN = Path(__file__).parent / "golden"
MOMENT = datetime(2026, 1, 2, tzinfo=UTC)
OWNER = {"metadata": {"name": "etl-manual-20260102", "uid": "2f1c6a9e-0000-4000-8000-000000000001"}}
DEFAULTS = pods.PodDefaults(
    image="registry.example/zonda:1.2.3",
    image_pull_policy="IfNotPresent",
    service_account="zonda-tasks",
    resources={"requests": {"cpu": "100m", "memory": "128Mi"}},
    env=({"name": "TZ", "value": "UTC"}, {"name": "SHARED", "value": "from the chart"}),
    labels={"team": "data"},
    image_pull_secrets=("regcred",),
)


def invocation(task_id: str, operator: str | None, args: dict[str, Any]) -> TaskInvocation:
    return TaskInvocation(
        dag_name="etl",
        run_name="etl-manual-20260102",
        run_type=RunType.MANUAL,
        task_id=task_id,
        try_number=2,
        max_tries=3,
        operator=operator,
        args=args,
        logical_date=MOMENT,
        data_interval_start=MOMENT,
        data_interval_end=MOMENT,
    )


def task(task_id: str, operator: str | None, args: dict[str, Any], **fields: Any) -> ResolvedTask:
    return ResolvedTask(
        task_id=task_id, operator=operator, args=args, upstream=frozenset(), downstream=frozenset(), **fields
    )


CASES = {
    "runner_pod": task(
        "transform.clean",
        "BashOperator",
        {"bash_command": "echo {{ ds }}"},
        container={
            "env": [{"name": "SHARED", "value": "the task's own"}],
            "resources": {"limits": {"cpu": "1"}},
        },
        pod_override={
            "metadata": {"annotations": {"team.example/owner": "ana"}},
            "spec": {
                "containers": [
                    {"name": "base", "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}]}
                ],
                "volumes": [{"name": "scratch", "emptyDir": {}}],
                "nodeSelector": {"pool": "batch"},
            },
        },
    ),
    "container_task_pod": task(
        "publish",
        None,
        {},
        container={"image": "alpine:3.20", "command": ["sh", "-c", "echo published"]},
    ),
    "kubernetes_pod_operator_pod": task(
        "kpo",
        "KubernetesPodOperator",
        {"image": "busybox:1.36", "cmds": ["sh", "-c"], "arguments": ["echo hi"], "env_vars": {"A": 1}},
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_built_pod_matches_its_golden_file(case: str) -> None:
    resolved = CASES[case]
    pod = pods.build_task_pod(
        invocation=invocation(resolved.task_id, resolved.operator, dict(resolved.args)),
        task=resolved,
        namespace="data",
        name=f"etl-{case.replace('_', '-')}",
        owner=OWNER,
        defaults=DEFAULTS,
    )
    text = yaml.safe_dump(pod, sort_keys=True, width=120)
    golden = GOLDEN / f"{case}.yaml"
    if os.environ.get("ZONDA_UPDATE_GOLDEN") == "1":
        golden.write_text(text)
    assert golden.exists(), f"no golden file {golden}: run with ZONDA_UPDATE_GOLDEN=1 and review it"
    assert text == golden.read_text(), f"the pod differs from {golden.name}; if meant, regenerate and review"
