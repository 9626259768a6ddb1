"""`zonda trigger --wait`: follow a run to its end with a progress bar of its task instances.

Argo's `argo submit --wait`; Airflow 2's `dags trigger` returns at once (and `dags test` runs the
DAG in the CLI's process instead). The run goes on whatever happens here: Ctrl-C stops following.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import click

from controller.cli import progress
from controller.kube import DAGRUNS
from zonda.resources.models import FINISHED_TI_STATES, DagRunState, TaskInstanceState
from zonda.resources.states import FINISHED_RUN_STATES


def run_progress(name: str, run: Mapping[str, Any]) -> progress.Step:
    """How far a DagRun is, from its status alone (pure)."""
    status = run.get("status") or {}
    tis: Mapping[str, Any] = status.get("taskInstances") or {}
    tasks = (status.get("dagSpec") or {}).get("tasks")
    total = max(len(tis), len(tasks)) if tasks is not None else None
    states = [str(ti.get("state") or TaskInstanceState.NONE.value) for ti in tis.values()]
    running = sum(1 for s in states if s == TaskInstanceState.RUNNING.value)
    state = status.get("state") or "queued"
    return progress.Step(
        finished=sum(1 for s in states if s in FINISHED_TI_STATES),
        total=total,
        description=f"{name}: {state}, {running} running",
        done=state in FINISHED_RUN_STATES,
    )


def follow_run(name: str, namespace: str, kubeconfig: str | None, interval: float = 1.0) -> None:
    """Show the run's progress until it finishes; exit 1 when it failed."""
    try:
        run = progress.follow(
            DAGRUNS,
            namespace,
            name,
            kubeconfig,
            lambda body: run_progress(name, body),
            kind="DagRun",
            interval=interval,
        )
    except KeyboardInterrupt:
        click.echo(f"stopped following; the run goes on (zonda runs describe {name})", err=True)
        return
    status = run.get("status") or {}
    click.echo(
        f"dagrun.zonda.dev/{name} {status.get('state')}"
        + (f": {status['message']}" if status.get("message") else "")
    )
    if status.get("state") != DagRunState.SUCCESS.value:
        raise SystemExit(1)
