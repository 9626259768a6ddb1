"""Benchmark: how fast the UI renders big pages, and how soon a status change reaches an open page.

    python bench/bench_ui.py [--dags 1000] [--runs 25] [--grid-runs 100] [--grid-tasks 200] [--changes 50]

1. DAG list: 1,000 DAGs with 25 runs each in the UI's store (synthetic bodies fed straight to the
   store: listing 26,000 objects from an apiserver is a start-up cost, not a render), then the time
   to first render in Chromium (navigation start -> the table painted; `load` event) for the first
   page (100 DAGs, as Airflow paginates), and a search over all 1,000; plus the server's own time.
2. Grid: one DAG of 200 tasks (in 10 task groups) with 100 runs, `?runs=100`: the same timings.
3. Live delay: a real apiserver (local control plane) and the UI watching it; the bench patches one
   task instance's state in a DagRun's status `--changes` times and reads, from the page, when the
   grid was re-rendered with it (`document.body.dataset.refreshedAt`, the same machine clock).
   Prints p50/p99 of apiserver write -> page showing it.

It prints numbers and the machine's load; it asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aiohttp import web
from playwright.async_api import Page, async_playwright

from controller.devtools.devcluster import connect_cluster, free_port
from controller.kube import DAGRUNS, DAGS, Kube
from controller.ui.app_state import STORE, UiSettings
from controller.ui.server import create_app
from tests.ui.conftest import CHROMIUM, CHROMIUM_ARGS

STATES = ["success", "failed", "running", "success", "skipped", "upstream_failed", "success"]


def dag_body(namespace: str, name: str, tasks: int, groups: int = 0) -> dict[str, Any]:
    spec: dict[str, Any] = {"schedule": "@daily", "tags": ["bench", f"t{len(name) % 7}"]}
    task_list = []
    for index in range(tasks):
        task: dict[str, Any] = {"id": f"t{index:03d}", "operator": "EmptyOperator"}
        if groups:
            task["group"] = f"g{index % groups}"
        if index >= (groups or 1):
            task["dependsOn"] = [f"t{index - (groups or 1):03d}"]
        task_list.append(task)
    spec["tasks"] = task_list
    if groups:
        spec["taskGroups"] = [{"id": f"g{g}"} for g in range(groups)]
    return {
        "apiVersion": "zonda.dev/v1alpha1",
        "kind": "DAG",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
        "status": {"timetableSummary": "@daily", "nextRunAfter": "2026-12-01T00:00:00Z"},
    }


def run_body(namespace: str, dag: str, day: int, task_ids: list[str]) -> dict[str, Any]:
    logical = f"2026-{1 + day // 28:02d}-{1 + day % 28:02d}T00:00:00Z"
    return {
        "apiVersion": "zonda.dev/v1alpha1",
        "kind": "DagRun",
        "metadata": {"name": f"{dag}-scheduled-{day}", "namespace": namespace},
        "spec": {"dagName": dag, "runType": "scheduled"},
        "status": {
            "state": STATES[day % len(STATES)],
            "logicalDate": logical,
            "taskInstances": {t: {"state": STATES[(day + i) % len(STATES)]} for i, t in enumerate(task_ids)},
        },
    }


async def serve(app: web.Application) -> tuple[web.AppRunner, str]:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner, f"http://127.0.0.1:{port}"


async def first_render(page: Page, url: str, selector: str, repeat: int = 5) -> list[float]:
    """Milliseconds from navigation start to the `load` event, with `selector` present, `repeat` times."""
    timings = []
    for _ in range(repeat):
        await page.goto(url, wait_until="load")
        await page.wait_for_selector(selector, state="attached")
        timings.append(
            await page.evaluate(
                "() => { const n = performance.getEntriesByType('navigation')[0];"
                " return n.loadEventEnd - n.startTime; }"
            )
        )
    return timings


async def server_time(url: str, repeat: int = 5) -> list[float]:
    import aiohttp

    timings = []
    async with aiohttp.ClientSession() as session:
        for _ in range(repeat):
            started = time.perf_counter()
            async with session.get(url) as response:
                body = await response.read()
                assert response.status == 200, body[:300]
            timings.append((time.perf_counter() - started) * 1000)
    return timings


def summary(name: str, values: list[float], unit: str = "ms") -> None:
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    print(
        f"{name:58s} median {statistics.median(ordered):8.1f} {unit}   p99 {p99:8.1f} {unit}"
        f"   min {ordered[0]:8.1f}   n={len(ordered)}"
    )


async def bench_render(args: argparse.Namespace, page: Page) -> None:
    namespace = "bench"
    settings = UiSettings(namespaces=[namespace])
    app = create_app(None, settings, follow=False)  # type: ignore[arg-type]  # no API: a filled store
    store = app[STORE]
    for d in range(args.dags):
        name = f"dag-{d:04d}"
        store.apply(DAGS, "ADDED", dag_body(namespace, name, 3))
        for day in range(args.runs):
            store.apply(DAGRUNS, "ADDED", run_body(namespace, name, day, ["t000", "t001", "t002"]))
    tasks = [f"t{i:03d}" for i in range(args.grid_tasks)]
    store.apply(DAGS, "ADDED", dag_body(namespace, "big", args.grid_tasks, groups=10))
    for day in range(args.grid_runs):
        grouped = [f"g{int(t[1:]) % 10}.{t}" for t in tasks]
        store.apply(DAGRUNS, "ADDED", run_body(namespace, "big", day, grouped))
    store.synced.update({(DAGS, namespace), (DAGRUNS, namespace)})
    runner, url = await serve(app)
    try:
        print(f"store: {len(store.dags)} DAGs, {len(store.runs)} DagRuns")
        summary(
            f"DAG list, {args.dags} DAGs x {args.runs} runs: server (page 1)",
            await server_time(f"{url}/dags"),
        )
        summary(
            "DAG list: browser first render (navigation -> load)",
            await first_render(page, f"{url}/dags", "table.dags tbody tr"),
        )
        summary("DAG list: search over all DAGs, server", await server_time(f"{url}/dags?q=dag-09"))
        grid_url = f"{url}/dags/{namespace}/big?runs={args.grid_runs}"
        summary(f"grid {args.grid_runs} runs x {args.grid_tasks} tasks: server", await server_time(grid_url))
        summary(
            "grid: browser first render (navigation -> load)",
            await first_render(page, grid_url, "table.grid tbody tr:last-child td.cell"),
        )
        cells = await page.locator("table.grid td.cell").count()
        print(f"grid cells rendered: {cells}")
    finally:
        await runner.cleanup()


async def bench_live(args: argparse.Namespace, page: Page) -> None:
    with connect_cluster() as cluster:
        namespace = "bench-live"
        cluster.kubectl("create", "namespace", namespace)
        async with await Kube.connect(str(cluster.kubeconfig)) as kube:
            dag = dag_body(namespace, "live", 5)
            dag.pop("status")
            await kube.create_custom(DAGS, namespace, dag)
            run = run_body(namespace, "live", 0, [f"t{i:03d}" for i in range(5)])
            status = run.pop("status")
            created = await kube.create_custom(DAGRUNS, namespace, run)
            await kube.patch_custom_status(DAGRUNS, namespace, created["metadata"]["name"], status)
            app = create_app(kube, UiSettings(namespaces=[namespace]))
            runner, url = await serve(app)
            try:
                while (namespace, created["metadata"]["name"]) not in app[STORE].runs:  # noqa: ASYNC110
                    await asyncio.sleep(0.05)  # the UI lists the run from the apiserver
                await page.goto(f"{url}/dags/{namespace}/live")
                await page.wait_for_selector("body[data-live=on]")
                delays = []
                for index in range(args.changes):
                    state = "failed" if index % 2 == 0 else "success"
                    before = await page.evaluate("document.body.dataset.refreshedAt || '0'")
                    sent = time.time()
                    await kube.patch_custom_status(
                        DAGRUNS,
                        namespace,
                        created["metadata"]["name"],
                        {"taskInstances": {"t004": {"state": state}}},
                    )
                    await page.wait_for_function(
                        """([state, before]) => {
                            const cell = document.querySelector("tr[data-key='t004'] td.cell");
                            return cell && cell.classList.contains('s-' + state)
                                && document.body.dataset.refreshedAt !== before;
                        }""",
                        arg=[state, before],
                    )
                    shown = float(await page.evaluate("document.body.dataset.refreshedAt"))
                    delays.append((shown - sent) * 1000)
                    await asyncio.sleep(0.2)
                summary("live: apiserver status write -> page re-rendered with it", delays)
            finally:
                await runner.cleanup()


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dags", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=25)
    parser.add_argument("--grid-runs", type=int, default=100)
    parser.add_argument("--grid-tasks", type=int, default=200)
    parser.add_argument("--changes", type=int, default=50)
    parser.add_argument("--skip-live", action="store_true", help="Only the render timings (no apiserver).")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()}, cpus: {os.cpu_count()}")
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = await browser.new_page(viewport={"width": 1400, "height": 900})
        page.set_default_timeout(60_000)
        await bench_render(args, page)
        if not args.skip_live:
            await bench_live(args, page)
        await browser.close()
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    asyncio.run(main())
