"""`zonda dags render|apply|test`: Python DAG files to DAG resources, as Airflow's DagBag loads them.

render  import a folder of DAG files and print (or write) one manifest per DAG; import errors are
        reported per file and the exit status is 1, but the good files are still rendered
apply   render, then server-side apply with field manager `zonda-dags`; `--prune` deletes the DAGs
        carrying Zonda's managed-by label in the namespace that this render no longer produced
test    run one DAG run in this process, through the controller's `decide()` and the task runner
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click

from controller.cli.common import parse_conf
from controller.cli.progress import progress_bar
from zonda.authoring import manifests, rendering

FIELD_MANAGER = "zonda-dags"

_PATHS = click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
_COMPAT = click.option(
    "--airflow-compat", is_flag=True, help="Map `airflow.*` imports onto Zonda (files stay unchanged)."
)
_VERSION = click.option(
    "--airflow-version",
    type=click.Choice(["2", "3"]),
    default=None,
    help="Give every Airflow file this Airflow's semantics [default: each file's, from its imports: "
    "airflow.sdk means 3; see docs/authoring.md].",
)
_SAFE = click.option(
    "--safe-mode/--no-safe-mode",
    default=True,
    show_default=True,
    help="Only import files mentioning 'dag' and 'airflow' or 'zonda' (Airflow's DAG_DISCOVERY_SAFE_MODE).",
)
_IGNORE = click.option(
    "--ignore-syntax",
    type=click.Choice(["regexp", "glob"]),
    default=None,
    help=".airflowignore syntax [default: $ZONDA_DAG_IGNORE_FILE_SYNTAX or regexp].",
)


@click.group("dags")
def dags() -> None:
    """Render, apply and test Python DAG files."""
    # As `python -m` would: DAG files import helpers relative to where the user runs the command.
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())


def _render(
    paths: tuple[Path, ...],
    airflow_compat: bool,
    safe_mode: bool,
    ignore_syntax: str | None,
    airflow_version: str | None = None,
) -> Any:
    report = rendering.render_paths(
        list(paths),
        airflow_compat=airflow_compat or airflow_version is not None,
        safe_mode=safe_mode,
        ignore_syntax=ignore_syntax,
        airflow_version=airflow_version,
    )
    for file, message in sorted(report.file_errors.items()):
        click.echo(f"error: {file}: import failed\n{message}", err=True)
    for dag in report.dags:
        for error in dag.errors:
            click.echo(f"error: {dag.file}: DAG {dag.dag_id!r}: {error}", err=True)
        for name, hint in sorted(dag.unsupported.items()):
            click.echo(f"warning: {dag.file}: DAG {dag.dag_id!r}: {name} is ignored ({hint})", err=True)
        for warning in dag.warnings:
            click.echo(f"warning: {dag.file}: DAG {dag.dag_id!r}: {warning}", err=True)
    return report


@dags.command("render")
@_PATHS
@click.option(
    "-o", "--output", default="-", show_default=True, help="A folder (one file per DAG) or - for stdout."
)
@click.option(
    "--report", "show_report", is_flag=True, help="Print a migration table (file, DAG, status) to stderr."
)
@_COMPAT
@_VERSION
@_SAFE
@_IGNORE
def render(
    paths: tuple[Path, ...],
    output: str,
    show_report: bool,
    airflow_compat: bool,
    airflow_version: str | None,
    safe_mode: bool,
    ignore_syntax: str | None,
) -> None:
    """Render the DAGs in PATHS (folders or files) to DAG manifests: deterministic YAML, sorted keys."""
    report = _render(paths, airflow_compat, safe_mode, ignore_syntax, airflow_version)
    if output == "-":
        sys.stdout.write(manifests.dump_yaml(report.manifests))
    else:
        folder = Path(output)
        folder.mkdir(parents=True, exist_ok=True)
        for manifest in report.manifests:
            (folder / f"{manifest['metadata']['name']}.yaml").write_text(manifests.dump_yaml([manifest]))
    if show_report:
        click.echo(rendering.migration_table(report), err=True, nl=False)
    if report.failed:
        sys.exit(1)


@dags.command("apply")
@_PATHS
@click.option("--namespace", "-n", default=None, help="Namespace [default: $POD_NAMESPACE or default].")
@click.option(
    "--prune", is_flag=True, help="Delete DAGs this tool applied before that are no longer rendered."
)
@_COMPAT
@_VERSION
@_SAFE
@_IGNORE
def apply(
    paths: tuple[Path, ...],
    namespace: str | None,
    prune: bool,
    airflow_compat: bool,
    airflow_version: str | None,
    safe_mode: bool,
    ignore_syntax: str | None,
) -> None:
    """Render the DAGs in PATHS and server-side apply them (field manager `zonda-dags`)."""
    from controller.cli.common import namespace_or_default, run_kube

    report = _render(paths, airflow_compat, safe_mode, ignore_syntax, airflow_version)
    if report.failed and prune:
        raise click.ClickException("not pruning: some files failed to render (their DAGs would be deleted)")
    run_kube(_apply(report.manifests, namespace_or_default(namespace), prune=prune))
    if report.failed:
        sys.exit(1)


async def _apply(items: list[dict[str, Any]], namespace: str, *, prune: bool) -> None:
    from controller.kube import DAGS, Kube

    async with await Kube.connect(component=FIELD_MANAGER) as kube:
        with progress_bar() as progress:
            bar = progress.add_task("applying DAGs", total=len(items))
            for manifest in items:
                await kube.apply_custom(DAGS, namespace, manifest, field_manager=FIELD_MANAGER)
                click.echo(f"dag.zonda.dev/{manifest['metadata']['name']} applied")
                progress.advance(bar)
            progress.update(bar, description="applied DAGs")
        if prune:
            wanted = {manifest["metadata"]["name"] for manifest in items}
            label, value = manifests.MANAGED_BY_LABEL
            for existing in await kube.list_custom(DAGS, namespace, label_selector=f"{label}={value}"):
                name = existing["metadata"]["name"]
                if name not in wanted:
                    await kube.delete_custom(DAGS, namespace, name)
                    click.echo(f"dag.zonda.dev/{name} pruned")


@dags.command("test")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--dag-id", default=None, help="The DAG to run when the file defines several.")
@click.option("--logical-date", default=None, help="ISO date-time of the run [default: now].")
@click.option("--conf", default=None, help="JSON object: the run's conf.")
@click.option(
    "--dags-folder",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    envvar="ZONDA_DAGS_FOLDER",
    default=None,
    help="The DAGs folder FILE is in [default: $ZONDA_DAGS_FOLDER, else FILE's folder].",
)
@_COMPAT
@_VERSION
def test(
    file: Path,
    dag_id: str | None,
    logical_date: str | None,
    conf: str | None,
    dags_folder: Path | None,
    airflow_compat: bool,
    airflow_version: str | None,
) -> None:
    """Run one DAG run of FILE in this process (no cluster) and print every task instance's state."""
    from controller.devtools import dag_runs

    try:
        outcome = dag_runs.test_file(
            file,
            dag_id=dag_id,
            logical_date=logical_date,
            conf=parse_conf(conf),
            dags_folder=dags_folder,
            airflow_compat=airflow_compat or airflow_version is not None,
            airflow_version=airflow_version,
        )
    except dag_runs.DagTestError as error:
        raise click.ClickException(str(error)) from error
    click.echo(dag_runs.format_states(outcome))
    if outcome.state != "success":
        sys.exit(1)
