"""The UI's aiohttp application: identity and security middleware, live updates, health and metrics.

Pages are in `pages`, actions in `actions`; both get the viewer from `request[VIEWER]`, set here.
Live updates are Server-Sent Events: `/api/changes` streams every DAG/DagRun change the store sees
(filtered to one DAG when the page asks), and the page re-renders what it shows.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import logging
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import jinja2
import prometheus_client
from aiohttp import web

from controller.kube import Kube, KubeError
from controller.ui import store as ui_store
from controller.ui.access import Access, AuthMode, NoIdentity, Viewer, viewer_from_headers

log = logging.getLogger(__name__)

STATIC_DIR = Path(__file__).parent / "static"


@dataclass(frozen=True)
class UiSettings:
    namespaces: list[str] | None  # None: every namespace
    auth: AuthMode = AuthMode.KUBECONFIG
    read_only: bool = False
    state_dir: Path | None = None  # the local executor's, for logs of local tries
    secret: bytes = field(default_factory=lambda: secrets.token_bytes(32))  # signs CSRF tokens


SETTINGS = web.AppKey("settings", UiSettings)
STORE = web.AppKey("store", ui_store.Store)
ACCESS = web.AppKey("access", Access)
KUBE = web.AppKey("kube", Kube)
TEMPLATES = web.AppKey("templates", jinja2.Environment)
VIEWER = web.RequestKey("viewer", Viewer)
#: The Pools page's `?dag=` in `/api/changes`: it gets Pool changes (and the other pages never do).
POOLS_WATCH = "pools"

REGISTRY = prometheus_client.CollectorRegistry()
REQUESTS = prometheus_client.Counter(
    "zonda_ui_requests", "HTTP requests served", ["route", "status"], registry=REGISTRY
)
LATENCY = prometheus_client.Histogram(
    "zonda_ui_request_seconds", "Time to answer a request", ["route"], registry=REGISTRY
)
LIVE_PAGES = prometheus_client.Gauge("zonda_ui_live_pages", "Pages receiving live updates", registry=REGISTRY)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

#: Every page: scripts only from us (viz.js compiles WebAssembly), no framing, no inline script.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; style-src 'self' 'unsafe-inline'; "
        "img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}


def csrf_token(settings: UiSettings, viewer: Viewer) -> str:
    """A token only pages we served to this viewer know (a synchronizer token, bound to the viewer)."""
    return hmac.new(settings.secret, viewer.cache_key.encode(), hashlib.sha256).hexdigest()


@web.middleware
async def identity_and_security(request: web.Request, handler: Handler) -> web.StreamResponse:
    settings = request.app[SETTINGS]
    route = request.match_info.route.resource.canonical if request.match_info.route.resource else "?"
    started = time.perf_counter()
    status = 500
    try:
        if not route.startswith(("/static", "/healthz", "/readyz", "/metrics")):
            try:
                request[VIEWER] = viewer_from_headers(settings.auth, request.headers)
            except NoIdentity as exc:
                raise web.HTTPUnauthorized(text=f"Not signed in: {exc}") from exc
            if request.method == "POST":
                _check_csrf(request, settings, request[VIEWER])
        response = await handler(request)
        status = response.status
    except web.HTTPException as exc:
        status = exc.status
        for key, value in SECURITY_HEADERS.items():
            exc.headers.setdefault(key, value)
        raise
    finally:
        REQUESTS.labels(route, str(status)).inc()
        LATENCY.labels(route).observe(time.perf_counter() - started)
    for key, value in SECURITY_HEADERS.items():
        response.headers.setdefault(key, value)
    return response


def _check_csrf(request: web.Request, settings: UiSettings, viewer: Viewer) -> None:
    """Actions come only from our own pages: JSON bodies, same origin, and the page's CSRF token."""
    origin = request.headers.get("Origin")
    if origin is not None and origin.split("://", 1)[-1] != request.host:
        raise web.HTTPForbidden(text=f"cross-origin request refused (Origin {origin})")
    if request.content_type != "application/json":
        raise web.HTTPUnsupportedMediaType(text="actions take a JSON body")
    sent = request.headers.get("X-CSRF-Token", "")
    if not hmac.compare_digest(sent, csrf_token(settings, viewer)):
        raise web.HTTPForbidden(text="missing or wrong CSRF token: reload the page")


async def require(
    request: web.Request, verb: str, resource: str, namespace: str, subresource: str = ""
) -> None:
    """Refuse (403, with RBAC's reason) unless the viewer may `verb` `resource` in `namespace`."""
    try:
        allowed, reason = await request.app[ACCESS].allowed(
            request[VIEWER], verb, resource, namespace, subresource
        )
    except KubeError as exc:
        allowed, reason = False, f"the API refused the access review: {exc.reason}"
    if not allowed:
        what = f"{resource}/{subresource}" if subresource else resource
        raise web.HTTPForbidden(text=f"You may not {verb} {what} in namespace {namespace}. {reason}".strip())


# ---------------------------------------------------------------------------- live, health, metrics


async def changes(request: web.Request) -> web.StreamResponse:
    """Server-Sent Events: one `change` event per DAG/DagRun change (of `?dag=NS/NAME` if given; Pool
    changes instead with `?dag=pools`) that the viewer may list (RBAC, cached by `Access`)."""
    wanted = request.query.get("dag")
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    )
    for key, value in SECURITY_HEADERS.items():
        response.headers[key] = value
    await response.prepare(request)
    LIVE_PAGES.inc()
    try:
        with request.app[STORE].subscription() as queue:
            await response.write(b": connected\n\n")
            while True:
                try:
                    change = await asyncio.wait_for(queue.get(), timeout=15)
                except TimeoutError:
                    await response.write(b": keep-alive\n\n")
                    continue
                if (change.kind == "Pool") != (wanted == POOLS_WATCH):
                    continue  # Pool changes go to the Pools page only, and it needs nothing else
                if wanted and wanted != POOLS_WATCH and wanted != f"{change.namespace}/{change.dag}":
                    continue
                if not await _may_see(request, change):
                    continue  # even the names of objects the viewer may not list stay unsaid
                await response.write(f"event: change\ndata: {json.dumps(change.as_json())}\n\n".encode())
    except (ConnectionResetError, asyncio.CancelledError):
        pass
    finally:
        LIVE_PAGES.dec()
    return response


async def _may_see(request: web.Request, change: ui_store.Change) -> bool:
    resource = {"DAG": "dags", "DagRun": "dagruns", "Pool": "pools"}[change.kind]
    try:
        allowed, _ = await request.app[ACCESS].allowed(request[VIEWER], "list", resource, change.namespace)
    except KubeError:
        return False
    return allowed


async def healthz(_: web.Request) -> web.Response:
    return web.Response(text="ok")


async def readyz(request: web.Request) -> web.Response:
    """Ready once every watched resource was listed: before that, pages would show nothing."""
    settings, store = request.app[SETTINGS], request.app[STORE]
    targets: list[str | None] = [*settings.namespaces] if settings.namespaces else [None]
    missing = [(p, n) for p in ("dags", "dagruns") for n in targets if (p, n) not in store.synced]
    if missing:
        return web.Response(status=503, text=f"not yet listed: {missing}")
    return web.Response(text="ok")


async def metrics(_: web.Request) -> web.Response:
    return web.Response(body=prometheus_client.generate_latest(REGISTRY), content_type="text/plain")


# ------------------------------------------------------------------------------------------ app


def create_app(kube: Kube, settings: UiSettings, *, follow: bool = True) -> web.Application:
    """The application; with `follow`, it lists+watches DAGs and DagRuns while it runs."""
    from controller.ui import actions, pages, pools_page, xcom_values

    app = web.Application(middlewares=[identity_and_security])
    app[SETTINGS] = settings
    app[STORE] = ui_store.Store()
    app[KUBE] = kube
    app[ACCESS] = Access(kube, settings.auth, read_only=settings.read_only)
    app[TEMPLATES] = pages.environment()
    pages.add_routes(app)
    actions.add_routes(app)
    xcom_values.add_routes(app)
    pools_page.add_routes(app)
    app.router.add_get("/api/changes", changes)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)
    app.router.add_static("/static", STATIC_DIR, append_version=True)

    if follow:

        async def watching(app: web.Application) -> AsyncIterator[None]:
            tasks = ui_store.start_following(kube, app[STORE], settings.namespaces)
            yield
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task

        app.cleanup_ctx.append(watching)
    return app


async def serve(
    settings: UiSettings, *, host: str, port: int, kubeconfig: str | None, stop: asyncio.Event
) -> None:
    """Run the UI until `stop` is set (what `zonda ui` calls)."""
    async with await Kube.connect(kubeconfig, component="zonda-ui") as kube:
        runner = web.AppRunner(create_app(kube, settings), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, host, port)
        await site.start()
        log.info(
            "Zonda UI on http://%s:%d (auth %s%s)",
            host,
            port,
            settings.auth,
            ", read-only" if settings.read_only else "",
        )
        try:
            await stop.wait()
        finally:
            await runner.cleanup()
