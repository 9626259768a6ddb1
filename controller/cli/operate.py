"""`zonda trigger`, `zonda clear`, `zonda mark`: the commands that start a run or change its task instances.

Apart from `main.py` (the group and the long-running components) because these act on one run through
`controller.operations.run_actions` and report what changed; `main.py` registers them.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import click

from controller.cli import follow
from controller.cli.common import (
    connect,
    kubeconfig_option,
    namespace_options,
    namespace_or_default,
    parse_conf,
    run_kube,
)
from controller.kube import DAGRUNS, DAGS, AlreadyExists, Kube
from controller.operations import run_actions
from controller.processes.deadlines import main_thread_deadline
from zonda.actions import across_dags, clear_and_mark
from zonda.actions.clear_and_mark import ActionResult
from zonda.resources.dagrun_models import DagRunStatus, TaskInstanceStatus
from zonda.resources.models import TaskInstanceState
from zonda.specs import params
from zonda.specs.dags import ResolvedDag

_namespace, _run = namespace_or_default, run_kube


@click.command()
@click.argument("dag")
@click.option("--namespace", "-n", default=None)
@click.option("--conf", default="{}", help="JSON object passed as dag_run.conf.")
@click.option(
    "--logical-date",
    default=None,
    help="ISO 8601 (default: now; an Airflow 3 DAG's run then has no logical date, as in Airflow 3).",
)
@click.option(
    "--partition-key",
    default=None,
    help="The partition the run is for (Airflow 3.2+'s partition_key; e.g. of a PartitionedAtRuntime DAG): "
    "its tasks see dag_run.partition_key and the asset events they record carry it.",
)
@kubeconfig_option
@click.option(
    "--wait", is_flag=True, help="Follow the run with a progress bar until it ends; exit 1 if it fails."
)
def trigger(
    dag: str,
    namespace: str | None,
    conf: str,
    logical_date: str | None,
    partition_key: str | None,
    kubeconfig: str | None,
    wait: bool,
) -> None:
    """Create a manual DagRun of DAG (Airflow's `dags trigger`)."""
    params.bound_checks(main_thread_deadline)  # the conf against the DAG's patterns, as the controller
    conf_obj = parse_conf(conf)
    given = datetime.fromisoformat(logical_date) if logical_date else None
    if given is not None and given.tzinfo is None:
        raise click.BadParameter(
            "needs a timezone, e.g. 2026-01-01T00:00:00+00:00", param_hint="--logical-date"
        )
    now = datetime.now(UTC)  # once: a retried create of this request has the same name
    ns = _namespace(namespace)

    async def create() -> str:
        from zonda.schedules.manual_runs import manual_run, partition_key_problem

        async with await connect(kubeconfig) as kube:
            dag_object = await kube.get_custom(DAGS, ns, dag)
            if dag_object is None:
                raise click.ClickException(f"DAG {dag!r} not found in namespace {ns}")
            spec = dag_object.get("spec") or {}
            if (problem := partition_key_problem(dag, spec, partition_key)) is not None:
                raise click.ClickException(problem)
            errors = params.run_conf_errors(spec, conf_obj)
            if errors:
                raise click.ClickException("conf does not match the DAG's params: " + "; ".join(errors))
            run = manual_run(
                dag, spec, ns, logical_date=given, conf=conf_obj, now=now, partition_key=partition_key
            )
            try:
                await kube.create_custom(DAGRUNS, ns, run.body)
            except AlreadyExists as exc:
                raise click.ClickException(
                    f"a run for {dag} {run.describe()} exists already: {run.name}"
                ) from exc
            return run.name

    name = _run(create())
    click.echo(f"dagrun.zonda.dev/{name} created")
    if wait:
        follow.follow_run(name, ns, kubeconfig)


async def _act_on_run(
    kube: Kube, namespace: str, run_name: str, act: Callable[[ResolvedDag, DagRunStatus], ActionResult]
) -> tuple[ActionResult, dict[str, TaskInstanceStatus]]:
    """Read the run, apply a pure `zonda.actions.clear_and_mark` action, write the status back (see
    `run_actions`)."""
    try:
        return await run_actions.act_on_run(kube, namespace, run_name, act, component="zonda-cli")
    except run_actions.RunActionError as exc:
        raise click.ClickException(exc.message) from exc


def _report(run_name: str, verb: str, outcome: tuple[ActionResult, dict[str, TaskInstanceStatus]]) -> None:
    result, before = outcome
    if not result.changed:
        click.echo(f"{run_name}: nothing to {verb}")
        return
    click.echo(f"{run_name}: {len(result.changed)} task instance(s) changed")
    for line in clear_and_mark.describe(result, before):
        click.echo(f"  {line}")


@click.command()
@click.argument("run_name")
@click.option("--task", "-t", "tasks", multiple=True, help="Task id to clear (default: all).")
@click.option("--downstream", "-d", is_flag=True, help="Also clear their downstream tasks.")
@click.option("--upstream", "-u", is_flag=True, help="Also clear their upstream tasks.")
@click.option("--only-failed", "-f", is_flag=True, help="Only failed and upstream_failed task instances.")
@click.option(
    "--exclude-external",
    "-x",
    is_flag=True,
    help="Do not follow ExternalTaskMarkers into other DAGs' runs (Airflow's --exclude-subdags).",
)
@namespace_options
def clear(
    run_name: str,
    tasks: tuple[str, ...],
    downstream: bool,
    upstream: bool,
    only_failed: bool,
    exclude_external: bool,
    namespace: str | None,
    kubeconfig: str | None,
) -> None:
    """Clear task instances so they run again (Airflow's `tasks clear`); running ones are restarted.

    A cleared ExternalTaskMarker clears its external task (and that task's downstream) in the other
    DAG's run at the marker's logical date too, as Airflow does, up to the marker's recursion_depth.
    """
    ns = _namespace(namespace)
    first = across_dags.RunClear(
        run_name, tuple(tasks) or None, upstream=upstream, downstream=downstream, only_failed=only_failed
    )

    async def go() -> list[run_actions.RunOutcome]:
        async with await connect(kubeconfig) as kube:
            try:
                return await run_actions.clear_across_dags(
                    kube,
                    ns,
                    first,
                    now=datetime.now(UTC),
                    who="a user",
                    follow_markers=not exclude_external,
                    component="zonda-cli",
                )
            except run_actions.RunActionError as exc:
                raise click.ClickException(exc.message) from exc

    for outcome in _run(go()):
        if outcome.via:
            click.echo(f"(through ExternalTaskMarker {outcome.via})")
        _report(outcome.run_name, "clear", (outcome.result, outcome.before))


@click.command()
@click.argument("run_name")
@click.argument("task_id")
@click.argument("state", type=click.Choice(sorted(s.value for s in clear_and_mark.MARKABLE_STATES)))
@click.option("--downstream", "-d", is_flag=True, help="Also mark its downstream tasks.")
@click.option("--upstream", "-u", is_flag=True, help="Also mark its upstream tasks.")
@namespace_options
def mark(
    run_name: str,
    task_id: str,
    state: str,
    downstream: bool,
    upstream: bool,
    namespace: str | None,
    kubeconfig: str | None,
) -> None:
    """Set a task instance's state by hand (Airflow's "mark success/failed/skipped").

    As in Airflow, failed and upstream_failed task instances downstream of it are cleared to resume.
    """
    ns = _namespace(namespace)

    def act(dag: ResolvedDag, status: DagRunStatus) -> ActionResult:
        return clear_and_mark.mark(
            dag,
            status,
            task_ids=[task_id],
            state=TaskInstanceState(state),
            upstream=upstream,
            downstream=downstream,
            now=datetime.now(UTC),
        )

    async def go() -> tuple[ActionResult, dict[str, TaskInstanceStatus]]:
        async with await connect(kubeconfig) as kube:
            return await _act_on_run(kube, ns, run_name, act)

    _report(run_name, "mark", _run(go()))
