"""The Pools page (Airflow's Admin → Pools) in a real browser: a pool two tasks fill while a third
waits, read from the Pool's status the controller wrote, emptying live as they finish; and a viewer
whose RBAC does not let it list pools sees the namespace refused, not its pools."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, expect

from controller.devtools.devcluster import Cluster
from tests.cluster.test_ui_server import READ_RULES, service_account_token
from tests.cluster.zonda_processes import (
    apply,
    controller,
    get,
    runs_of,
    trigger,
    wait_for,
    wait_run_finished,
)
from tests.ui.test_browser import TIMEOUT_MS, shot, ui_process

pytestmark = pytest.mark.cluster

POOL_RULES = [*READ_RULES, {"apiGroups": ["zonda.dev"], "resources": ["pools"], "verbs": ["list"]}]


def pool_dag(flag: Path) -> dict[str, Any]:
    """Three tasks in the two-slot pool, each running until `flag` exists."""
    wait = f"while [ ! -e {flag} ]; do sleep 0.5; done"
    return {
        "apiVersion": "zonda.dev/v1alpha1",
        "kind": "DAG",
        "metadata": {"name": "pool-demo"},
        "spec": {
            "schedule": None,
            "defaultArgs": {"pool": "warehouse"},
            "tasks": [
                {"id": f"load{i}", "operator": "BashOperator", "args": {"bash_command": wait}}
                for i in (1, 2, 3)
            ],
        },
    }


def test_the_pools_page_shows_what_the_pool_holds_and_who_may_see_it(
    browser: Browser, cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    flag = tmp_path / "release"
    apply(cluster, namespace, {
        "apiVersion": "zonda.dev/v1alpha1", "kind": "Pool", "metadata": {"name": "warehouse"},
        "spec": {"slots": 2, "description": "two connections"},
    })  # fmt: skip
    apply(cluster, namespace, pool_dag(flag))
    with controller(cluster, namespace, tmp_path, executor="local"):
        run = trigger(cluster, namespace, "pool-demo")

        def two_running_one_waiting() -> bool:
            status = get(cluster, namespace, "pool", "warehouse").get("status") or {}
            return (status.get("runningSlots"), status.get("scheduledSlots")) == (2, 1)

        wait_for(two_running_one_waiting, "two tasks running in the pool and one waiting", timeout=180)
        with ui_process(cluster, namespace, tmp_path) as url:
            page = browser.new_page(viewport={"width": 1280, "height": 600})
            page.set_default_timeout(TIMEOUT_MS)
            errors: list[str] = []
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.goto(f"{url}/dags")
            page.click("header nav a:has-text('Pools')")
            row = page.locator(f"tr[data-pool='{namespace}/warehouse']")
            cells = {
                "slots": "2", "running": "2", "queued": "0", "scheduled": "1", "deferred": "0", "open": "0",
                "used": "2/2", "include-deferred": "no",
            }  # fmt: skip
            for column, value in cells.items():
                expect(row.locator(f"td[data-col={column}]")).to_have_text(value)
            expect(row).to_contain_text("two connections")
            default = page.locator(f"tr[data-pool='{namespace}/default-pool']")
            expect(default.locator("td[data-col=slots]")).to_have_text("128")
            expect(default).to_have_class("implicit")
            shot(page, "pools")

            # The tasks finish: the page follows the Pool's status live, without a reload.
            expect(page.locator("body")).to_have_attribute("data-live", "on")
            page.evaluate("window.__sameDocument = true")
            flag.touch()
            expect(row.locator("td[data-col=used]")).to_have_text("0/2")
            expect(row.locator("td[data-col=running]")).to_have_text("0")
            expect(row.locator("td[data-col=scheduled]")).to_have_text("0")
            assert page.evaluate("window.__sameDocument") is True
            assert errors == []
            page.close()

        reader = service_account_token(cluster, namespace, "reader", READ_RULES)
        pool_reader = service_account_token(cluster, namespace, "pool-reader", POOL_RULES)
        with ui_process(cluster, namespace, tmp_path, "--auth", "token") as url:
            for token, allowed in ((reader, False), (pool_reader, True)):
                context = browser.new_context(extra_http_headers={"Authorization": f"Bearer {token}"})
                page = context.new_page()
                page.set_default_timeout(TIMEOUT_MS)
                page.goto(f"{url}/pools")
                warehouse = page.locator(f"tr[data-pool='{namespace}/warehouse']")
                if allowed:
                    expect(warehouse.locator("td[data-col=slots]")).to_have_text("2")
                else:
                    expect(page.locator("p.refused")).to_contain_text(
                        f"You may not list pools in namespace {namespace}"
                    )
                    expect(warehouse).to_have_count(0)
                context.close()
        wait_run_finished(cluster, namespace, run, timeout=180)
    assert {
        ti["state"] for ti in runs_of(cluster, namespace, "pool-demo")[0]["status"]["taskInstances"].values()
    } == {"success"}
