"""Task pods: a pure builder (no client) and a pure reader of what a pod says about its try.

Argo's shape: `build_task_pod` only builds a manifest from its inputs (snapshot-testable);
submission lives in `controller.executors.kubernetes`. `observe_pod` turns a pod's status into the core's
`ObservedAttempt`, parsing the runner's `TaskResult` from the container's termination message.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from zonda.passes.decisions import AttemptPhase, ObservedAttempt
from zonda.resources.invocations import (
    INVOCATION_ENV,
    INVOCATION_PARTS_ENV,
    TaskInvocation,
    TaskResult,
    invocation_env,
)
from zonda.resources.models import API_VERSION
from zonda.resources.wire import (
    ANNOTATION_LOGICAL_DATE,
    ANNOTATION_TASK_ID,
    FINALIZER_TRY_TRACKING,
    LABEL_DAG,
    LABEL_DAGRUN,
    LABEL_MAP_INDEX,
    LABEL_TASK,
    LABEL_TRY,
    label_value,
)
from zonda.resources.wire import parse_time as _parse_time
from zonda.specs import merging
from zonda.specs.dags import ResolvedTask
from zonda.specs.operator_registry import CONTAINER_OPERATORS

BASE_CONTAINER = "base"  # Airflow's name for the task's container in pod_override

# Pod Security "restricted" by default. runAsNonRoot without a runAsUser: the kubelet checks the image's
# numeric USER (10001 in the Zonda image), so a user's image that runs as root fails with the kubelet's
# reason rather than being silently run under another uid. A task's container or podOverride wins.
POD_SECURITY_CONTEXT: Mapping[str, Any] = {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
CONTAINER_SECURITY_CONTEXT: Mapping[str, Any] = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
}


@dataclass(frozen=True)
class PodDefaults:
    """What the chart (or the CLI) sets for every task pod; a task's own fields win."""

    image: str = "zonda:latest"
    image_pull_policy: str | None = None
    service_account: str | None = None
    resources: Mapping[str, Any] = field(default_factory=dict)
    env: tuple[Mapping[str, Any], ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    image_pull_secrets: tuple[Any, ...] = ()  # names or {"name": ...} objects
    node_selector: Mapping[str, str] = field(default_factory=dict)  # a task's podOverride wins


def is_container_task(task: ResolvedTask) -> bool:
    return task.operator is None or task.operator in CONTAINER_OPERATORS


def _container_from_kpo_args(args: Mapping[str, Any]) -> dict[str, Any]:
    """KubernetesPodOperator's argument names mapped to a container (image, cmds, arguments, env_vars)."""
    container: dict[str, Any] = {}
    if "image" in args:
        container["image"] = args["image"]
    if "cmds" in args:
        container["command"] = list(args["cmds"])
    if "arguments" in args:
        container["args"] = list(args["arguments"])
    env_vars = args.get("env_vars")
    if isinstance(env_vars, Mapping):
        container["env"] = [{"name": k, "value": str(v)} for k, v in env_vars.items()]
    elif isinstance(env_vars, list):
        container["env"] = list(env_vars)
    if "container_resources" in args:
        container["resources"] = dict(args["container_resources"])
    return container


def escape_env_value(value: str) -> str:
    """`value` as a pod's env entry must write it for the container to get it unchanged.

    The kubelet expands `$(NAME)` in an env value with the variables defined before it, and turns
    `$$` into `$` (Kubernetes' `expansion.Expand`): an invocation holds the task's rendered
    arguments and the run's conf, where `echo $$` (bash's PID) or a conf of "$(HOSTNAME)" is data,
    and reached the runner as `echo $` or the pod's name. Every `$` doubled comes out as one.
    """
    return value.replace("$", "$$")


def _is_invocation_variable(name: str) -> bool:
    return name in (INVOCATION_ENV, INVOCATION_PARTS_ENV) or (
        name.startswith(f"{INVOCATION_ENV}_") and name.removeprefix(f"{INVOCATION_ENV}_").isdigit()
    )


def build_task_pod(
    *,
    invocation: TaskInvocation,
    task: ResolvedTask,
    namespace: str,
    name: str,
    owner: Mapping[str, Any],
    defaults: PodDefaults,
) -> dict[str, Any]:
    """The Pod for one task-instance try: runner pod for operators, the user's container otherwise."""
    base: dict[str, Any] = {
        "name": BASE_CONTAINER,
        "image": defaults.image,
        "securityContext": copy.deepcopy(dict(CONTAINER_SECURITY_CONTEXT)),
    }
    if defaults.image_pull_policy:
        base["imagePullPolicy"] = defaults.image_pull_policy
    if defaults.resources:
        base["resources"] = copy.deepcopy(dict(defaults.resources))
    if is_container_task(task):
        base["terminationMessagePolicy"] = "FallbackToLogsOnError"
        if task.operator in CONTAINER_OPERATORS:
            base = merging.strategic_merge(base, _container_from_kpo_args(task.args))
        base = merging.strategic_merge(base, dict(task.container))
    else:
        base["command"] = ["python", "-m", "controller.runner"]
        base["terminationMessagePolicy"] = "File"
        base = merging.strategic_merge(
            base, {k: v for k, v in task.container.items() if k not in ("command", "args")}
        )
        env = [e for e in base.get("env", []) if not _is_invocation_variable(str(e.get("name")))]
        for variable, value in invocation_env(invocation.encode().decode()).items():
            env.append({"name": variable, "value": escape_env_value(value)})
        base["env"] = env
    if defaults.env:
        names = {e.get("name") for e in base.get("env", [])}
        base["env"] = [*base.get("env", []), *(dict(e) for e in defaults.env if e.get("name") not in names)]

    labels = {
        **defaults.labels,
        "app.kubernetes.io/managed-by": "zonda",
        LABEL_DAG: label_value(invocation.dag_name),
        LABEL_DAGRUN: label_value(invocation.run_name),
        LABEL_TASK: label_value(invocation.task_id),
        LABEL_TRY: str(invocation.try_number),
    }
    if invocation.map_index >= 0:
        labels[LABEL_MAP_INDEX] = str(invocation.map_index)
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": labels,
            "annotations": _annotations(invocation),
            # held, once deleted, until a run's status has recorded its try (zonda.passes.try_tracking)
            "finalizers": [FINALIZER_TRY_TRACKING],
            "ownerReferences": [
                {
                    "apiVersion": API_VERSION,
                    "kind": "DagRun",
                    "name": owner["metadata"]["name"],
                    "uid": owner["metadata"]["uid"],
                    "controller": True,
                }
            ],
        },
        "spec": {
            "restartPolicy": "Never",
            "securityContext": copy.deepcopy(dict(POD_SECURITY_CONTEXT)),
            "containers": [base],
        },
    }
    if defaults.service_account:
        pod["spec"]["serviceAccountName"] = defaults.service_account
    if defaults.image_pull_secrets:
        pod["spec"]["imagePullSecrets"] = [
            s if isinstance(s, Mapping) else {"name": str(s)} for s in defaults.image_pull_secrets
        ]
    if defaults.node_selector:
        pod["spec"]["nodeSelector"] = dict(defaults.node_selector)
    if task.pod_override:
        pod = merging.strategic_merge(pod, dict(task.pod_override))
        # ObjectMeta's finalizers merge as a set (patchStrategy merge): a podOverride's are added to
        # ours, never in place of try tracking's
        finalizers = pod["metadata"].get("finalizers") or []
        pod["metadata"]["finalizers"] = [
            FINALIZER_TRY_TRACKING,
            *(f for f in dict.fromkeys(finalizers) if f != FINALIZER_TRY_TRACKING),
        ]
    return pod


def parse_result(message: str | None) -> tuple[TaskResult | None, str | None]:
    """The runner's result from a termination message, or (None, why not)."""
    if not message or not message.strip():
        return None, None
    try:
        return TaskResult.decode(message), None
    except ValueError as exc:
        return None, f"unreadable task result ({exc}): {message[:200]}"


def observe_pod(pod: Mapping[str, Any], *, task_id: str, try_number: int) -> ObservedAttempt:
    """What a pod says about its try. Deleted/evicted pods are FAILED with the reason as message."""
    meta = pod.get("metadata", {})
    status = pod.get("status") or {}
    phase = status.get("phase", "Pending")
    name = meta.get("name", "")
    container = next(
        (c for c in status.get("containerStatuses") or [] if c.get("name") == BASE_CONTAINER),
        (status.get("containerStatuses") or [None])[0],
    )
    state = (container or {}).get("state") or {}
    terminated = state.get("terminated")
    started_at = _parse_time(status.get("startTime"))
    if terminated is not None and phase in ("Succeeded", "Failed"):
        exit_code = int(terminated.get("exitCode", 1))
        result, problem = parse_result(terminated.get("message"))
        started, finished = (
            _parse_time(terminated.get("startedAt")) or started_at,
            _parse_time(terminated.get("finishedAt")),
        )
        if result is not None:  # the runner's own times: sub-second, where the pod's are whole seconds
            started, finished = result.attempt_times(started, finished)
        reason = terminated.get("reason")
        message = problem or (None if exit_code == 0 else f"container exited {exit_code} ({reason})")
        return ObservedAttempt(
            task_id=task_id,
            try_number=try_number,
            name=name,
            phase=AttemptPhase.SUCCEEDED if phase == "Succeeded" else AttemptPhase.FAILED,
            result=result,
            exit_code=exit_code,
            message=message,
            started_at=started,
            finished_at=finished,
        )
    if phase == "Failed":  # evicted, node lost, deadline exceeded: no container result
        reason = status.get("reason") or "PodFailed"
        return ObservedAttempt(
            task_id=task_id,
            try_number=try_number,
            name=name,
            phase=AttemptPhase.FAILED,
            message=f"{reason}: {status.get('message', 'the pod failed without a container result')}",
            started_at=started_at,
        )
    if meta.get("deletionTimestamp"):
        return ObservedAttempt(
            task_id=task_id,
            try_number=try_number,
            name=name,
            phase=AttemptPhase.MISSING,
            message="the pod is being deleted",
            started_at=started_at,
        )
    if phase == "Running":
        running_since = _parse_time((state.get("running") or {}).get("startedAt")) or started_at
        return ObservedAttempt(
            task_id=task_id,
            try_number=try_number,
            name=name,
            phase=AttemptPhase.RUNNING,
            started_at=running_since,
        )
    return ObservedAttempt(
        task_id=task_id,
        try_number=try_number,
        name=name,
        phase=AttemptPhase.PENDING,
        message=_pending_reason(status, state.get("waiting") or {}),
        pending_since=_parse_time(meta.get("creationTimestamp")),
    )


def _pending_reason(status: Mapping[str, Any], waiting: Mapping[str, Any]) -> str | None:
    """Why a pod is still Pending, as the kubelet or the scheduler says it (e.g. ErrImageNeverPull)."""
    if waiting.get("reason"):
        return ": ".join(str(part) for part in (waiting["reason"], waiting.get("message")) if part)
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            parts = (condition.get("reason") or "Unschedulable", condition.get("message"))
            return ": ".join(str(part) for part in parts if part)
    return None


def _annotations(invocation: TaskInvocation) -> dict[str, str]:
    """The task id and the run's logical date (none for an Airflow 3 manual run without one)."""
    annotations = {ANNOTATION_TASK_ID: invocation.task_id}
    if invocation.logical_date is not None:
        annotations[ANNOTATION_LOGICAL_DATE] = invocation.logical_date.isoformat()
    return annotations
