"""The UI in a real browser, with the controller running task code: the issue's walk-through.

The DAG list, a grid (a task's display name shown, its id kept), triggering with conf from the params
form, cells turning success live (no reload), collapsing a task group, the graph, a failed task's log,
clearing it and watching it run again, and a read-only ServiceAccount refused when it triggers. Each
page's screenshot is written to build/ui-screenshots/ (untracked); with ZONDA_UPDATE_SCREENSHOTS=1
(`make screenshots`) to docs/ui/ instead, so the pictures in the docs are ones this test saw, retaken
only on demand.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Locator, Page, expect

from controller.devtools.devcluster import REPO_ROOT, Cluster, free_port
from tests.cluster.test_ui_server import READ_RULES, service_account_token
from tests.cluster.zonda_processes import (
    ZondaProcess,
    apply,
    controller,
    get,
    runs_of,
    trigger,
    wait_for,
    wait_run_finished,
)

pytestmark = pytest.mark.cluster

#: Set to 1 to retake the screenshots in docs/ui/ (`make screenshots`); otherwise they go to build/.
UPDATE_SCREENSHOTS_ENV = "ZONDA_UPDATE_SCREENSHOTS"
TIMEOUT_MS = 90_000


def demo_dag(flag: Path) -> dict[str, Any]:
    """`flaky` fails its first try (no retries), so the first run fails until it is cleared."""
    return {
        "apiVersion": "zonda.dev/v1alpha1",
        "kind": "DAG",
        "metadata": {"name": "ui-demo"},
        "spec": {
            "schedule": None,
            "tags": ["demo", "ui"],
            "docMd": "# UI demo\nA DAG with a **task group** and a task that fails once.",
            "params": {"greeting": "hello", "count": 1},
            "paramsSchema": {
                "type": "object",
                "properties": {
                    "count": {"type": "integer", "minimum": 1, "description": "How many times"},
                    "who": {"type": "string"},
                },
                "required": ["who"],
            },
            "taskGroups": [{"id": "process", "tooltip": "extract, then the flaky one"}],
            "tasks": [
                {"id": "start", "operator": "EmptyOperator"},
                {
                    "id": "extract",
                    "group": "process",
                    "operator": "BashOperator",
                    "dependsOn": ["start"],
                    "args": {"bash_command": "echo '{{ params.greeting }} x{{ params.count }}'; sleep 2"},
                },
                {
                    "id": "flaky",
                    "displayName": "Flaky step",  # Airflow's task_display_name
                    "group": "process",
                    "operator": "BashOperator",
                    "dependsOn": ["extract"],
                    "edgeLabels": {"extract": "rows"},
                    "args": {
                        "bash_command": f"if [ -e {flag} ]; then echo 'second try works'; "
                        f"else touch {flag}; echo 'first try fails on purpose'; exit 3; fi"
                    },
                },
                {"id": "end", "operator": "EmptyOperator", "dependsOn": ["process"]},
            ],
        },
    }


@contextlib.contextmanager
def ui_process(cluster: Cluster, namespace: str, tmp_path: Path, *extra: str) -> Iterator[str]:
    port = free_port()
    process = ZondaProcess(
        f"ui-{port}",
        [
            "ui",
            "-n",
            namespace,
            "--port",
            str(port),
            "--state-dir",
            str(tmp_path / "state"),
            "--kubeconfig",
            str(cluster.kubeconfig),
            *extra,
        ],
        cluster,
        tmp_path,
    ).start()
    url = f"http://127.0.0.1:{port}"
    try:
        import urllib.request

        def ready() -> bool:
            try:
                with urllib.request.urlopen(f"{url}/readyz", timeout=2) as response:
                    return bool(response.status == 200)
            except OSError:
                return False

        wait_for(ready, "the UI to be ready", timeout=90)  # a loaded machine starts it slowly
        yield url
    finally:
        process.stop()
        print(f"--- ui log\n{process.log()[-4000:]}")


def grid_cell(page: Page, task_key: str, run_name: str) -> Locator:
    """The grid cell of one task instance: the row of the task, the column whose header is the run.

    The run's column comes when the UI's store has seen the run (a live update), which may be after
    the page loaded (right after a trigger): wait for it before counting columns."""
    expect(page.locator(f"table.grid thead th[data-run='{run_name}']")).to_have_count(1)
    column = page.evaluate(
        "run => [...document.querySelectorAll('table.grid thead th')]"
        ".findIndex(th => th.dataset.run === run)",
        run_name,
    )
    assert column > 0, f"no column for {run_name}"
    return page.locator(f"table.grid tr[data-key='{task_key}'] > :nth-child({column + 1})")


def screenshots_dir() -> Path:
    """docs/ui/ on demand, else build/ui-screenshots/: a plain `make test` leaves the tree clean."""
    if os.environ.get(UPDATE_SCREENSHOTS_ENV) == "1":
        return REPO_ROOT / "docs" / "ui"
    return REPO_ROOT / "build" / "ui-screenshots"


def shot(page: Page, name: str) -> None:
    shots = screenshots_dir()
    shots.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(shots / f"{name}.png"), full_page=True)


def test_the_ui_walk_through(browser: Browser, cluster: Cluster, namespace: str, tmp_path: Path) -> None:
    apply(cluster, namespace, demo_dag(tmp_path / "flaky-ran-once"))
    with (
        controller(cluster, namespace, tmp_path, executor="local"),
        ui_process(cluster, namespace, tmp_path) as url,
    ):
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.set_default_timeout(TIMEOUT_MS)
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))

        # The DAG list, then its grid.
        page.goto(f"{url}/dags")
        expect(page.locator("tr[data-dag$='/ui-demo']")).to_contain_text("demo")
        expect(page.locator("body")).to_have_attribute("data-live", "on")
        shot(page, "dags")
        page.click("a.dag-link:has-text('ui-demo')")
        expect(page.locator("table.grid")).to_be_visible()

        # Trigger with conf from the params form.
        page.click("a.button:has-text('Trigger')")
        page.fill("[data-param=greeting]", "bonjour")
        page.fill("[data-param=count]", "7")
        expect(page.locator("label.field:has([data-param=count])")).to_contain_text("How many times")
        page.click("#trigger-submit")  # `who` has no default and is left empty: refused, no run
        refusal = "param 'who': no value given and it has no default"
        expect(page.locator("#trigger-error")).to_contain_text(refusal)
        assert runs_of(cluster, namespace, "ui-demo") == []
        page.fill("[data-param=who]", "ann")
        shot(page, "trigger")
        page.click("#trigger-submit")
        page.wait_for_url("**/dags/*/ui-demo?triggered=*")
        run = runs_of(cluster, namespace, "ui-demo")[-1]
        assert run["spec"]["conf"] == {"greeting": "bonjour", "count": 7, "who": "ann"}
        run_name = run["metadata"]["name"]

        # Cells change colour live: the page is never reloaded (the marker on window survives).
        page.evaluate("window.__sameDocument = true")
        extract = grid_cell(page, "process.extract", run_name)
        expect(extract).to_have_class("cell s-success")
        flaky = grid_cell(page, "process.flaky", run_name)
        expect(flaky).to_have_class("cell s-failed")
        assert page.evaluate("window.__sameDocument") is True
        # A task's display name is its row's label, its id the row's tooltip (Airflow's grid).
        flaky_label = page.locator("tr[data-key='process.flaky'] th.task-col")
        expect(flaky_label).to_have_text("Flaky step")
        expect(flaky_label).to_have_attribute("title", "process.flaky")
        shot(page, "grid")

        # Collapse the task group: its tasks' rows hide, the group's row stays (summarised as failed).
        page.click(".group-toggle[data-group='process']")
        expect(page.locator("tr[data-key='process.extract']")).to_be_hidden()
        expect(page.locator("tr[data-key='group:process'] td.cell.s-failed")).to_have_count(1)
        page.click(".group-toggle[data-group='process']")
        expect(page.locator("tr[data-key='process.extract']")).to_be_visible()

        # The graph, laid out by Graphviz (viz.js), coloured by the run.
        page.click("nav.tabs a:has-text('Graph')")
        expect(page.locator("#graph[data-rendered=true] svg")).to_be_visible()
        expect(page.locator("#graph g[id='node-process.flaky']")).to_be_visible()
        expect(page.locator("#graph g[id='node-process.flaky'] text")).to_have_text("Flaky step")
        shot(page, "graph")

        # Open the failed task's log.
        page.goto(f"{url}/dags/{namespace}/ui-demo")
        grid_cell(page, "process.flaky", run_name).click()
        expect(page.locator("#log")).to_contain_text("first try fails on purpose")
        shot(page, "task")
        expect(page.locator("#task-title")).to_contain_text("Flaky step")  # and the id beside it
        expect(page.locator("#task-title .meta")).to_have_text("process.flaky")

        # Clear it (with downstream): the preview lists what will run again; then it does, live.
        page.click(".actions .clear-button")
        expect(page.locator("dialog .preview")).to_contain_text("process.flaky")
        expect(page.locator("dialog .preview")).to_contain_text("end")
        page.click("dialog .confirm-clear")
        expect(page.locator("h1 .badge")).to_have_text("success")
        wait_run_finished(cluster, namespace, run_name)
        ti = get(cluster, namespace, "dagrun", run_name)["status"]["taskInstances"]["process.flaky"]
        assert ti["state"] == "success" and ti["tryNumber"] == 2
        page.click("nav.tabs a:has-text('try 2')")
        expect(page.locator("#log")).to_contain_text("second try works")

        page.goto(f"{url}/runs/{namespace}/{run_name}")
        expect(page.locator("h1 .badge")).to_have_text("success")
        # The Gantt shows both tries of the cleared task in its row: the failed one, then the retry.
        flaky_bars = page.locator("table.gantt tr[data-task='process.flaky'] .bar")
        expect(flaky_bars).to_have_count(2)
        assert [flaky_bars.nth(i).get_attribute("data-try") for i in range(2)] == ["1", "2"]
        expect(flaky_bars.nth(0)).to_have_class("bar s-failed")
        expect(flaky_bars.nth(1)).to_have_class("bar s-success")
        flaky_row = page.locator("table.tis tr[data-task='process.flaky'] td").first
        expect(flaky_row.locator("a")).to_have_text("Flaky step")
        expect(flaky_row.locator(".meta")).to_have_text("process.flaky")
        shot(page, "run")
        assert errors == []


def test_a_running_tasks_log_is_streamed_not_polled(
    browser: Browser, cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    """The log grows on the page while the task runs, over one Server-Sent Events stream (no
    repeated fetches of the whole log), and the stream says when the try is over."""
    release = tmp_path / "release"
    apply(
        cluster,
        namespace,
        {
            "apiVersion": "zonda.dev/v1alpha1",
            "kind": "DAG",
            "metadata": {"name": "ui-stream"},
            "spec": {
                "schedule": None,
                "tasks": [
                    {
                        "id": "slow",
                        "operator": "BashOperator",
                        "args": {
                            # computed words: the log's copy of the command does not contain them
                            "bash_command": f"echo waiting-$((20+22)); while [ ! -e {release} ]; "
                            "do sleep 0.2; done; echo released-$((5*5))"
                        },
                    }
                ],
            },
        },
    )
    with (
        controller(cluster, namespace, tmp_path, executor="local"),
        ui_process(cluster, namespace, tmp_path) as url,
    ):
        run_name = trigger(cluster, namespace, "ui-stream")
        wait_for(
            lambda: (  # no status before the controller's first pass
                (get(cluster, namespace, "dagrun", run_name).get("status") or {})
                .get("taskInstances", {})
                .get("slow", {})
                .get("state")
                == "running"
            ),
            "the task to run",
            timeout=90,
        )
        page = browser.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        requested: list[str] = []
        page.on("request", lambda request: requested.append(request.url))
        page.goto(f"{url}/runs/{namespace}/{run_name}/tasks/slow")
        expect(page.locator("#log")).to_contain_text("waiting-42")
        expect(page.locator("#log")).to_have_attribute("data-streaming", "open")
        release.touch()
        expect(page.locator("#log")).to_contain_text("released-25")
        expect(page.locator("#log")).to_have_attribute("data-streaming", "ended")
        expect(page.locator("h1 .badge")).to_have_text("success")  # the page refreshed live meanwhile
        assert (page.locator("#log").text_content() or "").count("waiting-42") == 1  # sent once
        log_requests = [u for u in requested if "/log" in u]
        assert log_requests and all("/log/stream?try=1" in u for u in log_requests), log_requests


def test_a_read_only_service_account_is_refused_when_it_triggers(
    browser: Browser, cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    apply(cluster, namespace, demo_dag(tmp_path / "flag"))
    token = service_account_token(cluster, namespace, "reader", READ_RULES)
    with ui_process(cluster, namespace, tmp_path, "--auth", "token") as url:
        context = browser.new_context(extra_http_headers={"Authorization": f"Bearer {token}"})
        page = context.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        page.goto(f"{url}/dags/{namespace}/ui-demo/trigger")
        page.fill("[data-param=who]", "ann")  # a valid conf: refused for RBAC alone
        page.click("#trigger-submit")
        expect(page.locator("#trigger-error")).to_contain_text('cannot create resource "dagruns"')
        shot(page, "refused")
        assert get(cluster, namespace, "dagruns")["items"] == []
        context.close()
