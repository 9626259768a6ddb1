"""The Pools page: Airflow's Admin → Pools, read-only (slots, running, queued, scheduled, deferred, open).

The Pools come from the UI's store (listed and watched once for every viewer, as DAGs and DagRuns),
shown per namespace after the same RBAC check the other pages make (`require`: may the viewer `list
pools` there?); a namespace the viewer may not read is named with RBAC's reason, never shown. The
numbers are the Pools' status as the controller wrote it (`zonda pools list` shows the same rows,
`controller.cli.pools.pool_rows`), and the page refreshes live on every Pool change (it watches
``pools``: `controller.ui.server.changes`).
"""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from controller.kube import POOLS
from controller.operations.pool_rows import PoolRow, pool_rows
from controller.ui.app_state import POOLS_WATCH, SETTINGS, STORE, require
from controller.ui.pages import render


@dataclass(frozen=True)
class NamespacePools:
    namespace: str
    rows: list[PoolRow]
    note: str = ""  # why its Pools could not be read


async def pools_page(request: web.Request) -> web.Response:
    settings, store = request.app[SETTINGS], request.app[STORE]
    known = {ns for ns, _ in store.dags} | {ns for ns, _ in store.runs} | {ns for ns, _ in store.pools}
    shown: list[NamespacePools] = []
    refused: list[str] = []
    for namespace in settings.namespaces or sorted(known):
        try:
            await require(request, "list", "pools", namespace)
        except web.HTTPForbidden as exc:
            refused.append(exc.text or f"You may not list pools in namespace {namespace}.")
            continue
        if not store.listed(POOLS, namespace):
            note = "Not listed yet (the UI's account needs get/list/watch on pools; the chart grants it)"
            shown.append(NamespacePools(namespace, [], note))
            continue
        shown.append(NamespacePools(namespace, pool_rows(store.pools_in(namespace))))
    return render(request, "pools.html", sections=shown, refused=refused, watch=POOLS_WATCH)


def add_routes(app: web.Application) -> None:
    app.router.add_get("/pools", pools_page)
