"""The DAG page of a DAG scheduled on assets, in a real browser: its condition written out with each
asset marked awaited or updated as the controller wrote `status.awaitedAssets`, followed live (no
reload) when an event is created with kubectl, and every asset awaited again once the events made the
run, which the grid then shows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, expect

from controller.devtools.devcluster import Cluster
from tests.cluster.zonda_processes import apply, controller, get, runs_of, wait_for
from tests.ui.test_browser import TIMEOUT_MS, shot, ui_process

pytestmark = pytest.mark.cluster

ORDERS, CUSTOMERS = "s3://ui-dag-assets/orders", "s3://ui-dag-assets/customers"


def awaited(cluster: Cluster, namespace: str) -> list[str]:
    return (get(cluster, namespace, "dag", "report").get("status") or {}).get("awaitedAssets") or []


def create_event(cluster: Cluster, namespace: str, name: str, uri: str) -> None:
    event: dict[str, Any] = {
        "apiVersion": "zonda.dev/v1alpha1", "kind": "AssetEvent",
        "metadata": {"name": name}, "spec": {"uri": uri},
    }  # fmt: skip
    cluster.kubectl("create", "-n", namespace, "-f", "-", input=json.dumps(event))


def test_the_dag_page_shows_which_assets_are_still_awaited_live(
    browser: Browser, cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    apply(cluster, namespace, {
        "apiVersion": "zonda.dev/v1alpha1", "kind": "DAG", "metadata": {"name": "report"},
        "spec": {
            "assetSchedule": {"all": [{"uri": ORDERS}, {"uri": CUSTOMERS}]},
            "tasks": [{"id": "t", "operator": "EmptyOperator"}],
        },
    })  # fmt: skip
    with controller(cluster, namespace, tmp_path, executor="local"):
        wait_for(lambda: sorted(awaited(cluster, namespace)) == [CUSTOMERS, ORDERS], "both assets awaited")
        with ui_process(cluster, namespace, tmp_path) as url:
            page = browser.new_page(viewport={"width": 1280, "height": 600})
            page.set_default_timeout(TIMEOUT_MS)
            errors: list[str] = []
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.goto(f"{url}/dags/{namespace}/report")
            schedule = page.locator("p.asset-schedule")
            orders = schedule.locator(f"[data-asset='{ORDERS}']")
            customers = schedule.locator(f"[data-asset='{CUSTOMERS}']")
            expect(schedule).to_contain_text(f"○ {ORDERS} & ○ {CUSTOMERS}")
            expect(orders).to_have_attribute("data-awaited", "true")
            expect(customers).to_have_attribute("data-awaited", "true")
            expect(schedule).to_contain_text("waiting for 2 of 2")

            # One event: the page follows the DAG's status live, without a reload.
            expect(page.locator("body")).to_have_attribute("data-live", "on")
            page.evaluate("window.__sameDocument = true")
            create_event(cluster, namespace, "orders-1", ORDERS)
            expect(orders).to_have_attribute("data-awaited", "false")
            expect(orders).to_have_text(f"✓ {ORDERS}")
            expect(customers).to_have_attribute("data-awaited", "true")
            expect(schedule).to_contain_text("waiting for 1 of 2")
            assert awaited(cluster, namespace) == [CUSTOMERS], "the page says what the DAG's status says"
            shot(page, "dag-assets-awaited")

            # The other: the run is made and consumes both, so both are awaited again.
            create_event(cluster, namespace, "customers-1", CUSTOMERS)
            [run] = wait_for(lambda: runs_of(cluster, namespace, "report"), "the consumer's run")
            expect(page.locator(f"th.run-col[data-run='{run['metadata']['name']}']")).to_have_count(1)
            expect(orders).to_have_attribute("data-awaited", "true")
            expect(customers).to_have_attribute("data-awaited", "true")
            expect(schedule).to_contain_text("waiting for 2 of 2")
            # The graph tab carries the same header.
            page.click("nav.tabs a:has-text('Graph')")
            expect(page.locator(f"p.asset-schedule [data-asset='{ORDERS}']")).to_have_attribute(
                "data-awaited", "true"
            )
            assert errors == []
            page.close()
            assert page.is_closed()
    assert len(runs_of(cluster, namespace, "report")) == 1
