"""`zonda assets list|events|create-event`: Airflow's assets (`airflow assets list`, the UI's asset
events, 3.x's `POST /assets/events`) on the namespace's `Asset` and `AssetEvent` resources.

`create-event` is what a system outside Zonda does to say an asset changed: it creates an
`AssetEvent` (named from the URI and the time, so a retried command within the same microsecond is
refused rather than recorded twice); the controller then runs the DAGs scheduled on it.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import click
from pydantic import ValidationError

from controller.cli.common import connect, namespace_options, namespace_or_default, run_kube
from controller.cli.runs import table
from zonda.resources.asset_models import (
    ASSETEVENTS,
    ASSETS,
    AssetEventSpec,
    asset_event_name,
    event_from_body,
    sanitize_uri,
)
from zonda.resources.models import API_VERSION


@click.group("assets")
def assets_group() -> None:
    """Assets (Airflow's Datasets) and their events, as Asset and AssetEvent resources."""


@assets_group.command("list")
@namespace_options
def list_assets(namespace: str | None, kubeconfig: str | None) -> None:
    """Every asset: its URI, last event, producing and consuming DAGs."""

    async def read() -> list[dict[str, Any]]:
        async with await connect(kubeconfig) as kube:
            return await kube.list_custom(ASSETS, namespace_or_default(namespace))

    rows = []
    for body in sorted(run_kube(read()), key=lambda b: b["spec"].get("uri", "")):
        status = body.get("status") or {}
        rows.append(
            [
                body["spec"].get("uri", ""),
                status.get("lastEventTime") or "-",
                str(status.get("events", 0)),
                ",".join(status.get("producingDags") or []) or "-",
                ",".join(status.get("consumingDags") or []) or "-",
            ]
        )
    click.echo(table(["URI", "LAST EVENT", "EVENTS", "PRODUCING DAGS", "CONSUMING DAGS"], rows))


@assets_group.command("events")
@click.option("--uri", default=None, help="Only this asset's events.")
@namespace_options
def list_events(uri: str | None, namespace: str | None, kubeconfig: str | None) -> None:
    """Asset events, oldest first: asset, time, source run and task, extra."""

    async def read() -> list[dict[str, Any]]:
        async with await connect(kubeconfig) as kube:
            return await kube.list_custom(ASSETEVENTS, namespace_or_default(namespace))

    wanted = _uri(uri) if uri else None
    events = [e for e in map(event_from_body, run_kube(read())) if e is not None]
    rows = [
        [
            e.name,
            e.uri,
            e.timestamp.isoformat(),
            e.source_run or "-",
            e.source_task or "-",
            json.dumps(e.extra),
        ]
        for e in sorted(events, key=lambda e: (e.timestamp, e.name))
        if wanted is None or e.uri == wanted
    ]
    click.echo(table(["NAME", "URI", "TIME", "SOURCE RUN", "SOURCE TASK", "EXTRA"], rows))


@assets_group.command("create-event")
@click.argument("uri")
@click.option("--extra", default="{}", help="The event's extra, a JSON object.")
@namespace_options
def create_event(uri: str, extra: str, namespace: str | None, kubeconfig: str | None) -> None:
    """Record that URI was updated (Airflow 3's POST /assets/events): its consumers run."""
    try:
        extra_value = json.loads(extra)
    except json.JSONDecodeError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint="--extra") from exc
    now = datetime.now(UTC)
    try:
        spec = AssetEventSpec(uri=_uri(uri), extra=extra_value, timestamp=now)
    except ValidationError as exc:
        raise click.BadParameter(str(exc.errors()[0]["msg"]), param_hint="--extra") from exc
    ns = namespace_or_default(namespace)
    name = asset_event_name("cli", "create-event", -1, 0, f"{spec.uri}@{now.isoformat()}")
    body = {
        "apiVersion": API_VERSION,
        "kind": "AssetEvent",
        "metadata": {"name": name, "namespace": ns},
        "spec": spec.to_wire(),
    }

    async def create() -> None:
        async with await connect(kubeconfig) as kube:
            await kube.create_custom(ASSETEVENTS, ns, body)

    run_kube(create())
    click.echo(f"assetevent.zonda.dev/{name} created")


def _uri(uri: str) -> str:
    try:
        return sanitize_uri(uri)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="URI") from exc
