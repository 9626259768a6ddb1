"""The one module that talks to the Kubernetes API (besides kopf's own watching).

Everything else in Zonda calls these coroutines with plain dicts and gets plain dicts back, so the
rest of the code base neither imports `kubernetes_asyncio` nor knows its typed models. Errors the
callers must act on are translated into three exceptions: `NotFound`, `AlreadyExists`, `Conflict`
(in `errors.py`, which `fake.FakeKube` raises too).

Over 400 lines on purpose: being the only module that calls the API is the point, so every call
(custom resources, pods, Leases, Events, the UI's access reviews) lives here; `protocol.KubeApi`
lists what the controller uses, and `fake.FakeKube` implements it for unit tests.
"""

from __future__ import annotations

import copy
import importlib.metadata
import json
import logging
import os
import time
import urllib.parse
import urllib.request
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Mapping
from datetime import UTC, datetime
from typing import Any, TypeVar

import aiohttp
import msgspec
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException

from controller.kube.cache import ObjectCache, copy_body
from controller.kube.errors import Conflict, KubeError, NotFound, translate
from controller.kube.run_shards import RunShards
from controller.kube.timeouts import RequestTimeouts, bound
from zonda.resources.models import DAGRUNS, GROUP, VERSION
from zonda.resources.wire import format_micro_time

MERGE_PATCH = "application/merge-patch+json"
PODS = "pods"
#: A watch's connect timeout, and how long a stream may say nothing (not even the bookmark the
#: apiserver sends about once a minute) before it is taken as dead (kopf's `inactivity_timeout`).
WATCH_CONNECT_SECONDS = 30.0
WATCH_IDLE_SECONDS = 70.0
JSON_PATCH = "application/json-patch+json"

Body = dict[str, Any]
T = TypeVar("T")
log = logging.getLogger(__name__)


class _WatchEvent(msgspec.Struct):
    type: str
    object: dict[str, Any]


_decode_event = msgspec.json.Decoder(_WatchEvent).decode
_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder().decode


def in_cluster_server(environ: Mapping[str, str]) -> str | None:
    """The apiserver's URL as a pod sees it: the `kubernetes` Service's address the kubelet puts in
    the environment (what client-go's InClusterConfig uses), or None outside a pod."""
    host, port = environ.get("KUBERNETES_SERVICE_HOST"), environ.get("KUBERNETES_SERVICE_PORT")
    if not host or not port:
        return None
    return f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"


def _version() -> str:
    try:
        return importlib.metadata.version("zonda")
    except importlib.metadata.PackageNotFoundError:
        return "dev"


#: Seconds an idle connection to the apiserver is kept for the next call. aiohttp's default, 15 s,
#: closed every connection between two minutes' runs, so each minute's burst of 1,000 DagRun creates
#: began with dozens of TLS handshakes: 5-6 % of the apiserver's CPU at that boundary (its pprof), on
#: the creates' critical path. Past a minute, then, and under the apiserver's own idle timeout (90 s,
#: k8s.io/apiserver `secure_serving.go`), so the client closes first and no POST races the server's
#: close (aiohttp retries only idempotent calls on a dropped connection). client-go keeps idle
#: connections 90 s (Go's `http.DefaultTransport`).
IDLE_CONNECTION_SECONDS = 75.0


def _without_per_request_env_lookups(api_client: client.ApiClient) -> None:
    """The client's aiohttp session without `trust_env`: no proxy and ~/.netrc lookups per request;
    its idle connections kept `IDLE_CONNECTION_SECONDS`.

    kubernetes_asyncio makes its session with `trust_env=True`, so aiohttp read the proxy variables
    and parsed ~/.netrc in a thread for every API call (profiled: 6 % of the controller's CPU, and a
    thread hop per call). The proxy the environment names for the apiserver (HTTPS_PROXY, NO_PROXY:
    what client-go honours) is looked up once here instead; a kubeconfig's `proxy-url` still wins.
    ~/.netrc is not read (client-go never reads it: requests carry a token or a client certificate).
    """
    rest = api_client.rest_client
    session = rest.pool_manager
    if not rest.proxy:
        host = str(urllib.parse.urlsplit(api_client.configuration.host).hostname or "")
        proxies = urllib.request.getproxies()
        proxy = proxies.get("https") or proxies.get("all")
        if proxy and not urllib.request.proxy_bypass(host):
            rest.proxy = proxy
    connector = session.connector
    # aiohttp takes this only as TCPConnector's argument, and kubernetes_asyncio makes the connector
    # (with the TLS context from the kubeconfig); test_connection_reuse proves it is honoured.
    connector._keepalive_timeout = IDLE_CONNECTION_SECONDS  # type: ignore[union-attr]
    session.detach()  # the connector (its TLS context and pool) moves to the new session
    rest.pool_manager = aiohttp.ClientSession(
        connector=connector,
        trust_env=False,
        read_bufsize=2**21,  # kubernetes_asyncio's buffer size
    )


async def _call(awaitable: Awaitable[T]) -> T:
    """Await an API call, turning the client's exceptions into ours."""
    try:
        return await awaitable
    except ApiException as exc:
        raise translate(exc) from exc


async def _unless_missing(awaitable: Awaitable[T]) -> T | None:
    """Await an API call; None when the object does not exist (a GET or DELETE of a gone object)."""
    try:
        return await _call(awaitable)
    except NotFound:
        return None


def _quote(segment: str) -> str:
    return urllib.parse.quote(segment, safe="")


def _custom_path(namespace: str, plural: str) -> str:
    return f"/apis/{GROUP}/{VERSION}/namespaces/{_quote(namespace)}/{plural}"


def _delete_options(resource_version: str | None, uid: str | None) -> dict[str, Any]:
    """A delete call's options: background propagation, and DeleteOptions with the preconditions given
    (none: no body), so the apiserver answers 409 Conflict if the stored resourceVersion or uid differs."""
    preconditions = {
        key: value
        for key, value in (("resourceVersion", resource_version), ("uid", uid))
        if value is not None
    }
    options: dict[str, Any] = {"propagation_policy": "Background"}
    if preconditions:
        options["body"] = {"preconditions": preconditions}
    return options


class Kube:
    """A connection to one cluster. Create with `await Kube.connect()`, close with `await kube.close()`."""

    def __init__(self, api_client: client.ApiClient, timeouts: RequestTimeouts = RequestTimeouts()) -> None:
        self.api_client = api_client
        #: Every call that names no timeout of its own gets these (`timeouts.bound`).
        self.timeouts = timeouts
        bound(api_client.rest_client, timeouts)
        self.custom = client.CustomObjectsApi(api_client)
        self.core = client.CoreV1Api(api_client)
        self.coordination = client.CoordinationV1Api(api_client)
        self.events = client.EventsV1Api(api_client)
        #: Set by the controller, whose watches keep it current (see `cache.ObjectCache`).
        self.cache: ObjectCache | None = None
        #: A big run's task instances in DagRunShards: DagRuns are read and written whole here.
        self.run_shards = RunShards()

    @classmethod
    async def connect(
        cls,
        kubeconfig: str | None = None,
        *,
        component: str = "zonda",
        timeouts: RequestTimeouts | None = None,
    ) -> Kube:
        """In-cluster credentials inside a Pod, else the kubeconfig (`$KUBECONFIG` or ~/.kube/config).

        `component` becomes the User-Agent, which is what `managedFields` and audit logs show;
        `timeouts` default to `$ZONDA_API_TIMEOUT_SECONDS` and `$ZONDA_API_CONNECT_TIMEOUT_SECONDS`.
        """
        timeouts = timeouts or RequestTimeouts.from_environment(os.environ)
        if (
            kubeconfig is None
            and "KUBERNETES_SERVICE_HOST" in os.environ
            and not os.environ.get("KUBECONFIG")
        ):
            config.load_incluster_config()  # type: ignore[no-untyped-call]
            api_client = client.ApiClient()
        else:
            api_client = await config.new_client_from_config(
                config_file=kubeconfig or os.environ.get("KUBECONFIG")
            )
        api_client.user_agent = f"{component}/{_version()}"
        _without_per_request_env_lookups(api_client)
        return cls(api_client, timeouts)

    async def close(self) -> None:
        await self.api_client.close()

    async def __aenter__(self) -> Kube:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @staticmethod
    async def _json(response: Any) -> Body:
        """The body of a call made with `_preload_content=False`, as plain dicts.

        Skipping the client's typed models is ~5x faster on pod lists (measured: 40 pods, 53-75 ms
        typed vs 10-12 ms raw), which is most of a reconcile's cost.
        """
        data = await response.read()
        if not 200 <= response.status <= 299:
            raise translate(ApiException(status=response.status, reason=data.decode(errors="replace")))
        result: Body = json.loads(data)
        return result

    async def _send(self, method: str, path: str, body: Body) -> Body:
        """POST or PUT `body` (plain JSON: dicts, lists, strings, numbers) to `path`; the answer as
        plain dicts. Errors as every other call's (`translate`: 404, 409 AlreadyExists or Conflict,
        else `KubeError` with the status and the apiserver's body).

        The controller's writes of a pass (a DagRun's status, a task pod, a DagRun) skip the generated
        client's request path: its `sanitize_for_serialization` walks the whole body in Python, then
        `json.dumps` it, and `json.loads` the answer. For a 20-task chain's 10 KB status that was 33 %
        of the controller's busy loop with 100 runs at once (py-spy); msgspec encodes and decodes the
        same JSON several times faster. The request is the generated client's in all else: the same
        session and connection pool (its TLS context holds any client certificate), the same auth
        headers (`update_params_for_auth`, which refreshes an expiring token), default headers, proxy,
        server name, and the bound of every ordinary call (`timeouts.ordinary()`)."""
        api = self.api_client
        rest = api.rest_client
        headers: dict[str, str] = {**api.default_headers, "Accept": "application/json"}
        headers["Content-Type"] = "application/json"
        if api.cookie:
            headers["Cookie"] = api.cookie
        await api.update_params_for_auth(headers, [], ["BearerToken"])
        args: dict[str, Any] = {
            "headers": headers,
            "data": _encode(body),
            "timeout": self.timeouts.ordinary(),
        }
        if rest.proxy:
            args["proxy"] = rest.proxy
        if rest.proxy_headers:
            args["proxy_headers"] = rest.proxy_headers
        if rest.server_hostname:
            args["server_hostname"] = rest.server_hostname
        async with rest.pool_manager.request(method, f"{api.configuration.host}{path}", **args) as response:
            data = await response.read()
            status = response.status
        if not 200 <= status <= 299:
            raise translate(ApiException(status=status, reason=data.decode(errors="replace")))
        answer: Body = _decode(data)
        return answer

    # ------------------------------------------------------------------------ our custom resources

    async def get_custom(self, plural: str, namespace: str, name: str) -> Body | None:
        """The object (a DagRun whole: its shards merged in, `run_shards`), None when it is gone."""
        body = await self._get_custom(plural, namespace, name)
        if plural == DAGRUNS and body is not None:
            return await self.run_shards.whole(self, body)
        return body

    async def _get_custom(self, plural: str, namespace: str, name: str) -> Body | None:
        cache = self.cache if self.cache is not None and self.cache.caches(plural) else None
        if cache is not None and (kept := cache.get(plural, namespace, name)) is not None:
            return kept
        body: Body | None = await _unless_missing(
            self.custom.get_namespaced_custom_object(GROUP, VERSION, namespace, plural, name)
        )
        if cache is not None and body is not None:
            cache.observed(plural, copy_body(body))
        return body

    async def list_custom(
        self, plural: str, namespace: str | None, label_selector: str | None = None
    ) -> list[Body]:
        """The objects; DagRuns whole, except in the controller (a client with a watch cache), whose
        lists of runs count them and read their states: a big run's summary says those (its pass
        reads the run whole with a GET)."""
        cache = self.cache
        if cache is None or namespace is None or label_selector or plural not in cache.listable:
            items, _ = await self.list_custom_with_version(plural, namespace, label_selector)
            if plural == DAGRUNS and cache is None:  # the controller's lists count runs: summaries do
                return await self.run_shards.whole_list(self, namespace, items)
            return items
        if (kept := cache.in_namespace(plural, namespace)) is not None:
            return kept
        items, _ = await self.list_custom_with_version(plural, namespace)
        cache.listed_into(plural, namespace, [copy_body(item) for item in items])
        return items

    async def _written(self, plural: str, namespace: str, name: str, write: Awaitable[Body]) -> Body:
        """A status write: its answer is the newest object (kept in the cache); a conflict makes what
        the cache kept stale."""
        try:
            body = await _call(write)
        except Conflict:
            if self.cache is not None:
                self.cache.forget(plural, namespace, name)
            raise
        if self.cache is not None and self.cache.caches(plural):
            self.cache.observed(plural, copy_body(body))
        return body

    async def list_custom_with_version(
        self, plural: str, namespace: str | None, label_selector: str | None = None
    ) -> tuple[list[Body], str | None]:
        """Items and the list's resourceVersion, to start a watch exactly where the list ended."""
        if namespace is None:
            call = self.custom.list_cluster_custom_object(
                GROUP, VERSION, plural, label_selector=label_selector or ""
            )
        else:
            call = self.custom.list_namespaced_custom_object(
                GROUP, VERSION, namespace, plural, label_selector=label_selector or ""
            )
        result = await _call(call)
        return result.get("items", []), (result.get("metadata") or {}).get("resourceVersion")

    async def create_custom(self, plural: str, namespace: str, body: Body) -> Body:
        """Create; raises `AlreadyExists` when an object of that name exists (the idempotent case)."""
        return await self._send("POST", _custom_path(namespace, plural), body)

    async def patch_custom_status(
        self, plural: str, namespace: str, name: str, status: Body, *, resource_version: str | None = None
    ) -> Body:
        """Merge-patch `status`; with `resource_version`, only if nobody wrote since (else `Conflict`)."""
        patch: Body = {"status": status}
        if resource_version is not None:
            patch["metadata"] = {"resourceVersion": resource_version}
        return await self._written(
            plural,
            namespace,
            name,
            self.custom.patch_namespaced_custom_object_status(
                GROUP,
                VERSION,
                namespace,
                plural,
                name,
                patch,
                _content_type=MERGE_PATCH,  # type: ignore[call-arg]
            ),
        )

    async def replace_custom_status(self, plural: str, namespace: str, body: Body) -> Body:
        """Replace the status of `body` (which carries its resourceVersion): optimistic, whole-status.
        A big DagRun's task instances go to its shards first (`run_shards`); the answer is whole."""
        if plural == DAGRUNS:
            stored = await self.run_shards.stored_form(self, namespace, body)
            written = await self._replace_custom_status(plural, namespace, stored)
            return await self.run_shards.after_write(self, written, body.get("status") or {})
        return await self._replace_custom_status(plural, namespace, body)

    async def _replace_custom_status(self, plural: str, namespace: str, body: Body) -> Body:
        name = body["metadata"]["name"]
        return await self._written(
            plural,
            namespace,
            name,
            self._send("PUT", f"{_custom_path(namespace, plural)}/{_quote(name)}/status", body),
        )

    async def apply_custom(self, plural: str, namespace: str, body: Body, *, field_manager: str) -> Body:
        """Server-side apply `body` as `field_manager` (forcing: the manager owns what it renders)."""
        name = body["metadata"]["name"]
        return await _call(
            self.custom.patch_namespaced_custom_object(
                GROUP,
                VERSION,
                namespace,
                plural,
                name,
                body,
                field_manager=field_manager,
                force=True,
                _content_type="application/apply-patch+yaml",  # type: ignore[call-arg]
            )
        )

    async def delete_custom(
        self,
        plural: str,
        namespace: str,
        name: str,
        *,
        resource_version: str | None = None,
        uid: str | None = None,
    ) -> bool:
        """Delete; False if it was already gone; Conflict if a precondition no longer holds."""
        options = _delete_options(resource_version, uid)
        gone = await _unless_missing(
            self.custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, plural, name, **options)
        )
        return gone is not None

    def _lister(self, plural: str, namespace: str | None) -> tuple[Any, tuple[str, ...]]:
        """The client's list call of `plural` (`pods`, or one of ours) and its leading arguments."""
        if plural == PODS:
            if namespace is None:
                return self.core.list_pod_for_all_namespaces, ()
            return self.core.list_namespaced_pod, (namespace,)
        if namespace is None:
            return self.custom.list_cluster_custom_object, (GROUP, VERSION, plural)
        return self.custom.list_namespaced_custom_object, (GROUP, VERSION, namespace, plural)

    async def list_objects(
        self, plural: str, namespace: str | None, label_selector: str | None = None
    ) -> tuple[list[Body], str | None]:
        """Pods or our objects as stored (DagRuns not made whole) and the list's resourceVersion, to
        watch from; the items carry `kind` and `apiVersion`, as a watch event's object does."""
        func, args = self._lister(plural, namespace)
        response = await _call(func(*args, label_selector=label_selector or "", _preload_content=False))
        answer = await self._json(response)
        items: list[Body] = answer.get("items") or []
        kind, api_version = str(answer.get("kind", "")).removesuffix("List"), answer.get("apiVersion")
        for item in items:
            item.setdefault("kind", kind)
            item.setdefault("apiVersion", api_version)
        return items, (answer.get("metadata") or {}).get("resourceVersion")

    async def watch_objects(
        self,
        plural: str,
        namespace: str | None,
        *,
        label_selector: str | None = None,
        resource_version: str | None = None,
        timeout_seconds: int = 300,
        bookmarks: bool = False,
    ) -> AsyncGenerator[tuple[str, Body], None]:
        """Yield (event type, object) of pods or our objects until the server ends the watch.

        The stream is read raw, a line a time, and decoded with msgspec (no typed models: a pod
        event through kubernetes_asyncio's Watch would be a `V1Pod`). An ERROR event raises
        `KubeError` with its code (410 Gone: the version is too old, list again). With `bookmarks`
        the apiserver's BOOKMARK events are yielded too (only their resourceVersion means anything).
        A stream with nothing for `WATCH_IDLE_SECONDS` (bookmarks come about once a minute) is taken
        as dead: `TimeoutError`.
        """
        func, args = self._lister(plural, namespace)
        kwargs: dict[str, Any] = {
            "watch": True,
            "timeout_seconds": timeout_seconds,
            "allow_watch_bookmarks": bookmarks,
            "_preload_content": False,
            "_request_timeout": aiohttp.ClientTimeout(
                sock_connect=WATCH_CONNECT_SECONDS,
                sock_read=WATCH_IDLE_SECONDS if bookmarks else timeout_seconds + WATCH_IDLE_SECONDS,
            ),
        }
        if label_selector:
            kwargs["label_selector"] = label_selector
        if resource_version:
            kwargs["resource_version"] = resource_version
        response = await _call(func(*args, **kwargs))
        try:
            if not 200 <= response.status <= 299:
                reason = (await response.read()).decode(errors="replace")
                raise translate(ApiException(status=response.status, reason=reason))
            async for line in response.content:
                if not line.strip():
                    continue
                event = _decode_event(line)
                if event.type == "ERROR":
                    status = event.object
                    raise KubeError(int(status.get("code") or 0), json.dumps(status))
                yield event.type, event.object
        finally:
            response.close()  # a stream given up half read is not handed back to the pool

    # ---------------------------------------------------------------------------------------- pods

    async def create_pod(self, namespace: str, body: Body) -> Body:
        return await self._send("POST", f"/api/v1/namespaces/{_quote(namespace)}/pods", body)

    async def delete_pod(
        self,
        namespace: str,
        name: str,
        *,
        grace_period_seconds: int | None = None,
        resource_version: str | None = None,
        uid: str | None = None,
    ) -> bool:
        options = _delete_options(resource_version, uid)
        if grace_period_seconds is not None:
            options["grace_period_seconds"] = grace_period_seconds
        return await _unless_missing(self.core.delete_namespaced_pod(name, namespace, **options)) is not None

    async def patch_pod(self, namespace: str, name: str, patch: list[Body]) -> Body | None:
        """A JSON patch (RFC 6902) of a pod's metadata or spec; its `test` operations are preconditions
        (a failed one: 422). None when the pod is gone."""
        call = self.core.patch_namespaced_pod(
            name,
            namespace,
            patch,
            _content_type=JSON_PATCH,  # type: ignore[call-arg]
            _preload_content=False,
        )
        try:
            return await self._json(await _call(call))
        except NotFound:
            return None

    async def list_pods(self, namespace: str, label_selector: str) -> list[Body]:
        response = await _call(
            self.core.list_namespaced_pod(namespace, label_selector=label_selector, _preload_content=False)
        )
        items: list[Body] = (await self._json(response)).get("items", [])
        return items

    async def pod_logs(self, namespace: str, name: str, *, container: str | None = None) -> str:
        if container:
            logs: str = await _call(self.core.read_namespaced_pod_log(name, namespace, container=container))
        else:
            logs = await _call(self.core.read_namespaced_pod_log(name, namespace))
        return logs

    async def follow_pod_log(self, namespace: str, name: str, *, container: str) -> AsyncIterator[str]:
        """A container's log from its start, chunk by chunk as it is written, until the container
        ends (the kubelet's `follow`); a container not started yet raises KubeError (400)."""
        response: Any = await _call(  # an aiohttp response: the client's stub says str
            self.core.read_namespaced_pod_log(
                name,
                namespace,
                container=container,
                follow=True,
                _preload_content=False,
                _request_timeout=self.timeouts.streaming(),  # a quiet container is no stall
            )
        )
        try:
            if not 200 <= response.status <= 299:  # unread, the client does not check it
                raise (NotFound if response.status == 404 else KubeError)(
                    response.status, (await response.read()).decode(errors="replace")
                )
            async for chunk in response.content.iter_any():
                yield chunk.decode(errors="replace")
        finally:
            response.close()  # a stream given up half read is not handed back to the pool

    # -------------------------------------------------------------------------------------- leases

    async def get_lease(self, namespace: str, name: str) -> Body | None:
        try:
            return await self._json(
                await _call(self.coordination.read_namespaced_lease(name, namespace, _preload_content=False))
            )
        except NotFound:
            return None

    async def create_lease(self, namespace: str, body: Body) -> Body:
        return await self._json(
            await _call(self.coordination.create_namespaced_lease(namespace, body, _preload_content=False))  # type: ignore[arg-type]
        )

    async def replace_lease(self, namespace: str, body: Body) -> Body:
        """Replace with the body's resourceVersion: `Conflict` if someone else wrote it first."""
        name = body["metadata"]["name"]
        return await self._json(
            await _call(
                self.coordination.replace_namespaced_lease(
                    name,
                    namespace,
                    body,  # type: ignore[arg-type]
                    _preload_content=False,
                )
            )
        )

    async def delete_lease(self, namespace: str, name: str) -> bool:
        """Delete; False if it was already gone."""
        return await _unless_missing(self.coordination.delete_namespaced_lease(name, namespace)) is not None

    async def list_leases(self, namespace: str, label_selector: str) -> list[Body]:
        response = await _call(
            self.coordination.list_namespaced_lease(
                namespace, label_selector=label_selector, _preload_content=False
            )
        )
        items: list[Body] = (await self._json(response)).get("items", [])
        return items

    # ------------------------------------------------------------------------------ any resource

    async def get_path(self, path: str) -> Any:
        """GET any API path as JSON (discovery documents, objects of any kind); None on 404."""
        try:
            return await self.api_client.call_api(
                path,
                "GET",
                header_params={"Accept": "application/json"},
                response_types_map={200: "object"},
                auth_settings=["BearerToken"],
                _return_http_data_only=True,
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise translate(exc) from exc

    # -------------------------------------------------------------------------------------- events

    async def emit_event(
        self,
        involved: Mapping[str, Any],
        *,
        reason: str,
        message: str,
        warning: bool = False,
        component: str = "zonda",
    ) -> None:
        """Post an events.k8s.io/v1 Event about `involved` (what `kubectl describe` shows). Best effort.

        The events API's `eventTime` has microseconds, and `kubectl describe` sorts by it when an
        Event has no `lastTimestamp`: Events posted one after another read in the order they happened
        (core/v1 `firstTimestamp`/`lastTimestamp` have whole seconds, so a second's Events came out
        shuffled).
        """
        meta = involved["metadata"]
        now = datetime.now(UTC)
        # client-go's name: `<object>.<unix nanoseconds in hex>` (the events API refuses a
        # generateName ending in a dot)
        name = f"{meta['name'][:200]}.{time.time_ns():x}"
        event = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": meta["namespace"]},
            "eventTime": format_micro_time(now),
            "regarding": {
                "apiVersion": involved.get("apiVersion"),
                "kind": involved.get("kind"),
                "name": meta["name"],
                "namespace": meta["namespace"],
                "uid": meta.get("uid"),
            },
            "reason": reason[:128],
            "action": reason[:128],
            "note": message[:1024],
            "type": "Warning" if warning else "Normal",
            "reportingController": f"zonda.dev/{component}",
            "reportingInstance": os.environ.get("HOSTNAME", component)[:128],
        }
        try:
            # the answer is not made a typed model: building an EventsV1Event per post was most of its cost
            response = await _call(
                self.events.create_namespaced_event(
                    meta["namespace"],
                    event,  # type: ignore[arg-type]
                    _preload_content=False,
                )
            )
            await self._json(response)
        except KubeError as exc:  # events are advisory: never fail a reconcile for one
            if exc.status not in (403, 404, 409, 422):
                raise
            log.warning("Event %s about %s not recorded: %s", reason, meta["name"], exc.reason)

    # ------------------------------------------------------------ acting as someone else (the UI)

    def as_bearer(self, token: str) -> Kube:
        """The same cluster, authenticated only by `token` (a viewer's): what RBAC allows them, no more.

        Client certificates and basic auth of our own config are dropped, else the apiserver would
        authenticate the request as us.
        """
        configuration = copy.copy(self.api_client.configuration)
        configuration.api_key = {"BearerToken": f"Bearer {token}"}
        configuration.api_key_prefix = {}
        configuration.cert_file = None
        configuration.key_file = None
        configuration.username = ""
        configuration.password = ""
        configuration.refresh_api_key_hook = None
        api_client = client.ApiClient(configuration)
        api_client.user_agent = self.api_client.user_agent or "zonda"
        _without_per_request_env_lookups(api_client)
        return Kube(api_client, self.timeouts)

    def impersonating(self, user: str, groups: tuple[str, ...] = ()) -> Kube:
        """Our credentials with Impersonate-User (and the first Impersonate-Group): RBAC checks `user`."""
        api_client = client.ApiClient(self.api_client.configuration)
        api_client.user_agent = self.api_client.user_agent or "zonda"
        api_client.set_default_header("Impersonate-User", user)
        if groups:
            api_client.set_default_header("Impersonate-Group", groups[0])
        _without_per_request_env_lookups(api_client)
        return Kube(api_client, self.timeouts)

    async def access_review(
        self,
        *,
        verb: str,
        resource: str,
        namespace: str,
        group: str = GROUP,
        subresource: str = "",
        user: str | None = None,
        groups: tuple[str, ...] = (),
    ) -> tuple[bool, str]:
        """May the caller (or `user`, by a SubjectAccessReview) do `verb` on `resource`? (allowed, reason)"""
        attributes = {
            "verb": verb,
            "resource": resource,
            "group": group,
            "namespace": namespace,
            "subresource": subresource,
        }
        api = client.AuthorizationV1Api(self.api_client)
        call: Awaitable[Any]
        if user is None:
            body: Body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview"}
            body["spec"] = {"resourceAttributes": attributes}
            call = api.create_self_subject_access_review(body, _preload_content=False)  # type: ignore[arg-type]
        else:
            body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview"}
            body["spec"] = {"resourceAttributes": attributes, "user": user, "groups": list(groups)}
            call = api.create_subject_access_review(body, _preload_content=False)  # type: ignore[arg-type]
        status = (await self._json(await _call(call))).get("status") or {}
        return bool(status.get("allowed")), str(status.get("reason") or "")

    async def whoami(self) -> str | None:
        """The caller's user name as the apiserver authenticated it (a SelfSubjectReview, as `kubectl auth
        whoami`); None when the apiserver does not answer one (older than 1.28, or forbidden)."""
        api = client.AuthenticationV1Api(self.api_client)
        body: Body = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
        try:
            response = await _call(api.create_self_subject_review(body, _preload_content=False))  # type: ignore[arg-type]
        except KubeError:
            return None
        info = ((await self._json(response)).get("status") or {}).get("userInfo") or {}
        return str(info["username"]) if info.get("username") else None

    async def patch_custom(self, plural: str, namespace: str, name: str, patch: Body) -> Body:
        """Merge-patch an object (not its status): user-requested spec changes such as pausing a DAG."""
        return await _call(
            self.custom.patch_namespaced_custom_object(
                GROUP,
                VERSION,
                namespace,
                plural,
                name,
                patch,
                _content_type=MERGE_PATCH,  # type: ignore[call-arg]
            )
        )

    async def list_events(self, namespace: str, kind: str, name: str) -> list[Body]:
        """The core/v1 Events about one object (what `kubectl describe` lists), oldest first."""
        response = await _call(
            self.core.list_namespaced_event(
                namespace,
                field_selector=f"involvedObject.kind={kind},involvedObject.name={name}",
                _preload_content=False,
            )
        )
        items: list[Body] = (await self._json(response)).get("items", [])
        return sorted(items, key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "")
