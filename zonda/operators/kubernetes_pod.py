"""Airflow's `KubernetesPodOperator`, reduced to what it describes: a container to run.

The controller runs such a task as a plain container in the try's Pod, never through the task runner
(`zonda.specs.operator_registry.CONTAINER_OPERATORS`): it builds the operator from the task's args, renders
its `template_fields`, and takes `to_container()` and `to_pod_override()`. Arguments about reaching a
cluster or following the pod (`in_cluster`, `get_logs`, `on_finish_action`...) are accepted and
ignored: the controller does that work.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

from zonda.context import Context
from zonda.exceptions import AirflowException
from zonda.operators.base import BaseOperator

#: KPO arguments about the Airflow worker's connection to a cluster and its watch of the pod.
POD_LIFECYCLE_ARGUMENTS = frozenset(
    {
        "name",
        "random_name_suffix",
        "in_cluster",
        "cluster_context",
        "config_file",
        "kubernetes_conn_id",
        "get_logs",
        "container_logs",
        "log_events_on_failure",
        "is_delete_operator_pod",
        "on_finish_action",
        "reattach_on_restart",
        "startup_timeout_seconds",
        "deferrable",
        "poll_interval",
        "labels_from",
    }
)


class KubernetesPodOperator(BaseOperator):
    """A container image to run as the task (Airflow's cncf.kubernetes `KubernetesPodOperator`).

    Kubernetes objects (`volumes`, `tolerations`, `affinity`...) are given as dicts in the Kubernetes
    API's own (camelCase) form, as a DAG's YAML naturally writes them.
    """

    template_fields: Sequence[str] = (
        "image",
        "cmds",
        "arguments",
        "env_vars",
        "labels",
        "annotations",
        "container_resources",
        "volumes",
        "volume_mounts",
        "env_from",
        "node_selector",
    )
    ignored_arguments = BaseOperator.ignored_arguments | POD_LIFECYCLE_ARGUMENTS

    def __init__(
        self,
        *,
        image: str,
        cmds: list[str] | None = None,
        arguments: list[str] | None = None,
        env_vars: Mapping[str, Any] | list[dict[str, Any]] | None = None,
        env_from: list[dict[str, Any]] | None = None,
        ports: list[dict[str, Any]] | None = None,
        volume_mounts: list[dict[str, Any]] | None = None,
        volumes: list[dict[str, Any]] | None = None,
        image_pull_policy: str | None = None,
        image_pull_secrets: str | list[str] | None = None,
        container_resources: dict[str, Any] | None = None,
        container_security_context: dict[str, Any] | None = None,
        security_context: dict[str, Any] | None = None,
        labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None,
        node_selector: dict[str, str] | None = None,
        tolerations: list[dict[str, Any]] | None = None,
        affinity: dict[str, Any] | None = None,
        service_account_name: str | None = None,
        priority_class_name: str | None = None,
        hostnetwork: bool = False,
        termination_grace_period: int | None = None,
        namespace: str | None = None,
        skip_on_exit_code: int | list[int] | None = None,
        base_container_name: str = "base",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if not image:
            raise AirflowException("KubernetesPodOperator needs an image")
        self.image = image
        self.cmds = cmds or []
        self.arguments = arguments or []
        self.env_vars = env_vars or {}
        self.env_from = env_from or []
        self.ports = ports or []
        self.volume_mounts = volume_mounts or []
        self.volumes = volumes or []
        self.image_pull_policy = image_pull_policy
        self.image_pull_secrets = image_pull_secrets
        self.container_resources = container_resources
        self.container_security_context = container_security_context
        self.security_context = security_context
        self.labels = labels or {}
        self.annotations = annotations or {}
        self.node_selector = node_selector or {}
        self.tolerations = tolerations or []
        self.affinity = affinity
        self.service_account_name = service_account_name
        self.priority_class_name = priority_class_name
        self.hostnetwork = hostnetwork
        self.termination_grace_period = termination_grace_period
        #: Kept for reference only: the try's Pod lives in its DagRun's namespace (owner references
        #: cannot cross namespaces).
        self.namespace = namespace
        #: Exit codes that skip the task. Note that Zonda treats exit code 99 of any container as a skip.
        self.skip_on_exit_code = (
            []
            if skip_on_exit_code is None
            else [skip_on_exit_code]
            if isinstance(skip_on_exit_code, int)
            else list(skip_on_exit_code)
        )
        self.base_container_name = base_container_name

    def execute(self, context: Context) -> NoReturn:
        raise AirflowException(
            "KubernetesPodOperator runs as a plain container started by the controller, "
            "never in the task runner"
        )

    def to_container(self) -> dict[str, Any]:
        """The Kubernetes container (API form) that runs the task."""
        container = {
            "name": self.base_container_name,
            "image": self.image,
            "command": list(self.cmds),
            "args": list(self.arguments),
            "env": _env_list(self.env_vars),
            "envFrom": self.env_from,
            "ports": self.ports,
            "volumeMounts": self.volume_mounts,
            "imagePullPolicy": self.image_pull_policy,
            "resources": self.container_resources,
            "securityContext": self.container_security_context,
        }
        return {key: value for key, value in container.items() if value not in (None, [], {})}

    def to_pod_override(self) -> dict[str, Any]:
        """Pod fields (API form) to merge over the try's default Pod: labels, scheduling, volumes..."""
        pull_secrets = (
            [name.strip() for name in self.image_pull_secrets.split(",") if name.strip()]
            if isinstance(self.image_pull_secrets, str)
            else list(self.image_pull_secrets or [])
        )
        metadata = {"labels": self.labels, "annotations": self.annotations}
        spec = {
            "nodeSelector": self.node_selector,
            "tolerations": self.tolerations,
            "affinity": self.affinity,
            "serviceAccountName": self.service_account_name,
            "priorityClassName": self.priority_class_name,
            "hostNetwork": self.hostnetwork or None,
            "securityContext": self.security_context,
            "terminationGracePeriodSeconds": self.termination_grace_period,
            "volumes": self.volumes,
            "imagePullSecrets": [{"name": name} for name in pull_secrets],
        }
        override = {
            "metadata": {key: value for key, value in metadata.items() if value},
            "spec": {key: value for key, value in spec.items() if value not in (None, [], {})},
        }
        return {key: value for key, value in override.items() if value}


def _env_list(env_vars: Mapping[str, Any] | list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`env_vars` as Kubernetes `env` entries: a dict becomes name/value pairs, a list is kept as is."""
    if isinstance(env_vars, Mapping):
        return [{"name": str(name), "value": str(value)} for name, value in env_vars.items()]
    return list(env_vars)
