"""Gather what variables and connections a namespace offers, for a try's pod or local process.

`zonda.secret_refs` decides which references a try gets; this module only reads the API. For a pod
it reads labelled ConfigMaps' names and labelled Secrets' key names, dropping the values at once: the
kubelet resolves the references. The local executor has no kubelet, so `local_environment` plays its
part and reads the values of the referenced keys only. Nothing here logs a value.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from controller.kube import Kube, KubeError
from zonda import secret_refs
from zonda.dags import ResolvedTask
from zonda.variables import LABEL_CONNECTIONS, LABEL_VARIABLES, VARIABLE_ENV_PREFIX

_SELECTED = "true"
logger = logging.getLogger(__name__)


async def _list(kube: Kube, namespace: str, plural: str, label: str) -> list[dict[str, Any]]:
    """The labelled objects; none when RBAC says no (rbac.readVariablesAndConnections off)."""
    selector = quote(f"{label}={_SELECTED}", safe="")
    try:
        found = await kube.get_path(f"/api/v1/namespaces/{namespace}/{plural}?labelSelector={selector}")
    except KubeError as error:
        if error.status != 403:
            raise
        logger.warning(
            "cannot list %s in %s (%s): tasks get no %s from them", plural, namespace, error, label
        )
        return []
    return list((found or {}).get("items") or [])


def _secret_keys(secret: Mapping[str, Any]) -> secret_refs.LabelledSecret:
    keys = set(secret.get("data") or {})  # the apiserver folds stringData into data
    return secret_refs.LabelledSecret(name=secret["metadata"]["name"], keys=frozenset(keys))


async def gather_sources(kube: Kube, namespace: str) -> secret_refs.Sources:
    """Labelled ConfigMaps' names and labelled Secrets' key names (values are not kept)."""
    config_maps = await _list(kube, namespace, "configmaps", LABEL_VARIABLES)
    variable_secrets = await _list(kube, namespace, "secrets", LABEL_VARIABLES)
    connection_secrets = await _list(kube, namespace, "secrets", LABEL_CONNECTIONS)
    return secret_refs.Sources(
        variable_config_maps=[item["metadata"]["name"] for item in config_maps],
        variable_secrets=[_secret_keys(item) for item in variable_secrets],
        connection_secrets=[_secret_keys(item) for item in connection_secrets],
    )


async def pod_references(kube: Kube, namespace: str, task: ResolvedTask) -> secret_refs.PodReferences:
    """The `env`/`envFrom` references a pod of `task` gets."""
    return secret_refs.plan_references(task, await gather_sources(kube, namespace))


async def local_environment(kube: Kube, namespace: str, task: ResolvedTask) -> dict[str, str]:
    """What the kubelet would put in a pod's environment for these references: ConfigMap variables
    with their prefix, then the named Secret keys (which win, as `env` wins over `envFrom`)."""
    environment: dict[str, str] = {}
    for item in sorted(await _list(kube, namespace, "configmaps", LABEL_VARIABLES), key=_name):
        for key, value in (item.get("data") or {}).items():
            environment.setdefault(VARIABLE_ENV_PREFIX + key, value)  # the first ConfigMap by name wins
    variable_secrets = await _list(kube, namespace, "secrets", LABEL_VARIABLES)
    connection_secrets = await _list(kube, namespace, "secrets", LABEL_CONNECTIONS)
    data = {_name(item): item.get("data") or {} for item in [*variable_secrets, *connection_secrets]}
    sources = secret_refs.Sources(
        variable_secrets=[_secret_keys(item) for item in variable_secrets],
        connection_secrets=[_secret_keys(item) for item in connection_secrets],
    )
    for entry in secret_refs.plan_references(task, sources).env:
        ref = entry["valueFrom"]["secretKeyRef"]
        environment[entry["name"]] = base64.b64decode(data[ref["name"]][ref["key"]]).decode()
    return environment


def _name(item: Mapping[str, Any]) -> str:
    return str(item["metadata"]["name"])
