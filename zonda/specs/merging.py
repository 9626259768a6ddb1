"""One merge rule for Kubernetes objects a DAG layers: a task's `container` and `podOverride` over its
group's and the DAG's `defaultArgs`, and either over the pod the builder makes.

It is Kubernetes' strategic merge, as `kubectl apply` and `kubectl patch` do it for pods: dicts merge
key by key; the lists Kubernetes gives a merge key (`containers`, `volumes`, `env` by name,
`volumeMounts` by mountPath, ...) merge item by item, new items appended in order; every other list
(`command`, `args`, `tolerations`, ...) is replaced whole. So an override that adds one env variable or
one volume keeps the others, and naming the `base` container edits the task's container, as
Airflow's `pod_override` does. Deletion directives (`$patch: delete`) are not supported.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

#: Pod and container list fields Kubernetes merges by a key (its `patchMergeKey`), by field name.
MERGE_KEYS: Mapping[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "env": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "ports": "containerPort",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
}


def strategic_merge(base: Any, override: Any) -> Any:
    """`override` over `base` (neither is changed): Kubernetes' strategic merge, without directives."""
    if isinstance(base, Mapping) and isinstance(override, Mapping):
        merged = copy.deepcopy(dict(base))
        for key, value in override.items():
            if key not in merged:
                merged[key] = copy.deepcopy(value)
            elif key in MERGE_KEYS and isinstance(value, list) and isinstance(merged[key], list):
                merged[key] = _merge_by_key(merged[key], value, MERGE_KEYS[key])
            else:
                merged[key] = strategic_merge(merged[key], value)
        return merged
    return copy.deepcopy(override)


def _merge_by_key(base: list[Any], override: list[Any], merge_key: str) -> list[Any]:
    merged = list(base)
    positions = {
        item[merge_key]: index
        for index, item in enumerate(base)
        if isinstance(item, Mapping) and merge_key in item
    }
    for item in override:
        index = positions.get(item[merge_key]) if isinstance(item, Mapping) and merge_key in item else None
        if index is None:
            merged.append(copy.deepcopy(item))
        else:
            merged[index] = strategic_merge(merged[index], item)
    return merged
