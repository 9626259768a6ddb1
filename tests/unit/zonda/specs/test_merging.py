"""The one merge rule for Kubernetes objects (`zonda.specs.merging`): Kubernetes' strategic merge for pods.

Used by DAG resolution (defaultArgs -> group -> task `container` / `podOverride`) and by the pod builder
(the task's container and `podOverride` over the built pod), so both agree on every field.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from controller.executors import pods
from zonda.resources.invocations import INVOCATION_ENV, TaskInvocation
from zonda.resources.run_types import RunType
from zonda.specs.dags import ResolvedDag, ResolvedTask, parse_dag_spec, resolve_dag
from zonda.specs.merging import strategic_merge

CASES = [
    pytest.param(
        {"a": {"b": 1, "c": 2}},
        {"a": {"c": 3}},
        {"a": {"b": 1, "c": 3}},
        id="dicts merge key by key, recursively",
    ),
    pytest.param(
        {"env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]},
        {"env": [{"name": "B", "value": "two"}, {"name": "C", "value": "3"}]},
        {"env": [{"name": "A", "value": "1"}, {"name": "B", "value": "two"}, {"name": "C", "value": "3"}]},
        id="env merges by name: the override wins for its names, new ones are appended",
    ),
    pytest.param(
        {"containers": [{"name": "base", "image": "a", "resources": {"limits": {"cpu": "1"}}}]},
        {"containers": [{"name": "base", "resources": {"limits": {"memory": "1Gi"}}}, {"name": "side"}]},
        {
            "containers": [
                {"name": "base", "image": "a", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}},
                {"name": "side"},
            ]
        },
        id="containers merge by name, each one recursively; a new name is a sidecar",
    ),
    pytest.param(
        {"volumeMounts": [{"name": "a", "mountPath": "/a"}], "volumes": [{"name": "a", "emptyDir": {}}]},
        {"volumeMounts": [{"name": "b", "mountPath": "/a"}], "volumes": [{"name": "b", "emptyDir": {}}]},
        {
            "volumeMounts": [{"name": "b", "mountPath": "/a"}],
            "volumes": [{"name": "a", "emptyDir": {}}, {"name": "b", "emptyDir": {}}],
        },
        id="volumeMounts merge by mountPath, volumes by name",
    ),
    pytest.param(
        {"args": ["a", "b"], "command": ["sh"], "tolerations": [{"key": "x"}]},
        {"args": ["c"], "tolerations": [{"key": "y"}]},
        {"args": ["c"], "command": ["sh"], "tolerations": [{"key": "y"}]},
        id="lists without a merge key (args, command, tolerations) are replaced whole",
    ),
    pytest.param(
        {"env": [{"name": "A", "value": "1"}]},
        {"env": [{"valueFrom": {"fieldRef": {"fieldPath": "x"}}}]},
        {"env": [{"name": "A", "value": "1"}, {"valueFrom": {"fieldRef": {"fieldPath": "x"}}}]},
        id="an item without its merge key is appended",
    ),
    pytest.param({"a": 1}, {"a": None}, {"a": None}, id="a scalar is replaced, null included"),
]


@pytest.mark.parametrize(("base", "override", "expected"), CASES)
def test_strategic_merge(base: dict[str, Any], override: dict[str, Any], expected: dict[str, Any]) -> None:
    assert strategic_merge(base, override) == expected


def test_the_merge_changes_neither_input() -> None:
    base = {"env": [{"name": "A", "value": "1"}]}
    override = {"env": [{"name": "A", "value": "2"}]}
    merged = strategic_merge(base, override)
    merged["env"][0]["value"] = "3"
    assert base == {"env": [{"name": "A", "value": "1"}]} and override == {
        "env": [{"name": "A", "value": "2"}]
    }


def resolve(default_container: dict[str, Any], task_container: dict[str, Any]) -> ResolvedDag:
    spec = parse_dag_spec(
        {
            "defaultArgs": {"container": default_container},
            "tasks": [{"id": "t", "container": {"image": "busybox", **task_container}}],
        }
    )
    return resolve_dag("dag", spec)


def test_a_tasks_env_adds_to_the_dags_default_env_as_kubernetes_would() -> None:
    dag = resolve({"env": [{"name": "A", "value": "1"}]}, {"env": [{"name": "B", "value": "2"}]})
    assert dag.tasks["t"].container["env"] == [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]


def build_pod(
    operator: str | None,
    args: dict[str, Any],
    container: dict[str, Any],
    pod_override: dict[str, Any],
    defaults: pods.PodDefaults | None = None,
) -> dict[str, Any]:
    """One task's pod from the builder, with the chart's defaults."""
    moment = datetime(2026, 1, 1, tzinfo=UTC)
    resolved = ResolvedTask(
        task_id="t",
        operator=operator,
        args=args,
        upstream=frozenset(),
        downstream=frozenset(),
        container=container,
        pod_override=pod_override,
    )
    invocation = TaskInvocation(
        dag_name="dag",
        run_name="run",
        run_type=RunType.MANUAL,
        task_id="t",
        try_number=1,
        operator=operator,
        args=args,
        logical_date=moment,
        data_interval_start=moment,
        data_interval_end=moment,
    )
    return pods.build_task_pod(
        invocation=invocation,
        task=resolved,
        namespace="default",
        name="pod",
        owner={"metadata": {"name": "run", "uid": "u"}},
        defaults=defaults or pods.PodDefaults(),
    )


def test_a_pod_override_adding_env_to_the_base_container_keeps_the_runners_invocation() -> None:
    override = {
        "spec": {"containers": [{"name": pods.BASE_CONTAINER, "env": [{"name": "EXTRA", "value": "x"}]}]}
    }
    pod = build_pod("BashOperator", {"bash_command": "true"}, {}, override)
    names = [e["name"] for e in pod["spec"]["containers"][0]["env"]]
    assert names == [INVOCATION_ENV, "EXTRA"], "a list replaced whole would have lost the invocation"


def _built_pod(container: dict[str, Any], pod_override: dict[str, Any]) -> dict[str, Any]:
    return build_pod(None, {}, {"image": "root-image:1", **container}, pod_override)


def test_a_task_pod_is_restricted_by_default_without_pinning_a_uid() -> None:
    pod = _built_pod({}, {})
    assert pod["spec"]["securityContext"] == {
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert pod["spec"]["containers"][0]["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
    }
    assert "runAsUser" not in pod["spec"]["securityContext"], "the image's USER decides the uid"


def test_the_users_security_context_wins_over_the_restricted_default() -> None:
    pod = _built_pod(
        {"securityContext": {"capabilities": {"add": ["NET_ADMIN"], "drop": []}}},
        {"spec": {"securityContext": {"runAsNonRoot": False, "runAsUser": 0}}},
    )
    assert pod["spec"]["securityContext"] == {
        "runAsNonRoot": False,
        "runAsUser": 0,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert pod["spec"]["containers"][0]["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"add": ["NET_ADMIN"], "drop": []},
    }


def test_the_task_node_selector_default_steers_pods_and_a_tasks_pod_override_wins_key_by_key() -> None:
    defaults = pods.PodDefaults(node_selector={"zonda.dev/node": "real", "disk": "ssd"})
    assert "nodeSelector" not in build_pod("BashOperator", {}, {}, {})["spec"], "default: any node"
    pod = build_pod("BashOperator", {}, {}, {}, defaults)
    assert pod["spec"]["nodeSelector"] == {"zonda.dev/node": "real", "disk": "ssd"}
    pod = build_pod("BashOperator", {}, {}, {"spec": {"nodeSelector": {"disk": "hdd"}}}, defaults)
    assert pod["spec"]["nodeSelector"] == {"zonda.dev/node": "real", "disk": "hdd"}
