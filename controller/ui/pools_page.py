"""The Pools page: Airflow's Admin → Pools, read-only (slots, running, queued, scheduled, deferred, open).

Pools are not in the UI's store (it follows DAGs and DagRuns only): the page lists each namespace's
Pool resources when it is asked for, after the same RBAC check the other pages make (`require`:
may the viewer `list pools` there?); a namespace the viewer may not read is named with RBAC's reason,
never shown. The numbers are the Pools' status as the controller wrote it (`zonda pools list` shows
the same rows, `controller.cli.pools.pool_rows`); the page refreshes live on DAG and DagRun changes,
which is when the numbers move.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from controller.cli.pools import PoolRow, pool_rows
from controller.kube import POOLS, KubeError
from controller.ui.pages import render
from controller.ui.server import KUBE, SETTINGS, STORE, require


@dataclass(frozen=True)
class NamespacePools:
    namespace: str
    rows: list[PoolRow]
    note: str = ""  # why its Pools could not be read


async def pools_page(request: web.Request) -> web.Response:
    settings, store = request.app[SETTINGS], request.app[STORE]
    namespaces = settings.namespaces or sorted({ns for ns, _ in store.dags} | {ns for ns, _ in store.runs})
    shown: list[NamespacePools] = []
    refused: list[str] = []
    for namespace in namespaces:
        try:
            await require(request, "list", "pools", namespace)
        except web.HTTPForbidden as exc:
            refused.append(exc.text or f"You may not list pools in namespace {namespace}.")
            continue
        try:
            bodies = await request.app[KUBE].list_custom(POOLS, namespace)
        except KubeError as exc:
            shown.append(NamespacePools(namespace, [], f"could not list Pools: {exc.reason}"))
            continue
        shown.append(NamespacePools(namespace, pool_rows(bodies)))
    return render(request, "pools.html", sections=shown, refused=refused)


def add_routes(app: web.Application) -> None:
    app.router.add_get("/pools", pools_page)
