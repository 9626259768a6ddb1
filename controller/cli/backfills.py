"""`zonda backfill DAG --from --to`: create a Backfill and follow it with a progress bar.

Airflow's `airflow backfill create --dag-id --from-date --to-date` (3.x) and `dags backfill` (2.x).
The controller does the work (`zonda.schedules.backfills`); this command only creates the resource, whose name
is derived from the DAG and the range (the same command twice is refused, never run twice), and then
reads its status until it is completed. Ctrl-C stops following, not the backfill: pause it with
`zonda backfills pause NAME`, cancel what has not started with `kubectl delete backfill NAME`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import click

from controller.cli import progress
from controller.cli.common import connect, namespace_options, namespace_or_default, run_kube
from controller.kube import BACKFILLS, DAGS, AlreadyExists
from zonda.resources.backfill_models import BackfillSpec, BackfillState, ReprocessBehavior
from zonda.resources.models import API_VERSION

_DONE = frozenset({BackfillState.COMPLETED.value, BackfillState.FAILED.value, BackfillState.DRY_RUN.value})


def _date(value: str, option: str) -> datetime:
    try:
        moment = datetime.fromisoformat(value)
    except ValueError as exc:
        raise click.BadParameter(f"not an ISO 8601 date: {value!r}", param_hint=option) from exc
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def backfill_name(dag: str, start: datetime, end: datetime) -> str:
    """`<dag>-<from>-<to>` (dates as YYYYMMDD), cut with a hash when too long: the same range, the
    same name."""
    name = f"{dag}-{start:%Y%m%d}-{end:%Y%m%d}".lower().replace("_", "-")
    if len(name) <= 63:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[:54].rstrip('-')}-{digest}"


def backfill_body(name: str, namespace: str, spec: BackfillSpec) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "Backfill",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec.to_wire(),
    }


@click.command("backfill")
@click.argument("dag")
@click.option("--from", "from_date", required=True, help="First logical date (ISO 8601; UTC when no offset).")
@click.option("--to", "to_date", required=True, help="Last logical date (inclusive).")
@click.option(
    "--reprocess-behavior",
    type=click.Choice([b.value for b in ReprocessBehavior]),
    default=ReprocessBehavior.NONE.value,
    show_default=True,
    help="Which dates that already have a run are run again.",
)
@click.option("--max-active-runs", type=click.IntRange(min=1), default=10, show_default=True)
@click.option("--run-backwards", is_flag=True, help="Newest date first.")
@click.option("--dry-run", is_flag=True, help="List the dates; create no run.")
@click.option("--name", default=None, help="The Backfill's name (default: DAG-FROM-TO).")
@click.option("--no-follow", is_flag=True, help="Create it and return.")
@namespace_options
def backfill(
    dag: str,
    from_date: str,
    to_date: str,
    reprocess_behavior: str,
    max_active_runs: int,
    run_backwards: bool,
    dry_run: bool,
    name: str | None,
    no_follow: bool,
    namespace: str | None,
    kubeconfig: str | None,
) -> None:
    """Run DAG for every logical date from --from to --to (Airflow's backfill)."""
    start, end = _date(from_date, "--from"), _date(to_date, "--to")
    if start > end:
        raise click.BadParameter("--from is after --to", param_hint="--from")
    spec = BackfillSpec(
        dag_name=dag,
        from_date=start,
        to_date=end,
        reprocess_behavior=ReprocessBehavior(reprocess_behavior),
        max_active_runs=max_active_runs,
        run_backwards=run_backwards,
        dry_run=dry_run,
    )
    ns = namespace_or_default(namespace)
    resource = name or backfill_name(dag, start, end)

    async def create() -> None:
        async with await connect(kubeconfig) as kube:
            if await kube.get_custom(DAGS, ns, dag) is None:
                raise click.ClickException(f"DAG {dag!r} not found in namespace {ns}")
            try:
                await kube.create_custom(BACKFILLS, ns, backfill_body(resource, ns, spec))
            except AlreadyExists as exc:
                raise click.ClickException(
                    f"backfill {resource} exists already: follow it with `zonda backfills follow {resource}`"
                ) from exc

    run_kube(create())
    click.echo(f"backfill.zonda.dev/{resource} created")
    if not no_follow:
        _follow(resource, ns, kubeconfig)


@click.group("backfills")
def backfills() -> None:
    """Follow, pause or unpause a Backfill (`kubectl get backfills` lists them)."""


@backfills.command("follow")
@click.argument("name")
@namespace_options
def follow(name: str, namespace: str | None, kubeconfig: str | None) -> None:
    """Show a backfill's progress until it is completed."""
    _follow(name, namespace_or_default(namespace), kubeconfig)


@backfills.command("pause")
@click.argument("name")
@namespace_options
def pause(name: str, namespace: str | None, kubeconfig: str | None) -> None:
    """Create no more runs (those running go on)."""
    _set_paused(name, namespace_or_default(namespace), kubeconfig, paused=True)


@backfills.command("unpause")
@click.argument("name")
@namespace_options
def unpause(name: str, namespace: str | None, kubeconfig: str | None) -> None:
    """Carry on creating runs."""
    _set_paused(name, namespace_or_default(namespace), kubeconfig, paused=False)


def _set_paused(name: str, namespace: str, kubeconfig: str | None, *, paused: bool) -> None:
    async def patch() -> None:
        async with await connect(kubeconfig) as kube:
            await kube.patch_custom(BACKFILLS, namespace, name, {"spec": {"paused": paused}})

    run_kube(patch())
    click.echo(f"backfill.zonda.dev/{name} {'paused' if paused else 'unpaused'}")


def backfill_progress(name: str, body: Mapping[str, Any]) -> progress.Step:
    """How far a backfill is: its finished runs of all it plans (pure)."""
    status = body.get("status") or {}
    return progress.Step(
        finished=int(status.get("succeeded", 0)) + int(status.get("failed", 0)),
        total=status.get("total"),
        description=f"{name}: {status.get('state') or 'pending'}, {status.get('running', 0)} running",
        done=status.get("state") in _DONE,
    )


def _follow(name: str, namespace: str, kubeconfig: str | None, interval: float = 1.0) -> None:
    """A progress bar of finished/total runs, until the backfill is completed (or failed)."""
    try:
        body = progress.follow(
            BACKFILLS,
            namespace,
            name,
            kubeconfig,
            lambda found: backfill_progress(name, found),
            kind="backfill",
            interval=interval,
        )
    except KeyboardInterrupt:
        click.echo(f"stopped following; the backfill goes on (zonda backfills pause {name})", err=True)
        return
    status = body.get("status") or {}
    click.echo(f"{name}: {status.get('state')}: {status.get('message') or ''}")
    if status.get("state") == BackfillState.DRY_RUN.value:
        for moment in status.get("planned") or []:
            click.echo(f"  {moment}")
    if status.get("state") == BackfillState.FAILED.value or int(status.get("failed", 0)):
        raise SystemExit(1)
