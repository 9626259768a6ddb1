"""`zonda logs RUN TASK`: a task instance's log, wherever the controller's executor wrote it.

The Kubernetes executor's log is its pod's; the local executor's is a file in the controller's state
dir, `<state dir>/<run uid>/<attempt>/log`. The state dir is looked for, in order, in `--state-dir`,
`$ZONDA_STATE_DIR`, the current kubeconfig context (`zonda up` records its own there), and the
default `~/.local/state/zonda`. The command says which tries have a log, and where it looked when
it finds none; a task that never ran is reported as such, not as a missing log.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from controller.cli.common import STATE_DIR, connect, kubeconfig_option, namespace_or_default, run_kube
from controller.kube import DAGRUNS
from controller.operations.try_logs import (
    TryLogs,
    deleted_pods_note,
    local_tries,
    never_ran_message,
    pod_tries,
    state_dir_candidates,
)
from zonda.resources.wire import (
    LABEL_DAGRUN_UID,
)
from zonda.specs import mapping


@click.command("logs")
@click.argument("run_name")
@click.argument("task_id")
@click.option("--try", "try_number", type=int, default=None, help="Try number (default: the latest).")
@click.option("--map-index", type=int, default=-1, show_default=True, help="A mapped task's instance.")
@click.option("--namespace", "-n", default=None)
@click.option(
    "--state-dir",
    type=click.Path(path_type=Path),
    default=None,
    help="The local executor's state dir (default: found from $ZONDA_STATE_DIR, the kubeconfig, "
    f"{STATE_DIR}).",
)
@kubeconfig_option
def logs(
    run_name: str,
    task_id: str,
    try_number: int | None,
    map_index: int,
    namespace: str | None,
    state_dir: Path | None,
    kubeconfig: str | None,
) -> None:
    """Print a task instance's log (its pod's, or the local executor's file); a mapped task's instance
    by --map-index (or as TASK_ID[i])."""
    ns = namespace_or_default(namespace)
    if map_index >= 0:
        task_id = mapping.ti_key(task_id, map_index)

    async def fetch() -> tuple[dict[int, TryLogs], dict[str, Any] | None, list[str], str | None]:
        async with await connect(kubeconfig) as kube:
            run = await kube.get_custom(DAGRUNS, ns, run_name)
            if run is None:
                raise click.ClickException(f"DagRun {run_name!r} not found in namespace {ns}")
            uid = run["metadata"]["uid"]
            ti = ((run.get("status") or {}).get("taskInstances") or {}).get(task_id)
            tries: dict[int, TryLogs] = {}
            looked: list[str] = []
            for candidate in state_dir_candidates(state_dir, kubeconfig, STATE_DIR):
                looked.append(f"{candidate / uid} (local executor)")
                for number, found in local_tries(candidate / uid, task_id).items():
                    tries.setdefault(number, TryLogs()).parts.extend(found.parts)
                    tries[number].sources.extend(found.sources)
            looked.append(f"pods labelled {LABEL_DAGRUN_UID}={uid} in {ns} (Kubernetes executor)")
            for number, found in (await pod_tries(kube, ns, uid, task_id)).items():
                tries.setdefault(number, TryLogs()).parts.extend(found.parts)
                tries[number].sources.extend(found.sources)
            return tries, ti, looked, deleted_pods_note(run)

    tries, ti, looked, deleted_note = run_kube(fetch())
    if not tries and (never := never_ran_message(run_name, task_id, ti)):
        raise click.ClickException(never)
    wanted = try_number or (ti or {}).get("tryNumber") or max(tries, default=1)
    have = ", ".join(str(n) for n in sorted(tries)) or "none"
    if wanted not in tries:
        why = f"; {deleted_note}" if deleted_note else ""
        raise click.ClickException(
            f"no log for try {wanted} of {task_id} in {run_name} (tries with a log: {have}){why}; "
            "looked in:\n  " + "\n  ".join(looked)
        )
    click.echo(
        f"# {task_id} try {wanted} of {run_name} (tries with a log: {have}) "
        f"from {', '.join(tries[wanted].sources)}",
        err=True,
    )
    click.echo("".join(tries[wanted].parts), nl=False)
