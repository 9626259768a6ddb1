"""Airflow's everyday CLI, as tables: `zonda dags list|pause|unpause|next-runs|delete`,
`zonda runs list DAG`, `zonda tasks states RUN`.

Each reads the resources (or merge-patches `spec.paused`) and prints a kubectl-like table; the
upcoming runs come from the same pure code the scheduler uses (`zonda.schedules.upcoming`).
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import click

from controller.cli.common import connect, namespace_options, namespace_or_default, run_kube
from controller.cli.progress import progress_bar
from controller.cli.runs import clock, duration, table
from controller.kube import DAGRUNS, DAGS, Kube
from controller.reconcilers import user_code
from zonda.resources.models import DagSpec, DagStatus
from zonda.schedules import dag_dependencies, dag_plans, scheduling, upcoming
from zonda.specs import mapping


async def _dag(kube: Kube, namespace: str, name: str) -> dict[str, Any]:
    dag = await kube.get_custom(DAGS, namespace, name)
    if dag is None:
        raise click.ClickException(f"DAG {name!r} not found in namespace {namespace}")
    return dag


def dag_rows(dags: list[dict[str, Any]]) -> list[list[str]]:
    rows = []
    for dag in sorted(dags, key=lambda d: d["metadata"]["name"]):
        spec, status = dag.get("spec") or {}, dag.get("status") or {}
        rows.append(
            [
                dag["metadata"]["name"],
                str(spec.get("schedule") or status.get("schedule") or "None"),
                "True" if spec.get("paused") else "False",
                str(status.get("nextRunAfter") or "-"),
                str(status.get("activeRuns", 0)),
                str(status.get("lastRunState") or "-"),
                ",".join(spec.get("tags") or []) or "-",
            ]
        )
    return rows


def run_rows(runs: list[dict[str, Any]]) -> list[list[str]]:
    """Newest first, as Airflow's `dags list-runs`: by logical date, or by run_after for a run without
    one (an Airflow 3 manual run), as Airflow 3 orders runs."""

    def logical(run: dict[str, Any]) -> str:
        return str((run.get("status") or {}).get("logicalDate") or run["spec"].get("logicalDate") or "")

    def run_after(run: dict[str, Any]) -> str:
        return str((run.get("status") or {}).get("runAfter") or run["spec"].get("runAfter") or "")

    rows = []
    for run in sorted(runs, key=lambda r: logical(r) or run_after(r), reverse=True):
        status = run.get("status") or {}
        rows.append(
            [
                run["metadata"]["name"],
                status.get("state") or "queued",
                run["spec"].get("runType", "manual"),
                logical(run) or "-",
                run_after(run) or "-",
                str(status.get("startDate") or "-"),
                str(status.get("endDate") or "-"),
                _triggered_by(run),
            ]
        )
    return rows


def _triggered_by(run: dict[str, Any]) -> str:
    """`run/task` of the TriggerDagRunOperator that created the run, or "-"."""
    parent = dag_dependencies.parent_of(run)
    return f"{parent.run_name}/{parent.task_id}" if parent else "-"


def task_state_rows(run: dict[str, Any]) -> list[list[str]]:
    status = run.get("status") or {}
    order = [t["id"] for t in ((status.get("dagSpec") or {}).get("tasks") or [])]
    tis: dict[str, dict[str, Any]] = status.get("taskInstances") or {}
    position = {task_id: index for index, task_id in enumerate(order)}

    def placed(key: str) -> tuple[int, str, int]:  # the DAG's order, a mapped task's instances by index
        task_id, map_index = mapping.split_key(key)
        return position.get(task_id, len(order)), task_id, map_index

    ids = sorted(tis, key=placed)
    return [
        [
            task_id,
            tis[task_id].get("state") or "none",
            str(tis[task_id].get("tryNumber", 0)),
            clock(tis[task_id].get("startDate")),
            clock(tis[task_id].get("endDate")),
            duration(tis[task_id]),
        ]
        for task_id in ids
    ]


# ------------------------------------------------------------------------------------------- dags


@click.command("list")
@namespace_options
def list_dags(namespace: str | None, kubeconfig: str | None) -> None:
    """List the DAGs (Airflow's `dags list`)."""
    ns = namespace_or_default(namespace)

    async def read() -> list[dict[str, Any]]:
        async with await connect(kubeconfig) as kube:
            return await kube.list_custom(DAGS, ns)

    rows = dag_rows(run_kube(read()))
    header = ["DAG", "SCHEDULE", "PAUSED", "NEXT RUN", "ACTIVE RUNS", "LAST RUN STATE", "TAGS"]
    click.echo(table(header, rows) if rows else f"No DAGs in namespace {ns}.")


def _set_paused(name: str, namespace: str | None, kubeconfig: str | None, *, paused: bool) -> None:
    ns = namespace_or_default(namespace)

    async def patch() -> None:
        async with await connect(kubeconfig) as kube:
            await _dag(kube, ns, name)
            await kube.patch_custom(DAGS, ns, name, {"spec": {"paused": paused}})

    run_kube(patch())
    click.echo(f"dag.zonda.dev/{name} {'paused' if paused else 'unpaused'}")


@click.command("pause")
@click.argument("dag")
@namespace_options
def pause(dag: str, namespace: str | None, kubeconfig: str | None) -> None:
    """Create no more scheduled runs of DAG (Airflow's `dags pause`); a GitOps tool may set it back."""
    _set_paused(dag, namespace, kubeconfig, paused=True)


@click.command("unpause")
@click.argument("dag")
@namespace_options
def unpause(dag: str, namespace: str | None, kubeconfig: str | None) -> None:
    """Schedule DAG again (Airflow's `dags unpause`)."""
    _set_paused(dag, namespace, kubeconfig, paused=False)


@click.command("next-runs")
@click.argument("dag")
@click.option("--count", "-c", "count", type=click.IntRange(min=1), default=5, show_default=True)
@click.option(
    "--timetable-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=user_code.DEFAULT_LIMIT_SECONDS,
    show_default=True,
    help="Seconds the DAG's custom timetable may take to list the runs (as the controller's limit).",
)
@namespace_options
def next_runs(
    dag: str, count: int, timetable_timeout: float, namespace: str | None, kubeconfig: str | None
) -> None:
    """The next logical dates the schedule will run (Airflow's `dags next-execution`)."""
    ns = namespace_or_default(namespace)

    async def read() -> dict[str, Any]:
        async with await connect(kubeconfig) as kube:
            return await _dag(kube, ns, dag)

    body = run_kube(read())
    spec = DagSpec.model_validate(body["spec"])
    status = DagStatus.model_validate(body.get("status") or {})
    runs = upcoming_runs(dag, body["spec"], spec, status, count, timetable_timeout)
    if not runs:
        click.echo(f"{dag} has no scheduled runs ahead (schedule: {spec.schedule or 'None'})")
        return
    rows = [
        [
            run.logical_date.isoformat(),
            f"{run.data_interval.start} .. {run.data_interval.end}",
            run.run_after.isoformat(),
        ]
        for run in runs
    ]
    paused = " (paused: none is created until it is unpaused)" if spec.paused else ""
    click.echo(table(["LOGICAL DATE", "DATA INTERVAL", "RUN AFTER"], rows) + paused)


def upcoming_runs(
    name: str, raw_spec: dict[str, Any], spec: DagSpec, status: DagStatus, count: int, limit: float
) -> list[scheduling.DueRun]:
    """`upcoming.next_runs`; a custom timetable asked in a thread of its own with the time limit (the
    command ends past it, its thread with the process), and one that raises named with its exception."""
    now = datetime.now(UTC)
    class_path = dag_plans.timetable_class(raw_spec)
    if class_path is None:
        return upcoming.next_runs(spec, status, now=now, count=count)
    calls = user_code.BoundedCalls(limit_seconds=limit)
    try:
        return asyncio.run(calls.call(name, lambda: upcoming.next_runs(spec, status, now=now, count=count)))
    except user_code.TimeLimitExceeded as exc:
        failure = dag_plans.TimetableFailure(class_path, exc.limit_seconds, limited_by="this command's")
        consequence = f"no upcoming runs of {name} listed (a larger --timetable-timeout waits longer)"
    except Exception as exc:  # the user's timetable raised
        failure = dag_plans.TimetableFailure.raised(class_path, exc)
        consequence = f"no upcoming runs of {name} listed"
    raise click.ClickException(
        failure.says(consequence).replace("(--timetable-timeout)", "--timetable-timeout")
    )


@click.command("delete")
@click.argument("dag")
@click.option("--yes", "-y", is_flag=True, help="Do not ask.")
@namespace_options
def delete(dag: str, yes: bool, namespace: str | None, kubeconfig: str | None) -> None:
    """Delete DAG and its runs (Airflow's `dags delete`: the DAG's metadata goes with it)."""
    ns = namespace_or_default(namespace)
    if not yes:
        click.confirm(f"Delete DAG {dag} and all its runs in {ns}?", abort=True)

    async def remove() -> int:
        async with await connect(kubeconfig) as kube:
            await _dag(kube, ns, dag)
            await kube.delete_custom(DAGS, ns, dag)  # first: no new run is scheduled meanwhile
            runs = [
                r for r in await kube.list_custom(DAGRUNS, ns) if (r.get("spec") or {}).get("dagName") == dag
            ]
            with progress_bar() as progress:
                bar = progress.add_task(f"deleting the runs of {dag}", total=len(runs))
                for run in runs:
                    await kube.delete_custom(DAGRUNS, ns, run["metadata"]["name"])
                    progress.advance(bar)
            return len(runs)

    count = run_kube(remove())
    click.echo(f"dag.zonda.dev/{dag} deleted with {count} run(s)")


# ------------------------------------------------------------------------------------- runs, tasks


@click.command("list")
@click.argument("dag")
@namespace_options
def list_runs(dag: str, namespace: str | None, kubeconfig: str | None) -> None:
    """List DAG's runs, newest logical date first (Airflow's `dags list-runs`)."""
    ns = namespace_or_default(namespace)

    async def read() -> list[dict[str, Any]]:
        async with await connect(kubeconfig) as kube:
            return [
                r for r in await kube.list_custom(DAGRUNS, ns) if (r.get("spec") or {}).get("dagName") == dag
            ]

    rows = run_rows(run_kube(read()))
    header = ["RUN", "STATE", "RUN TYPE", "LOGICAL DATE", "RUN AFTER", "STARTED", "ENDED", "TRIGGERED BY"]
    click.echo(table(header, rows) if rows else f"No runs of {dag} in namespace {ns}.")


@click.group("tasks")
def tasks() -> None:
    """Inspect task instances."""


@tasks.command("states")
@click.argument("run_name")
@namespace_options
def states(run_name: str, namespace: str | None, kubeconfig: str | None) -> None:
    """Every task instance of RUN and its state (Airflow's `tasks states-for-dag-run`)."""
    ns = namespace_or_default(namespace)

    async def read() -> dict[str, Any] | None:
        async with await connect(kubeconfig) as kube:
            return await kube.get_custom(DAGRUNS, ns, run_name)

    run = run_kube(read())
    if run is None:
        raise click.ClickException(f"DagRun {run_name!r} not found in namespace {ns}")
    rows = task_state_rows(run)
    header = ["TASK", "STATE", "TRY", "STARTED", "ENDED", "DURATION"]
    click.echo(table(header, rows) if rows else f"{run_name} has no task instances yet.")


def register(main: click.Group, dags: click.Group, runs: click.Group) -> None:
    """Add the commands to the CLI's groups (one line in controller/cli/main.py)."""
    for command in (list_dags, pause, unpause, next_runs, delete):
        dags.add_command(command)
    runs.add_command(list_runs)
    main.add_command(tasks)
