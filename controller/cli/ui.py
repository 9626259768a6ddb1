"""`zonda ui` (the web UI) and `zonda dags show` (a DAG drawn by Graphviz, as `airflow dags show`)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import yaml

from controller.cli.common import STATE_DIR, connect, kubeconfig_option, namespace_options, run_kube
from controller.operations import try_logs as task_logs
from controller.processes import logs as zonda_logs


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=int, default=8080, show_default=True)
@click.option("--namespace", "-n", "namespaces", multiple=True, help="Namespace to show (repeatable).")
@click.option("--all-namespaces", "-A", is_flag=True, help="Show every namespace the viewer may list.")
@click.option(
    "--auth",
    type=click.Choice(["kubeconfig", "token", "impersonate"]),
    default="kubeconfig",
    show_default=True,
    help="Who the viewer is: the kubeconfig's user (local), a bearer token, or a proxy's user header.",
)
@click.option("--read-only", is_flag=True, help="Show everything, change nothing.")
@click.option(
    "--state-dir",
    type=click.Path(path_type=Path),
    default=None,
    help="The local executor's state dir, for logs of local tries (default: as `zonda logs` finds it, "
    f"else {STATE_DIR}).",
)
@kubeconfig_option
@click.option("--log-format", type=click.Choice(["text", "json"]), envvar="ZONDA_LOG_FORMAT", default="text")
def ui(
    host: str,
    port: int,
    namespaces: tuple[str, ...],
    all_namespaces: bool,
    auth: str,
    read_only: bool,
    state_dir: Path | None,
    kubeconfig: str | None,
    log_format: str,
) -> None:
    """Serve the web UI: DAGs, grid, graph, runs, logs; trigger, clear, mark and pause as yourself."""
    from controller.processes.deadlines import main_thread_deadline
    from controller.ui.access import AuthMode
    from controller.ui.app_state import UiSettings
    from controller.ui.server import serve
    from zonda.specs import params

    zonda_logs.configure(log_format)
    params.bound_checks(main_thread_deadline)  # a trigger form's conf against a DAG's patterns
    if not namespaces and not all_namespaces:
        namespaces = (os.environ.get("POD_NAMESPACE") or "default",)
    if state_dir is None:
        candidates = task_logs.state_dir_candidates(None, kubeconfig, STATE_DIR)
        state_dir = next((c for c in candidates if c.is_dir()), candidates[-1])
    settings = UiSettings(
        namespaces=None if all_namespaces else list(namespaces),
        auth=AuthMode(auth),
        read_only=read_only,
        state_dir=state_dir,
    )
    click.echo(f"Zonda UI: http://{host}:{port}/dags", err=True)

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await serve(settings, host=host, port=port, kubeconfig=kubeconfig, stop=stop)

    asyncio.run(run())


def _dags_in_file(path: Path) -> list[dict[str, Any]]:
    """The DAG manifests a YAML/JSON file holds, or a Python DAG file renders to (as `zonda dags render`)."""
    if path.suffix == ".py":
        from zonda.authoring import rendering

        report = rendering.render_paths([path], airflow_compat=True, safe_mode=False)
        if report.failed:
            problems = [*report.file_errors.values(), *(e for d in report.dags for e in d.errors)]
            raise click.ClickException(f"{path} does not render: {'; '.join(map(str, problems))}")
        return list(report.manifests)
    return [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict) and d.get("kind") == "DAG"]


def _load_dag(source: str, namespace: str, kubeconfig: str | None) -> dict[str, Any]:
    """A DAG from a file (`FILE` or `FILE:DAG` when it holds several), else the DAG of that name."""
    file_part, _, wanted = source.partition(":") if not Path(source).is_file() else (source, "", "")
    path = Path(file_part)
    if path.is_file():
        found = _dags_in_file(path)
        if wanted:
            found = [d for d in found if d["metadata"]["name"] == wanted]
        if len(found) != 1:
            names = ", ".join(d["metadata"]["name"] for d in _dags_in_file(path)) or "none"
            raise click.ClickException(f"{path} holds DAGs {names}: name one as {path}:DAG")
        dag = found[0]
        dag.setdefault("metadata", {}).setdefault("namespace", namespace)
        return dag

    from controller.kube import DAGS

    async def fetch() -> dict[str, Any] | None:
        async with await connect(kubeconfig) as kube:
            return await kube.get_custom(DAGS, namespace, source)

    fetched: dict[str, Any] | None = run_kube(fetch())
    if fetched is None:
        raise click.ClickException(f"no file {source!r} and no DAG {source!r} in namespace {namespace}")
    return fetched


@click.command("show")
@click.argument("dag")
@click.option("--format", "fmt", type=click.Choice(["dot", "svg", "png"]), default="dot", show_default=True)
@click.option("--output", "-o", type=click.Path(path_type=Path), default=None, help="File (default: stdout).")
@click.option("--run", "run_name", default=None, help="Colour the tasks by this DagRun's states.")
@click.option("--collapse", "collapsed", multiple=True, help="Draw this task group as one node (repeatable).")
@namespace_options
def dags_show(
    dag: str,
    fmt: str,
    output: Path | None,
    run_name: str | None,
    collapsed: tuple[str, ...],
    namespace: str | None,
    kubeconfig: str | None,
) -> None:
    """Draw DAG (a name in the cluster, or a manifest file) as DOT, SVG or PNG (Airflow's `dags show`).

    The DOT is the one the web UI lays out; svg and png are rendered by Graphviz's `dot` program
    (install Graphviz: `apt-get install graphviz`), the engine the UI runs as WebAssembly.
    """
    from controller.ui.graphs import dag_dot

    ns = namespace or os.environ.get("POD_NAMESPACE") or "default"
    body = _load_dag(dag, ns, kubeconfig)
    states = None
    if run_name:
        from controller.kube import DAGRUNS

        async def fetch_run() -> dict[str, Any] | None:
            async with await connect(kubeconfig) as kube:
                return await kube.get_custom(DAGRUNS, ns, run_name)

        run = run_kube(fetch_run())
        if run is None:
            raise click.ClickException(f"DagRun {run_name!r} not found in namespace {ns}")
        tis = (run.get("status") or {}).get("taskInstances") or {}
        states = {task_id: ti.get("state") or "none" for task_id, ti in tis.items()}
    text = dag_dot(body, states=states, collapsed=set(collapsed))
    if fmt == "dot":
        data = text.encode()
    else:
        dot = shutil.which("dot")
        if dot is None:
            raise click.ClickException(
                f"--format {fmt} needs Graphviz's `dot` program (apt-get install graphviz); "
                "--format dot needs nothing"
            )
        result = subprocess.run([dot, f"-T{fmt}"], input=text.encode(), capture_output=True, check=False)
        if result.returncode != 0:
            raise click.ClickException(f"dot failed: {result.stderr.decode(errors='replace')}")
        data = result.stdout
    if output is None:
        sys.stdout.buffer.write(data)
    else:
        output.write_bytes(data)
        click.echo(json.dumps({"written": str(output), "bytes": len(data)}), err=True)


def register(main: click.Group) -> None:
    """Add `ui` and `dags show` to the CLI (`dags show` joins a `dags` group if one exists)."""
    main.add_command(ui)
    dags = main.commands.get("dags")
    if not isinstance(dags, click.Group):
        dags = click.Group("dags", help="Look at DAGs.")
        main.add_command(dags)
    dags.add_command(dags_show)
