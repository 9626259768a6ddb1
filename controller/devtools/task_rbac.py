"""The task ServiceAccount `zonda up` gives its task pods: what the chart grants them by default.

A task pod's runner writes XComs over 1 KiB as XComChunks (the default Kubernetes backend) and reads
earlier DagRuns for `xcom_pull(..., include_prior_dates=True)`; without a ServiceAccount allowed to, a
real pod's large XCom fails with 403. These are the rules of helm/zonda/templates/task-xcom-rbac.yaml, in
the one namespace `zonda up` serves (the chart stays the reference for installs).
"""

from __future__ import annotations

import json
from typing import Any, Protocol

#: The ServiceAccount task pods run as under `zonda up --executor kubernetes`.
TASK_SERVICE_ACCOUNT = "zonda-task"

TASK_RULES: list[dict[str, Any]] = [
    {"apiGroups": ["zonda.dev"], "resources": ["dagruns"], "verbs": ["get", "list"]},
    {"apiGroups": ["zonda.dev"], "resources": ["assetevents"], "verbs": ["list"]},
    {"apiGroups": ["zonda.dev"], "resources": ["xcomchunks"], "verbs": ["create", "patch", "get"]},
]


class _Kubectl(Protocol):
    def kubectl(self, *args: str, input: str | None = None) -> Any: ...


def task_rbac_manifests(namespace: str) -> list[dict[str, Any]]:
    """ServiceAccount, Role and RoleBinding for task pods in `namespace`."""
    metadata = {
        "name": TASK_SERVICE_ACCOUNT,
        "namespace": namespace,
        "labels": {"app.kubernetes.io/name": "zonda"},
    }
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": metadata},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": metadata,
            "rules": TASK_RULES,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": metadata,
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": TASK_SERVICE_ACCOUNT,
            },
            "subjects": [{"kind": "ServiceAccount", "name": TASK_SERVICE_ACCOUNT, "namespace": namespace}],
        },
    ]


def grant_task_pods(cluster: _Kubectl, namespace: str) -> list[str]:
    """Apply the task ServiceAccount and its grants; returns the controller options that use it."""
    manifest = {"apiVersion": "v1", "kind": "List", "items": task_rbac_manifests(namespace)}
    cluster.kubectl("apply", "-f", "-", input=json.dumps(manifest))
    return ["--task-service-account", TASK_SERVICE_ACCOUNT]
