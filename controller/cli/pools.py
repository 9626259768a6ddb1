"""`zonda pools list|get|set|delete`: Airflow's `airflow pools` commands, on the namespace's `Pool` resources.

Airflow's pool names are Kubernetes names here (`zonda.resources.pool_models.pool_resource_name`: ``my_pool``
is the
Pool ``my-pool``). `set` creates the Pool or updates its spec only if nobody changed it since it was
read (the resourceVersion travels in the patch: a concurrent edit fails the command instead of being
overwritten). `delete` refuses `default_pool`, as Airflow does. `default_pool` is listed even while no
`default-pool` resource exists: it then has Airflow's 128 slots (the controller's default), and its
occupancy is unknown until one is created (`zonda pools set default_pool N ...`). `import` and
`export` read and write Airflow's `pools export` JSON, so pools move from an Airflow installation.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import click
from pydantic import ValidationError

from controller.cli.common import connect, namespace_options, namespace_or_default, run_kube
from controller.cli.runs import table
from controller.kube import POOLS, AlreadyExists, Conflict, Kube
from controller.operations.pool_rows import DEFAULT_POOL, implicit_default_pool, pool_row, pool_rows
from zonda.resources import pool_models
from zonda.resources.models import API_VERSION

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
        pool_models.PoolSpec.model_validate(spec)
    except ValidationError as exc:
        raise click.BadParameter(str(exc.errors()[0]["msg"]), param_hint="SLOTS") from exc
    return spec


def resource_name(pool: str) -> str:
    """The Pool resource an Airflow pool name means, or a usage error saying why it cannot be one."""
    problem = pool_models.pool_name_problem(pool)
    if problem is not None:
        raise click.BadParameter(problem, param_hint="NAME")
    return pool_models.pool_resource_name(pool)


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


def pools_from_json(text: str) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """Airflow's `pools export` file (``{name: {slots, description, include_deferred}}``) as Pool specs
    by resource name, and the pools that cannot be imported with why (Airflow skips those too)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise click.ClickException(f"Invalid json file: {exc}") from exc
    if not isinstance(data, dict):
        raise click.ClickException("Invalid json file: not an object of pools by name")
    specs: dict[str, dict[str, Any]] = {}
    failed: dict[str, str] = {}
    named: dict[str, str] = {}
    for name, entry in data.items():
        if not isinstance(entry, dict) or "slots" not in entry or "description" not in entry:
            failed[name] = "needs slots and description"
            continue
        problem = pool_models.pool_name_problem(name)
        resource = pool_models.pool_resource_name(name)
        if problem is None and resource in named:
            problem = f"the same Pool ({resource}) as {named[resource]!r}"
        spec = {
            "slots": entry["slots"],
            "description": entry["description"],
            "includeDeferred": entry.get("include_deferred", False),
        }
        try:
            pool_models.PoolSpec.model_validate(spec, strict=True)
        except ValidationError as exc:
            problem = problem or f"{exc.errors()[0]['loc'][0]}: {exc.errors()[0]['msg']}"
        if problem is not None:
            failed[name] = problem
            continue
        named[resource] = name
        specs[resource] = spec
    return specs, failed


def pools_to_json(bodies: Iterable[Mapping[str, Any]]) -> str:
    """The namespace's Pools as Airflow's `pools export` writes them (by resource name)."""
    exported = {
        body["metadata"]["name"]: {
            "slots": (body.get("spec") or {}).get("slots", 0),
            "description": (body.get("spec") or {}).get("description", ""),
            "include_deferred": bool((body.get("spec") or {}).get("includeDeferred", False)),
        }
        for body in sorted(bodies, key=lambda b: str(b["metadata"]["name"]))
    }
    return json.dumps(exported, indent=4)


@click.group("pools")
def pools_group() -> None:
    """Airflow's pools: `Pool` resources of the namespace (Airflow's `pools` commands)."""


@pools_group.command("list")
@namespace_options
def list_pools(namespace: str | None, kubeconfig: str | None) -> None:
    """Every pool with its slots and occupancy (Airflow's `pools list`)."""
    ns = namespace_or_default(namespace)

    async def read() -> list[dict[str, Any]]:
        async with await connect(kubeconfig) as kube:
            return await kube.list_custom(POOLS, ns)

    click.echo(table(HEADER, [row.cells() for row in pool_rows(run_kube(read()))]))


@pools_group.command("get")
@click.argument("name")
@namespace_options
def get_pool(name: str, namespace: str | None, kubeconfig: str | None) -> None:
    """One pool (Airflow's `pools get`)."""
    ns, resource = namespace_or_default(namespace), resource_name(name)

    async def read() -> dict[str, Any] | None:
        async with await connect(kubeconfig) as kube:
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
@namespace_options
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
        async with await connect(kubeconfig) as kube:
            current = await kube.get_custom(POOLS, ns, resource)
            return await write_pool(kube, ns, resource, current, spec)

    outcome = run_kube(write())
    click.echo(f"pool.zonda.dev/{resource} {outcome}")


@pools_group.command("delete")
@click.argument("name")
@namespace_options
def delete_pool(name: str, namespace: str | None, kubeconfig: str | None) -> None:
    """Delete a pool (Airflow's `pools delete`); its waiting task instances wait until it exists again."""
    ns, resource = namespace_or_default(namespace), resource_name(name)
    if resource == DEFAULT_POOL:
        raise click.ClickException(f"{pool_models.DEFAULT_POOL} cannot be deleted")

    async def remove() -> bool:
        async with await connect(kubeconfig) as kube:
            return await kube.delete_custom(POOLS, ns, resource)

    if not run_kube(remove()):
        raise click.ClickException(f"Pool {name} does not exist in namespace {ns}")
    click.echo(f"pool.zonda.dev/{resource} deleted")


@pools_group.command("import")
@click.argument("filepath", type=click.File("r"))
@namespace_options
def import_pools(filepath: Any, namespace: str | None, kubeconfig: str | None) -> None:
    """Create or update the pools of FILEPATH, Airflow's `pools export` JSON (Airflow's `pools import`)."""
    ns = namespace_or_default(namespace)
    specs, failed = pools_from_json(filepath.read())

    async def write() -> int:
        uploaded = 0
        async with await connect(kubeconfig) as kube:
            for name, spec in specs.items():
                try:
                    await write_pool(kube, ns, name, await kube.get_custom(POOLS, ns, name), spec)
                    uploaded += 1
                except click.ClickException as exc:
                    failed[name] = exc.message
        return uploaded

    click.echo(f"Uploaded {run_kube(write())} pool(s)")
    if failed:
        reasons = ", ".join(f"{name} ({why})" for name, why in failed.items())
        raise click.ClickException(f"Failed to update pool(s): {reasons}")


@pools_group.command("export")
@click.argument("filepath", type=click.File("w"))
@namespace_options
def export_pools(filepath: Any, namespace: str | None, kubeconfig: str | None) -> None:
    """Write the namespace's pools to FILEPATH ("-": standard output) as Airflow's `pools export` does."""
    ns = namespace_or_default(namespace)

    async def read() -> list[dict[str, Any]]:
        async with await connect(kubeconfig) as kube:
            return await kube.list_custom(POOLS, ns)

    bodies = run_kube(read())
    filepath.write(pools_to_json(bodies) + "\n")
    if filepath.name != "<stdout>":
        click.echo(f"Exported {len(bodies)} pool(s) to {filepath.name}")
