"""`zonda xcom get RUN TASK [--key K] [--map-index N]`: print one XCom of a task instance as JSON.

Airflow shows XComs in its UI (Admin > XComs, or the task instance's XCom tab); here they are read from
the DagRun's status, and a value the XCom backend stored is read back (its XComChunks, with the same
kubeconfig, or its object storage URL), so what is printed is what a downstream task pulls.
"""

from __future__ import annotations

import json
from typing import Any

import click

from controller.cli.common import connect, namespace_options, namespace_or_default, run_kube
from controller.kube import DAGRUNS
from controller.xcom.backends import XComStore
from zonda.resources.dagrun_models import DagRunStatus
from zonda.resources.models import FINISHED_TI_STATES
from zonda.specs import mapping
from zonda.tries import xcoms


def find_xcom(status: DagRunStatus, run_name: str, task_id: str, key: str, map_index: int) -> Any:
    """The XCom as status holds it (maybe a stored reference); ClickException saying why there is none."""
    instances = mapping.instance_counts(status.task_instances)
    if map_index >= 0 and task_id not in instances:
        raise click.ClickException(f"task {task_id!r} is not mapped: its only map index is -1")
    if map_index < 0 and task_id in instances:
        raise click.ClickException(
            f"task {task_id!r} is mapped: give --map-index (0 to {instances[task_id] - 1})"
        )
    ti = status.task_instances.get(mapping.ti_key(task_id, map_index))
    if ti is None:
        known = ", ".join(sorted(status.task_instances)) or "none yet"
        raise click.ClickException(f"run {run_name} has no task {task_id!r} (its tasks: {known})")
    if key == xcoms.RETURN_KEY and ti.xcom is not None:
        return ti.xcom
    if key != xcoms.RETURN_KEY and key in (ti.xcoms or {}):
        return (ti.xcoms or {})[key]  # a deferred task's are there before it finishes
    if ti.state not in FINISHED_TI_STATES:
        raise click.ClickException(f"task {task_id!r} is {ti.state.value}: its XComs exist once it finishes")
    keys = ([xcoms.RETURN_KEY] if ti.xcom is not None else []) + sorted(ti.xcoms or {})
    raise click.ClickException(
        f"task {task_id!r} ({ti.state.value}) has no XCom {key!r}; its keys: {', '.join(keys) or 'none'}"
    )


@click.group("xcom")
def xcom() -> None:
    """Read the values tasks pass to each other (XComs)."""


@xcom.command("get")
@click.argument("run_name")
@click.argument("task_id")
@click.option("--key", default=xcoms.RETURN_KEY, show_default=True, help="The XCom's key.")
@click.option("--map-index", type=int, default=-1, show_default=True, help="A mapped task's instance.")
@namespace_options
def get(
    run_name: str, task_id: str, key: str, map_index: int, namespace: str | None, kubeconfig: str | None
) -> None:
    """Print the XCom KEY of TASK_ID in RUN_NAME as JSON (values in the XCom backend are read back)."""
    ns = namespace_or_default(namespace)

    async def fetch() -> dict[str, Any]:
        async with await connect(kubeconfig) as kube:
            run = await kube.get_custom(DAGRUNS, ns, run_name)
        if run is None:
            raise click.ClickException(f"DagRun {run_name!r} not found in namespace {ns}")
        return run

    run = run_kube(fetch())
    status = DagRunStatus.model_validate(run.get("status") or {})
    value = find_xcom(status, run_name, task_id, key, map_index)
    try:
        value = XComStore(kubeconfig=kubeconfig).load(value)
    except xcoms.XComError as error:
        raise click.ClickException(str(error)) from error
    click.echo(json.dumps(value, indent=2, ensure_ascii=False))
