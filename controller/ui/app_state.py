"""What the UI's application holds and what every handler checks: its settings and keys (the store, the
access checker, the API client, the templates, the viewer), the identity and security middleware,
`require` (the viewer's RBAC check), CSRF tokens, the UI's metrics. Pages, actions, log streams and
the server import this module; it imports none of them.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
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
ASSETS_WATCH = "assets"
#: Kinds whose changes go only to their own page (`?dag=<watch>`), and that page needs nothing else.
PAGE_WATCHES = {"Pool": POOLS_WATCH, "Asset": ASSETS_WATCH}

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
