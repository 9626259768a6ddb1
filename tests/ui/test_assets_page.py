"""The Assets page in a real browser: producers -> asset -> consumers as the controller wrote the
Assets' status, the consumer marked waiting until an event arrives, the last event shown live (no
reload) when one is created with kubectl; a viewer whose RBAC does not let it list assets sees the
namespace refused, not its assets (nor its graph). The graph draws the same edges as the table."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, expect

from controller.devtools.devcluster import Cluster
from tests.cluster.test_ui_server import READ_RULES, service_account_token
from tests.cluster.zonda_processes import apply, controller, get, runs_of, wait_for
from tests.ui.test_browser import TIMEOUT_MS, shot, ui_process

pytestmark = pytest.mark.cluster

URI = "s3://ui-assets/orders"
ASSET_RULES = [*READ_RULES, {"apiGroups": ["zonda.dev"], "resources": ["assets"], "verbs": ["list"]}]


def dag(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "zonda.dev/v1alpha1", "kind": "DAG", "metadata": {"name": name}, "spec": spec}


def test_the_assets_page_shows_producers_asset_consumers_and_what_is_awaited_live(
    browser: Browser, cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    apply(cluster, namespace, dag("orders-producer", {
        "schedule": None, "tasks": [{"id": "t", "operator": "EmptyOperator", "outlets": [{"uri": URI}]}],
    }))  # fmt: skip
    apply(cluster, namespace, dag("orders-consumer", {
        "assetSchedule": {"uri": URI}, "tasks": [{"id": "t", "operator": "EmptyOperator"}],
    }))  # fmt: skip
    with controller(cluster, namespace, tmp_path, executor="local"):

        def asset_status() -> dict[str, Any]:
            items = get(cluster, namespace, "assets")["items"]
            found = [a.get("status") or {} for a in items if a["spec"]["uri"] == URI]
            return found[0] if found else {}

        wait_for(
            lambda: (
                asset_status().get("producingDags") == ["orders-producer"]
                and asset_status().get("consumingDags") == ["orders-consumer"]
            ),
            "the controller to write the asset's producers and consumers",
        )
        wait_for(
            lambda: (
                URI
                in (get(cluster, namespace, "dag", "orders-consumer").get("status") or {}).get(
                    "awaitedAssets", []
                )
            ),
            "the consumer to say it awaits the asset",
        )
        with ui_process(cluster, namespace, tmp_path) as url:
            page = browser.new_page(viewport={"width": 1280, "height": 600})
            page.set_default_timeout(TIMEOUT_MS)
            errors: list[str] = []
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.goto(f"{url}/dags")
            page.click("header nav a:has-text('Assets')")
            row = page.locator(f"tr[data-asset='{namespace}/{URI}']")
            expect(row.locator("td[data-col=producers]")).to_have_text("orders-producer")
            expect(row.locator("td[data-col=consumers] a")).to_have_text("orders-consumer")
            expect(row.locator("[data-waiting='orders-consumer']")).to_have_text("waiting")
            expect(row.locator("td[data-col=events]")).to_have_text("0")

            # The same drawn as a graph (Graphviz via viz.js, as the DAG graph): producer -> asset ->
            # consumer, the edge to the waiting consumer dashed, each DAG a link to its grid.
            graph = page.locator(f".asset-graph[data-namespace='{namespace}']")
            expect(graph).to_have_attribute("data-rendered", "true")
            produced = graph.locator(f"g.edge[id='edge-dag:orders-producer->asset:{URI}']")
            consumed = graph.locator(f"g.edge[id='edge-asset:{URI}->dag:orders-consumer']")
            expect(produced).to_be_visible()
            expect(consumed).to_be_visible()
            expect(consumed.locator("path")).to_have_attribute("stroke-dasharray", "5,2")
            expect(produced.locator("path")).not_to_have_attribute("stroke-dasharray", "5,2")
            expect(graph.locator(f"g.node[id='node-asset:{URI}'] text")).to_have_text(URI)
            expect(graph.locator("g[id='node-dag:orders-consumer'] a")).to_have_attribute(
                "xlink:href", f"/dags/{namespace}/orders-consumer"
            )
            shot(page, "assets")

            # An event from outside: the page follows the Asset's status live, without a reload.
            expect(page.locator("body")).to_have_attribute("data-live", "on")
            page.evaluate("window.__sameDocument = true")
            event = {
                "apiVersion": "zonda.dev/v1alpha1", "kind": "AssetEvent",
                "metadata": {"name": "from-outside"}, "spec": {"uri": URI},
            }  # fmt: skip
            cluster.kubectl("create", "-n", namespace, "-f", "-", input=json.dumps(event))
            expect(row.locator("td[data-col=events]")).to_have_text("1")
            expect(row.locator("td[data-col=last-event]")).to_have_attribute("title", "from-outside")
            expect(graph.locator(f"g.node[id='node-asset:{URI}'] a")).to_have_attribute(
                "xlink:title", re.compile("last event: from-outside")
            )
            wait_for(lambda: len(runs_of(cluster, namespace, "orders-consumer")) == 1, "the consumer's run")
            assert page.evaluate("window.__sameDocument") is True
            assert errors == []
            page.close()

        reader = service_account_token(cluster, namespace, "reader", READ_RULES)
        asset_reader = service_account_token(cluster, namespace, "asset-reader", ASSET_RULES)
        with ui_process(cluster, namespace, tmp_path, "--auth", "token") as url:
            for token, allowed in ((reader, False), (asset_reader, True)):
                context = browser.new_context(extra_http_headers={"Authorization": f"Bearer {token}"})
                page = context.new_page()
                page.set_default_timeout(TIMEOUT_MS)
                page.goto(f"{url}/assets")
                row = page.locator(f"tr[data-asset='{namespace}/{URI}']")
                if allowed:
                    expect(row.locator("td[data-col=events]")).to_have_text("1")
                    edge = f"g.edge[id='edge-asset:{URI}->dag:orders-consumer']"
                    expect(page.locator(f".asset-graph {edge}")).to_be_visible()
                else:
                    expect(page.locator("p.refused")).to_contain_text(
                        f"You may not list assets in namespace {namespace}"
                    )
                    expect(row).to_have_count(0)
                    expect(page.locator(".asset-graph")).to_have_count(0)
                dot = context.request.get(f"{url}/assets/{namespace}/graph.dot")
                assert dot.status == (200 if allowed else 403), (dot.status, dot.text())
                context.close()
