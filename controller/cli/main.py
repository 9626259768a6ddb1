"""`zonda` (also `kubectl zonda`): run the controller and the triggerer, and operate DAG runs.

zonda up                       the main job on a local control plane (see the README)
zonda controller / triggerer   the two long-running components (what the Helm chart runs)
zonda trigger DAG              start a manual run
zonda clear RUN / mark RUN TASK STATE / logs RUN TASK / runs describe RUN
zonda pools list|get|set|delete|import|export  Airflow's pools, as Pool resources
zonda assets list|events|create-event  Airflow's assets (Datasets) and their events
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import signal
import socket
import sys
from pathlib import Path

import click

from controller.cli import assets as assets_commands
from controller.cli import backfills as backfill_commands
from controller.cli import dags as dags_commands
from controller.cli import listings
from controller.cli import logs as logs_commands
from controller.cli import operate as operate_commands
from controller.cli import pools as pools_commands
from controller.cli import runs as runs_commands
from controller.cli import tasks as tasks_commands
from controller.cli import ui as ui_cli
from controller.cli import xcom as xcom_commands
from controller.cli.common import kubeconfig_option, namespace_or_default
from controller.kube import Kube
from controller.manager.settings import DEFAULTS
from controller.processes import logs as zonda_logs
from controller.triggerer.settings import DEFAULTS as TRIGGERER
from controller.triggerer.settings import TriggererSettings


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="zonda")
def main() -> None:
    """Zonda: Airflow-style DAG orchestration, native to Kubernetes."""


# ------------------------------------------------------------------------------- components


@main.command()
@click.option("--namespace", "-n", "namespaces", multiple=True, help="Namespace to watch (repeatable).")
@click.option("--all-namespaces", "-A", is_flag=True, help="Watch every namespace (cluster-wide).")
@click.option(
    "--executor", type=click.Choice(["kubernetes", "local"]), default=DEFAULTS.executor, show_default=True
)
@click.option(
    "--state-dir",
    type=click.Path(path_type=Path),
    default=DEFAULTS.state_dir,
    show_default=True,
    help="Local executor: where tries keep their logs and results ($ZONDA_STATE_DIR).",
)
@click.option(
    "--parallelism",
    type=int,
    default=DEFAULTS.parallelism,
    show_default=True,
    help="Local executor: tries at once.",
)
@click.option("--workers", type=int, default=DEFAULTS.workers, show_default=True, help="Reconciles at once.")
@click.option(
    "--event-fold-seconds",
    type=float,
    default=DEFAULTS.event_fold_seconds,
    show_default=True,
    help="Seconds at most a run's task outcomes wait to share one Event; its next warning or end "
    "posts them sooner (0: an Event per pass).",
)
@click.option(
    "--timetable-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=DEFAULTS.timetable_timeout,
    show_default=True,
    help="Seconds a DAG's custom timetable may take in each call the controller makes (a DAG pass, a "
    "run's start or LatestOnly window, a Backfill's dates); past it that object is reported "
    "(TimetableTimeout) and the others go on.",
)
@click.option(
    "--trigger-shards",
    type=int,
    default=DEFAULTS.trigger_shards,
    show_default=True,
    help="Must equal the triggerer's --shards ($ZONDA_TRIGGER_SHARDS).",
)
@click.option(
    "--pod-pending-timeout",
    type=float,
    default=DEFAULTS.pod_pending_timeout,
    show_default=True,
    help="Seconds a task pod may stay Pending (e.g. ErrImagePull) before its try fails; 0: never.",
)
@click.option(
    "--max-map-length",
    type=click.IntRange(min=1),
    envvar="ZONDA_MAX_MAP_LENGTH",
    default=DEFAULTS.max_map_length,
    show_default=True,
    help="Most task instances a mapped task may expand to (Airflow's [core] max_map_length).",
)
@click.option(
    "--status-budget-bytes",
    type=click.IntRange(min=1),
    envvar="ZONDA_STATUS_BUDGET_BYTES",
    default=DEFAULTS.status_budget_bytes,
    show_default=True,
    help="A mapped task that would take its run's status past this size fails (the apiserver refuses "
    "objects over 1.5 MiB).",
)
@click.option(
    "--inline-task-instances",
    type=click.IntRange(min=0),
    envvar="ZONDA_INLINE_TASK_INSTANCES",
    default=DEFAULTS.inline_task_instances,
    show_default=True,
    help="Task instances a run keeps in its own status; a bigger run's are stored in DagRunShard "
    "objects it owns, 256 to a shard.",
)
@click.option(
    "--task-image", envvar="ZONDA_TASK_IMAGE", default=DEFAULTS.pod_defaults.image, show_default=True
)
@click.option("--task-service-account", envvar="ZONDA_TASK_SERVICE_ACCOUNT", default=None)
@click.option("--task-resources", envvar="ZONDA_TASK_RESOURCES", default=None, help="JSON resources.")
@click.option(
    "--task-node-selector",
    envvar="ZONDA_TASK_NODE_SELECTOR",
    default=None,
    help='JSON nodeSelector of task pods, e.g. {"zonda.dev/node": "real"} (a task\'s podOverride wins).',
)
@click.option("--metrics-port", type=int, default=DEFAULTS.metrics_port)
@click.option("--health-port", type=int, default=DEFAULTS.health_port)
@click.option(
    "--shards",
    type=click.IntRange(min=1),
    envvar="ZONDA_CONTROLLER_SHARDS",
    default=DEFAULTS.shards,
    show_default=True,
    help="Split DAGs (with their runs and Backfills) over this many shard Leases, each held by one "
    "replica: every replica acts, for its shards (above 1, --peering is not used).",
)
@click.option(
    "--peering",
    "leader_lease",
    default=None,
    help="Name of the Lease for leader election between replicas (off when absent).",
)
@click.option(
    "--peering-lease-duration",
    "leader_lease_duration",
    type=float,
    default=DEFAULTS.leader_lease_duration,
    show_default=True,
    help="Seconds a standby replica waits after the leader's last renewal before it takes over (with "
    "--shards: a shard's Lease, before another replica takes the shard).",
)
@click.option("--kubeconfig", envvar="KUBECONFIG", default=DEFAULTS.kubeconfig)
@click.option("--log-format", type=click.Choice(["text", "json"]), envvar="ZONDA_LOG_FORMAT", default="text")
def controller(
    namespaces: tuple[str, ...],
    all_namespaces: bool,
    executor: str,
    state_dir: Path,
    parallelism: int,
    workers: int,
    event_fold_seconds: float,
    timetable_timeout: float,
    trigger_shards: int,
    pod_pending_timeout: float,
    max_map_length: int,
    status_budget_bytes: int,
    inline_task_instances: int,
    task_image: str,
    task_service_account: str | None,
    task_resources: str | None,
    task_node_selector: str | None,
    metrics_port: int | None,
    health_port: int | None,
    shards: int,
    leader_lease: str | None,
    leader_lease_duration: float,
    kubeconfig: str | None,
    log_format: str,
) -> None:
    """Run the controller: schedule DAGs, run task instances, move them through Airflow's states."""
    from controller.manager.main import run_controller
    from controller.processes.deadlines import any_thread_deadline, main_thread_deadline
    from zonda.specs import params, priority_strategies

    zonda_logs.configure(log_format)
    params.bound_checks(main_thread_deadline)  # a run's conf against a DAG's patterns: docs/security.md
    priority_strategies.bound_calls(any_thread_deadline)  # a custom strategy's get_weight, in any thread
    if not namespaces and not all_namespaces:
        namespaces = (namespace_or_default(None),)
    patterns = [n for n in namespaces if any(c in n for c in "*?[!")]
    if patterns:  # kopf would expand them; the DagRun and pod watches (controller.kube.follow) do not
        raise click.BadParameter(
            f"exact names only, not patterns: {', '.join(patterns)}", param_hint="--namespace"
        )
    settings = dataclasses.replace(
        DEFAULTS,
        namespaces=() if all_namespaces else tuple(namespaces),
        executor=executor,
        state_dir=state_dir,
        parallelism=parallelism,
        workers=workers,
        event_fold_seconds=event_fold_seconds,
        timetable_timeout=timetable_timeout,
        trigger_shards=trigger_shards,
        pod_pending_timeout=pod_pending_timeout,
        max_map_length=max_map_length,
        status_budget_bytes=status_budget_bytes,
        inline_task_instances=inline_task_instances,
        pod_defaults=dataclasses.replace(
            DEFAULTS.pod_defaults,
            image=task_image,
            service_account=task_service_account,
            resources=json.loads(task_resources) if task_resources else {},
            node_selector=_node_selector(task_node_selector),
        ),
        metrics_port=metrics_port,
        health_port=health_port,
        shards=shards,
        leader_election=leader_lease is not None,
        leader_lease=leader_lease or DEFAULTS.leader_lease,
        leader_lease_duration=leader_lease_duration,
        kubeconfig=kubeconfig,
    )
    run_controller(settings)


def _node_selector(text: str | None) -> dict[str, str]:
    """--task-node-selector's JSON object of label strings; anything else is a usage error."""
    if not text:
        return {}
    try:
        selector = json.loads(text)
    except ValueError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint="--task-node-selector") from exc
    if not isinstance(selector, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in selector.items()
    ):
        raise click.BadParameter("must be a JSON object of strings", param_hint="--task-node-selector")
    return selector


@main.command()
@click.option(
    "--namespace", "-n", "namespaces", multiple=True, help="Namespace whose Triggers to run (repeatable)."
)
@click.option("--all-namespaces", "-A", is_flag=True, help="Run the Triggers of every namespace.")
@click.option("--lease-namespace", default=None, help="Where the shard Leases live (default: $POD_NAMESPACE)")
@click.option(
    "--shards", type=int, default=DEFAULTS.trigger_shards, show_default=True, help="$ZONDA_TRIGGER_SHARDS"
)
@click.option(
    "--capacity",
    type=int,
    default=TRIGGERER.capacity,
    show_default=True,
    help="Triggers per replica at most.",
)
@click.option("--identity", default=None, help="Replica identity (default: pod name or host-pid).")
@click.option("--lease-duration", type=float, default=TRIGGERER.lease_duration, show_default=True)
@click.option("--renew-every", type=float, default=TRIGGERER.renew_every, show_default=True)
@click.option("--metrics-port", type=int, default=None)
@click.option("--health-port", type=int, default=None)
@kubeconfig_option
@click.option("--log-format", type=click.Choice(["text", "json"]), envvar="ZONDA_LOG_FORMAT", default="text")
def triggerer(
    namespaces: tuple[str, ...],
    all_namespaces: bool,
    lease_namespace: str | None,
    shards: int,
    capacity: int,
    identity: str | None,
    lease_duration: float,
    renew_every: float,
    metrics_port: int | None,
    health_port: int | None,
    kubeconfig: str | None,
    log_format: str,
) -> None:
    """Run a triggerer replica: the deferred tasks' asyncio triggers, sharded by Leases."""
    from controller.triggerer.runtime import run_triggerer

    zonda_logs.configure(log_format)
    settings = TriggererSettings(
        namespace=lease_namespace or os.environ.get("POD_NAMESPACE") or (namespaces or ("default",))[0],
        identity=identity or os.environ.get("POD_NAME") or f"{socket.gethostname()}-{os.getpid()}",
        watch_namespaces=[] if all_namespaces else list(namespaces or (namespace_or_default(None),)),
        shards=shards,
        capacity=capacity,
        lease_duration=lease_duration,
        renew_every=renew_every,
        health_port=health_port,
        metrics_port=metrics_port,
    )

    async def serve() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        async with await Kube.connect(kubeconfig, component="zonda-triggerer") as kube:
            await run_triggerer(kube, settings, stop=stop)

    asyncio.run(serve())


@main.command("run-task", context_settings={"ignore_unknown_options": True})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def run_task(args: tuple[str, ...]) -> None:
    """Execute one task-instance try (what task pods run; reads ZONDA_TASK_INVOCATION)."""
    from controller.runner import process as runner

    sys.exit(runner.main(list(args)))


@main.command()
@click.option(
    "--executor",
    type=click.Choice(["local", "kubernetes"]),
    default="local",
    show_default=True,
    help="local runs task code for real; kubernetes runs kwok-simulated pods.",
)
@click.option(
    "--example",
    "examples",
    multiple=True,
    default=("example_scheduled", "example_deferrable", "example_bash"),
    show_default=True,
    help="Example DAG (a name from examples/dags, or a file) to apply; DAGs without a schedule are "
    "triggered.",
)
@click.option("--exit-when-done", is_flag=True, help="Stop once the example runs finish (for CI).")
@click.option(
    "--real-node",
    is_flag=True,
    help="Run task pods as real containers on a local kubelet node (implies --executor kubernetes; "
    "root on Linux; builds the node and the image on first use).",
)
def up(executor: str, examples: tuple[str, ...], exit_when_done: bool, real_node: bool) -> None:
    """Start a local control plane, the controller and the triggerer, and run example DAGs."""
    from controller.devtools import up as local_up

    sys.exit(
        local_up.main(
            executor=executor, examples=list(examples), exit_when_done=exit_when_done, real_node=real_node
        )
    )


main.add_command(operate_commands.trigger)
main.add_command(operate_commands.clear)
main.add_command(operate_commands.mark)
main.add_command(logs_commands.logs)
main.add_command(runs_commands.runs)
main.add_command(xcom_commands.xcom)
main.add_command(dags_commands.dags)
main.add_command(backfill_commands.backfill)
main.add_command(backfill_commands.backfills)
main.add_command(assets_commands.assets_group)
main.add_command(pools_commands.pools_group)
listings.register(main, dags_commands.dags, runs_commands.runs)
listings.tasks.add_command(tasks_commands.respond)
ui_cli.register(main)

if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        main()
