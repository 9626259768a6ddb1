"""The UI's aiohttp application: identity and security middleware, live updates, health and metrics.

Pages are in `pages`, actions in `actions`; both get the viewer from `request[VIEWER]`, set by the
middleware of `app_state`.
Live updates are Server-Sent Events: `/api/changes` streams every DAG/DagRun change the store sees
(filtered to one DAG when the page asks), and the page re-renders what it shows.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator

import prometheus_client
from aiohttp import web

from controller.kube import Kube, KubeError
from controller.ui import store as ui_store
from controller.ui.access import Access
from controller.ui.app_state import (
    ACCESS,
    KUBE,
    LIVE_PAGES,
    PAGE_WATCHES,
    REGISTRY,
    SECURITY_HEADERS,
    SETTINGS,
    STATIC_DIR,
    STORE,
    TEMPLATES,
    VIEWER,
    UiSettings,
    identity_and_security,
)

log = logging.getLogger(__name__)

# ---------------------------------------------------------------------------- live, health, metrics


async def changes(request: web.Request) -> web.StreamResponse:
    """Server-Sent Events: one `change` event per DAG/DagRun change (of `?dag=NS/NAME` if given; Pool
    changes instead with `?dag=pools`, Asset changes with `?dag=assets`) that the viewer may list
    (RBAC, cached by `Access`)."""
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
                page_watch = PAGE_WATCHES.get(change.kind)
                if page_watch is not None or wanted in PAGE_WATCHES.values():
                    if page_watch != wanted:
                        continue  # Pool (Asset) changes go to the Pools (Assets) page only, and it to them
                elif wanted and wanted != f"{change.namespace}/{change.dag}":
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
    resource = {"DAG": "dags", "DagRun": "dagruns", "Pool": "pools", "Asset": "assets"}[change.kind]
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
    from controller.ui import actions, assets_page, pages, pools_page, xcom_values

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
    assets_page.add_routes(app)
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
