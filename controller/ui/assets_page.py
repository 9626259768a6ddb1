"""The Assets page: Airflow's Assets (Datasets) view — each asset's producers -> asset -> consumers,
its last event and the events kept, and which consumers still wait for it.

The Assets come from the UI's store (listed and watched once for every viewer, as the Pools), and
their status is what the controller wrote (`kubectl get assets` shows the same columns); a consumer
DAG whose `status.awaitedAssets` names the asset is marked as waiting for it. Shown per namespace
after the same RBAC check as the other pages (`require`: may the viewer `list assets` there?); a
namespace refused is named with RBAC's reason. The page refreshes live on every Asset change (it
watches ``assets``: `controller.ui.server.changes`). Each namespace's rows are also drawn as a graph,
producer DAGs -> asset -> consumer DAGs, from the same rows as DOT (`graphs.assets_dot`, served at
``/assets/{namespace}/graph.dot`` after the same check) that viz.js lays out as the DAG graph.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from controller.ui import graphs
from controller.ui.app_state import ASSETS_WATCH, SETTINGS, STORE, require
from controller.ui.pages import render
from zonda.resources.asset_models import ASSETS


@dataclass(frozen=True)
class Consumer:
    dag: str
    waiting: bool  # its schedule still waits for an event of this asset


@dataclass(frozen=True)
class AssetRow:
    name: str
    uri: str
    producers: list[str]
    consumers: list[Consumer]
    last_event: str
    last_event_time: str
    events: int
    aliases: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class NamespaceAssets:
    namespace: str
    rows: list[AssetRow]
    note: str = ""  # why its Assets could not be read


def asset_rows(assets: Sequence[Mapping[str, Any]], dags: Mapping[str, Mapping[str, Any]]) -> list[AssetRow]:
    """One row per Asset, by URI; `dags`: DAG name -> body (for the consumers' awaited assets)."""
    rows = []
    for body in assets:
        spec, status = body.get("spec") or {}, body.get("status") or {}
        uri = str(spec.get("uri", ""))
        consumers = [
            Consumer(dag, uri in ((dags.get(dag) or {}).get("status") or {}).get("awaitedAssets", []))
            for dag in status.get("consumingDags") or []
        ]
        rows.append(
            AssetRow(
                name=body["metadata"]["name"],
                uri=uri,
                producers=list(status.get("producingDags") or []),
                consumers=consumers,
                last_event=str(status.get("lastEvent") or ""),
                last_event_time=str(status.get("lastEventTime") or ""),
                events=int(status.get("events") or 0),
                aliases=list(status.get("aliases") or []),
            )
        )
    return sorted(rows, key=lambda row: row.uri)


async def assets_page(request: web.Request) -> web.Response:
    settings, store = request.app[SETTINGS], request.app[STORE]
    known = {ns for ns, _ in store.dags} | {ns for ns, _ in store.assets}
    shown: list[NamespaceAssets] = []
    refused: list[str] = []
    for namespace in settings.namespaces or sorted(known):
        try:
            await require(request, "list", "assets", namespace)
        except web.HTTPForbidden as exc:
            refused.append(exc.text or f"You may not list assets in namespace {namespace}.")
            continue
        if not store.listed(ASSETS, namespace):
            note = "Not listed yet (the UI's account needs get/list/watch on assets; the chart grants it)"
            shown.append(NamespaceAssets(namespace, [], note))
            continue
        shown.append(NamespaceAssets(namespace, namespace_rows(request, namespace)))
    return render(request, "assets.html", sections=shown, refused=refused, watch=ASSETS_WATCH)


def namespace_rows(request: web.Request, namespace: str) -> list[AssetRow]:
    store = request.app[STORE]
    dags = {name: body for (ns, name), body in store.dags.items() if ns == namespace}
    return asset_rows(store.assets_in(namespace), dags)


async def assets_dot(request: web.Request) -> web.Response:
    """A namespace's producer -> asset -> consumer graph as DOT (viz.js renders it in the page)."""
    namespace = request.match_info["namespace"]
    await require(request, "list", "assets", namespace)
    if not request.app[STORE].listed(ASSETS, namespace):
        raise web.HTTPServiceUnavailable(text=f"the Assets of namespace {namespace} are not listed yet")
    text = graphs.assets_dot(namespace, namespace_rows(request, namespace))
    return web.Response(text=text, content_type="text/vnd.graphviz")


def add_routes(app: web.Application) -> None:
    app.router.add_get("/assets", assets_page)
    app.router.add_get("/assets/{namespace}/graph.dot", assets_dot)
