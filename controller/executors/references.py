"""Gather what variables and connections a namespace offers, for a try's pod or local process.

`zonda.tries.secret_refs` decides which references a try gets; this module only reads the API. For a pod
it reads labelled ConfigMaps' names and labelled Secrets' key names, dropping the values at once: the
kubelet resolves the references. The local executor has no kubelet, so `local_environment` plays its
part and reads the values of the referenced keys only. Nothing here logs a value.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar
from urllib.parse import quote

from controller.kube import Kube, KubeError
from zonda.specs.dags import ResolvedTask
from zonda.tries import secret_refs
from zonda.variables import LABEL_CONNECTIONS, LABEL_VARIABLES, VARIABLE_ENV_PREFIX

_SELECTED = "true"
#: How long one read of a namespace's labelled ConfigMaps and Secrets serves launches: a pass that
#: launches a fan-out reads them once, not three lists per try. A labelled object created or changed
#: within this time of a launch may be missed by it, as a watch-fed cache may lag.
SOURCES_MAX_AGE_SECONDS = 1.0
#: While a newer read is in flight, launches use the previous one if it is at most this old instead
#: of waiting: with 100 runs launching at once, a fifth of the reconcile workers' time was launches
#: waiting for the read every second (its three lists take 0.2-0.6 s on a loaded apiserver).
SOURCES_STALE_SECONDS = 5.0
logger = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass
class _Read(Generic[T]):
    at: float
    result: asyncio.Future[T]


class NamespaceMemo(Generic[T]):
    """`read(namespace)` at most once per `max_age` seconds per namespace; launches that ask while a
    read is in flight share it, or take the last good read if it is at most `stale` seconds old. A
    failed read is forgotten, so the next launch reads again."""

    def __init__(
        self,
        read: Callable[[str], Awaitable[T]],
        *,
        max_age: float = SOURCES_MAX_AGE_SECONDS,
        stale: float = SOURCES_STALE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._read, self._max_age, self._stale, self._clock = read, max_age, stale, clock
        self._reads: dict[str, _Read[T]] = {}
        self._good: dict[str, _Read[T]] = {}  # the newest read that succeeded

    async def get(self, namespace: str) -> T:
        now = self._clock()
        entry = self._reads.get(namespace)
        if entry is None or now - entry.at > self._max_age:
            entry = _Read(at=now, result=asyncio.ensure_future(self._read(namespace)))
            entry.result.add_done_callback(lambda _: self._done(namespace, entry))
            self._reads[namespace] = entry
        good = self._good.get(namespace)
        if not entry.result.done() and good is not None and now - good.at <= self._stale:
            return good.result.result()
        try:
            return await asyncio.shield(entry.result)
        except Exception:
            if self._reads.get(namespace) is entry:
                del self._reads[namespace]
            raise

    def _done(self, namespace: str, entry: _Read[T]) -> None:
        if entry.result.cancelled() or entry.result.exception() is not None:
            if self._reads.get(namespace) is entry:
                del self._reads[namespace]
            return
        good = self._good.get(namespace)
        if good is None or good.at < entry.at:
            self._good[namespace] = entry


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


async def _read_all(
    kube: Kube, namespace: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """The labelled ConfigMaps, variable Secrets and connection Secrets: three lists at once."""
    return await asyncio.gather(
        _list(kube, namespace, "configmaps", LABEL_VARIABLES),
        _list(kube, namespace, "secrets", LABEL_VARIABLES),
        _list(kube, namespace, "secrets", LABEL_CONNECTIONS),
    )


def _secret_keys(secret: Mapping[str, Any]) -> secret_refs.LabelledSecret:
    keys = set(secret.get("data") or {})  # the apiserver folds stringData into data
    return secret_refs.LabelledSecret(name=secret["metadata"]["name"], keys=frozenset(keys))


async def gather_sources(kube: Kube, namespace: str) -> secret_refs.Sources:
    """Labelled ConfigMaps' names and labelled Secrets' key names (values are not kept)."""
    config_maps, variable_secrets, connection_secrets = await _read_all(kube, namespace)
    return secret_refs.Sources(
        variable_config_maps=[item["metadata"]["name"] for item in config_maps],
        variable_secrets=[_secret_keys(item) for item in variable_secrets],
        connection_secrets=[_secret_keys(item) for item in connection_secrets],
    )


class PodReferences:
    """The `env`/`envFrom` references a task's pod gets, from one read per namespace and pass."""

    def __init__(self, kube: Kube) -> None:
        self._sources = NamespaceMemo(lambda namespace: gather_sources(kube, namespace))

    async def __call__(self, namespace: str, task: ResolvedTask) -> secret_refs.PodReferences:
        return secret_refs.plan_references(task, await self._sources.get(namespace))


@dataclass(frozen=True)
class _Labelled:
    """A namespace's labelled objects, values included (the local executor resolves them itself)."""

    config_maps: list[dict[str, Any]]
    variable_secrets: list[dict[str, Any]]
    connection_secrets: list[dict[str, Any]]


async def _read_labelled(kube: Kube, namespace: str) -> _Labelled:
    config_maps, variable_secrets, connection_secrets = await _read_all(kube, namespace)
    return _Labelled(config_maps, variable_secrets, connection_secrets)


class LocalEnvironment:
    """What the kubelet would put in a pod's environment, for the local executor's tries (one read
    per namespace and pass): ConfigMap variables with their prefix, then the named Secret keys (which
    win, as `env` wins over `envFrom`)."""

    def __init__(self, kube: Kube) -> None:
        self._labelled = NamespaceMemo(lambda namespace: _read_labelled(kube, namespace))

    async def __call__(self, namespace: str, task: ResolvedTask) -> dict[str, str]:
        return local_environment(task, await self._labelled.get(namespace))


def local_environment(task: ResolvedTask, labelled: _Labelled) -> dict[str, str]:
    environment: dict[str, str] = {}
    for item in sorted(labelled.config_maps, key=_name):
        for key, value in (item.get("data") or {}).items():
            environment.setdefault(VARIABLE_ENV_PREFIX + key, value)  # the first ConfigMap by name wins
    variable_secrets, connection_secrets = labelled.variable_secrets, labelled.connection_secrets
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
