"""`zonda runs describe RUN`: a run's story as tables: the run, its task instances, its Events in order.

`kubectl describe dagrun` prints the status as nested YAML and Events sorted by kubectl's own rules;
this reads the same objects and prints one row per task instance (state, try, times, duration,
where it ran, why) and the Events oldest first, by their most precise time.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any
from urllib.parse import quote

import click

from controller.cli.common import connect, namespace_options, namespace_or_default, run_kube
from controller.kube import DAGRUNS
from zonda.resources.wire import parse_time


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Columns padded like kubectl's; the last column is never padded."""
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    lines = []
    for row in [header, *rows]:
        cells = [str(cell).ljust(width) for cell, width in zip(row[:-1], widths, strict=False)]
        lines.append("   ".join([*cells, str(row[-1])]).rstrip())
    return "\n".join(lines)


def _parse(value: Any) -> datetime | None:
    return parse_time(value)


def clock(value: Any) -> str:
    """A time of day with milliseconds (the date is in the run's header), or '-'."""
    moment = _parse(value)
    return moment.strftime("%H:%M:%S.%f")[:-3] if moment else "-"


def duration(ti: dict[str, Any]) -> str:
    if ti.get("durationSeconds") is not None:
        return f"{float(ti['durationSeconds']):.2f}s"
    start, end = _parse(ti.get("startDate")), _parse(ti.get("endDate"))
    return f"{(end - start).total_seconds():.2f}s" if start and end else "-"


def event_sort_key(event: dict[str, Any]) -> tuple[str, str, int]:
    """Oldest first by the most precise time an Event has (eventTime has microseconds), then by
    creation, then by resourceVersion (etcd's revision: creation order among equal times)."""
    series = (event.get("series") or {}).get("lastObservedTime")
    when = event.get("eventTime") or series or event.get("firstTimestamp") or event.get("lastTimestamp")
    created = event["metadata"].get("creationTimestamp") or ""
    moment = _parse(when or created)
    version = event["metadata"].get("resourceVersion") or "0"
    return (moment.isoformat() if moment else "", created, int(version) if version.isdigit() else 0)


def task_rows(status: dict[str, Any], task_order: Sequence[str]) -> list[list[str]]:
    tis: dict[str, dict[str, Any]] = status.get("taskInstances") or {}
    order = [t for t in task_order if t in tis] + sorted(t for t in tis if t not in task_order)
    rows = []
    for task_id in order:
        ti = tis[task_id]
        tries = f"{ti.get('tryNumber', 0)}/{ti['maxTries'] + 1}" if ti.get("maxTries") is not None else "-"
        rows.append(
            [
                task_id,
                ti.get("state", "none"),
                str(ti.get("tryNumber", 0)) if tries == "-" else tries,
                clock(ti.get("queuedAt")),
                clock(ti.get("startDate")),
                clock(ti.get("endDate")),
                duration(ti),
                ti.get("podName") or "-",
                ti.get("reason") or ti.get("message") or "",
            ]
        )
    return rows


def describe_text(run: dict[str, Any], events: list[dict[str, Any]]) -> str:
    """The whole story of one run, as printed (pure: the caller fetched the run and its Events)."""
    spec, status = run["spec"], run.get("status") or {}
    dag_tasks = [t["id"] for t in ((status.get("dagSpec") or {}).get("tasks") or [])]
    fields = [
        ("Run", f"{run['metadata']['name']} ({spec.get('runType', 'manual')} run of {spec['dagName']})"),
        (
            "State",
            (status.get("state") or "not started")
            + (f": {status['message']}" if status.get("message") else ""),
        ),
        # Airflow's run id, what the run's tries see as run_id (the Run line has the object's name)
        ("Run ID", status.get("runId") or "-"),
        ("Logical date", _logical_date(spec, status)),
        ("Run after", status.get("runAfter") or spec.get("runAfter") or "-"),
        ("Data interval", f"{status.get('dataIntervalStart', '-')} .. {status.get('dataIntervalEnd', '-')}"),
        (
            "Times",
            f"queued {clock(status.get('queuedAt'))}, started {clock(status.get('startDate'))}, "
            f"ended {clock(status.get('endDate'))}",
        ),
    ]
    header = [f"{name + ':':<15}{value}" for name, value in fields]
    tasks = task_rows(status, dag_tasks)
    parts = ["\n".join(header), ""]
    parts.append(
        table(["TASK", "STATE", "TRY", "QUEUED", "STARTED", "ENDED", "DURATION", "ATTEMPT", "REASON"], tasks)
        if tasks
        else "(no task instances yet)"
    )
    parts.append("")
    ordered = sorted(events, key=event_sort_key)
    rows = []
    for event in ordered:
        when = (
            event.get("eventTime")
            or event.get("firstTimestamp")
            or event["metadata"].get("creationTimestamp")
        )
        count = event.get("count") or (event.get("series") or {}).get("count") or 1
        message = event.get("message") or event.get("note") or ""
        rows.append(
            [
                clock(when),
                event.get("type", ""),
                event.get("reason", ""),
                f"{message} (x{count})" if count > 1 else message,
            ]
        )
    parts.append(f"Events ({len(rows)}, oldest first):")
    parts.append(table(["TIME", "TYPE", "REASON", "MESSAGE"], rows) if rows else "(none)")
    return "\n".join(parts)


@click.group("runs")
def runs() -> None:
    """Inspect DAG runs."""


@runs.command("describe")
@click.argument("run_name")
@namespace_options
def describe(run_name: str, namespace: str | None, kubeconfig: str | None) -> None:
    """Print a run's story: its task instances (states, tries, times) and its Events in order."""
    ns = namespace_or_default(namespace)

    async def fetch() -> tuple[dict[str, Any], list[dict[str, Any]]]:
        async with await connect(kubeconfig) as kube:
            run = await kube.get_custom(DAGRUNS, ns, run_name)
            if run is None:
                raise click.ClickException(f"DagRun {run_name!r} not found in namespace {ns}")
            selector = quote(f"involvedObject.uid={run['metadata']['uid']}")
            listed = await kube.get_path(f"/api/v1/namespaces/{ns}/events?fieldSelector={selector}")
            return run, list((listed or {}).get("items") or [])

    run, events = run_kube(fetch())
    click.echo(describe_text(run, events))


def _logical_date(spec: dict[str, Any], status: dict[str, Any]) -> str:
    """The run's logical date; a started run without one says so (an Airflow 3 manual run)."""
    given = status.get("logicalDate") or spec.get("logicalDate")
    if given:
        return str(given)
    return "none (an Airflow 3 manual run)" if status.get("dagSpec") is not None else "-"
