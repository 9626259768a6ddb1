"""`zonda pools list|get|set|delete`: Airflow's `airflow pools` commands, on the namespace's `Pool` resources.

Airflow's pool names are Kubernetes names here (`zonda.pools.pool_resource_name`: ``my_pool`` is the
Pool ``my-pool``). `set` creates the Pool or updates its spec only if nobody changed it since it was
read (the resourceVersion travels in the patch: a concurrent edit fails the command instead of being
overwritten). `delete` refuses `default_pool`, as Airflow does. `default_pool` is listed even while no
`default-pool` resource exists: it then has Airflow's 128 slots (the controller's default), and its
occupancy is unknown until one is created (`zonda pools set default_pool N ...`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import click
from pydantic import ValidationError

from controller.cli.common import namespace_or_default, run_kube
from controller.cli.runs import table
from controller.kube import POOLS, AlreadyExists, Conflict, Kube
from zonda import pools
from zonda.models import API_VERSION

DEFAULT_POOL = pools.pool_resource_name(pools.DEFAULT_POOL)
HEADER = [
    "NAME",
    "SLOTS",
    "USED",
    "RUNNING",
    "QUEUED",
    "SCHEDULED",
    "OPEN",
    "DEFERRED",
    "INCLUDE DEFERRED",
    "DESCRIPTION",
]


@dataclass(frozen=True)
class PoolRow:
    """One pool as the CLI and the UI show it: the spec, and the occupancy the controller wrote."""

    name: str
    slots: str
    used: str
    running: str
    queued: str
    scheduled: str
    open: str
    deferred: str
    include_deferred: bool
    description: str
    implicit: bool = False  # default_pool without a resource: Airflow's 128 slots, occupancy unknown

    def cells(self) -> list[str]:
        return [
            self.name,
            self.slots,
            self.used,
            self.running,
            self.queued,
            self.scheduled,
            self.open,
            self.deferred,
            str(self.include_deferred),
            self.description,
        ]


def pool_row(body: Mapping[str, Any]) -> PoolRow:
    """A Pool resource as a row; a status not written yet (or for an older generation) shows "-"."""
    spec, status = body.get("spec") or {}, body.get("status") or {}
    slots = spec.get("slots", 0)
    counted = bool(status) and status.get("observedGeneration") in (None, body["metadata"].get("generation"))

    def number(field: str) -> str:
        if not counted:
            return "-"
        value = status.get(field, 0)
        return "unlimited" if field == "openSlots" and value == pools.UNLIMITED else str(value)

    return PoolRow(
        name=body["metadata"]["name"],
        slots="unlimited" if slots == pools.UNLIMITED else str(slots),
        used=str(status.get("used")) if counted and status.get("used") else "-",
        running=number("runningSlots"),
        queued=number("queuedSlots"),
        scheduled=number("scheduledSlots"),
        open=number("openSlots"),
        deferred=number("deferredSlots"),
        include_deferred=bool(spec.get("includeDeferred", False)),
        description=str(spec.get("description") or ""),
    )


def implicit_default_pool() -> PoolRow:
    """`default_pool` while no `default-pool` resource exists: what the controller admits against."""
    return PoolRow(
        name=DEFAULT_POOL,
        slots=str(pools.DEFAULT_POOL_SLOTS),
        used="-",
        running="-",
        queued="-",
        scheduled="-",
        open="-",
        deferred="-",
        include_deferred=False,
        description="Default pool (no Pool resource: Airflow's 128 slots)",
        implicit=True,
    )


def pool_rows(bodies: Iterable[Mapping[str, Any]]) -> list[PoolRow]:
    """Every pool by name, `default-pool` included even without a resource (Airflow always has it)."""
    rows = {row.name: row for row in map(pool_row, bodies)}
    rows.setdefault(DEFAULT_POOL, implicit_default_pool())
    return [rows[name] for name in sorted(rows)]


def pool_body(name: str, namespace: str, spec: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "Pool",
        "metadata": {"name": name, "namespace": namespace},
        "spec": dict(spec),
    }


def wanted_spec(slots: int, description: str, include_deferred: bool) -> dict[str, Any]:
    """`set`'s whole spec (every field: a patch turns `includeDeferred` off too), checked as the CRD would."""
    spec = {"slots": slots, "description": description, "includeDeferred": include_deferred}
    try:
        pools.PoolSpec.model_validate(spec)
    except ValidationError as exc:
        raise click.BadParameter(str(exc.errors()[0]["msg"]), param_hint="SLOTS") from exc
    return spec


def resource_name(pool: str) -> str:
    """The Pool resource an Airflow pool name means, or a usage error saying why it cannot be one."""
    problem = pools.pool_name_problem(pool)
    if problem is not None:
        raise click.BadParameter(problem, param_hint="NAME")
    return pools.pool_resource_name(pool)


async def write_pool(
    kube: Kube, namespace: str, name: str, current: Mapping[str, Any] | None, spec: Mapping[str, Any]
) -> str:
    """Create the Pool, or patch `current`'s spec with its resourceVersion as a precondition.

    Returns "created", "configured" or "unchanged"; a concurrent creation or edit is a CLI error.
    """
    if current is None:
        try:
            await kube.create_custom(POOLS, namespace, pool_body(name, namespace, spec))
        except AlreadyExists as exc:
            raise click.ClickException(
                f"Pool {name} was created by someone else meanwhile; nothing changed (run again to update it)"
            ) from exc
        return "created"
    if dict(current.get("spec") or {}) == dict(spec):
        return "unchanged"
    version = current["metadata"]["resourceVersion"]
    patch = {"metadata": {"resourceVersion": version}, "spec": dict(spec)}
    try:
        await kube.patch_custom(POOLS, namespace, name, patch)
    except Conflict as exc:
        raise click.ClickException(
            f"Pool {name} changed since it was read (resourceVersion {version}); nothing overwritten: "
            "look at it and run again"
        ) from exc
    return "configured"


def _options(command: Any) -> Any:
    command = click.option("--kubeconfig", envvar="KUBECONFIG", default=None)(command)
    return click.option("--namespace", "-n", default=None)(command)


async def _connect(kubeconfig: str | None) -> Kube:
    return await Kube.connect(kubeconfig, component="zonda-cli")


@click.group("pools")
def pools_group() -> None:
    """Airflow's pools: `Pool` resources of the namespace (Airflow's `pools` commands)."""


@pools_group.command("list")
@_options
def list_pools(namespace: str | None, kubeconfig: str | None) -> None:
    """Every pool with its slots and occupancy (Airflow's `pools list`)."""
    ns = namespace_or_default(namespace)

    async def read() -> list[dict[str, Any]]:
        async with await _connect(kubeconfig) as kube:
            return await kube.list_custom(POOLS, ns)

    click.echo(table(HEADER, [row.cells() for row in pool_rows(run_kube(read()))]))


@pools_group.command("get")
@click.argument("name")
@_options
def get_pool(name: str, namespace: str | None, kubeconfig: str | None) -> None:
    """One pool (Airflow's `pools get`)."""
    ns, resource = namespace_or_default(namespace), resource_name(name)

    async def read() -> dict[str, Any] | None:
        async with await _connect(kubeconfig) as kube:
            return await kube.get_custom(POOLS, ns, resource)

    body = run_kube(read())
    if body is None and resource != DEFAULT_POOL:
        raise click.ClickException(f"Pool {name} does not exist in namespace {ns}")
    row = pool_row(body) if body is not None else implicit_default_pool()
    click.echo(table(HEADER, [row.cells()]))


@pools_group.command("set", context_settings={"ignore_unknown_options": True})  # SLOTS may be -1
@click.argument("name")
@click.argument("slots", type=int)
@click.argument("description")
@click.option("--include-deferred", is_flag=True, help="Deferred task instances hold their slots too.")
@_options
def set_pool(
    name: str,
    slots: int,
    description: str,
    include_deferred: bool,
    namespace: str | None,
    kubeconfig: str | None,
) -> None:
    """Create or update a pool: SLOTS (-1: unlimited), DESCRIPTION (Airflow's `pools set`)."""
    ns, resource = namespace_or_default(namespace), resource_name(name)
    spec = wanted_spec(slots, description, include_deferred)

    async def write() -> str:
        async with await _connect(kubeconfig) as kube:
            current = await kube.get_custom(POOLS, ns, resource)
            return await write_pool(kube, ns, resource, current, spec)

    outcome = run_kube(write())
    click.echo(f"pool.zonda.dev/{resource} {outcome}")


@pools_group.command("delete")
@click.argument("name")
@_options
def delete_pool(name: str, namespace: str | None, kubeconfig: str | None) -> None:
    """Delete a pool (Airflow's `pools delete`); its waiting task instances wait until it exists again."""
    ns, resource = namespace_or_default(namespace), resource_name(name)
    if resource == DEFAULT_POOL:
        raise click.ClickException(f"{pools.DEFAULT_POOL} cannot be deleted")

    async def remove() -> bool:
        async with await _connect(kubeconfig) as kube:
            return await kube.delete_custom(POOLS, ns, resource)

    if not run_kube(remove()):
        raise click.ClickException(f"Pool {name} does not exist in namespace {ns}")
    click.echo(f"pool.zonda.dev/{resource} deleted")
