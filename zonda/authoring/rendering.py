"""`zonda dags render`: load DAG files, compile each DAG, and say what failed where.

Good files are rendered even when others fail; the report lists, per file, its DAGs or its errors,
and the unsupported Airflow features a DAG uses (for `--report`'s migration table).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zonda.authoring import compat, dag_files, manifests
from zonda.authoring.assets import PartitionedAssetTimetable


@dataclass
class RenderedDag:
    file: str
    dag_id: str
    manifest: dict[str, Any] | None
    errors: list[str] = field(default_factory=list)
    unsupported: dict[str, str] = field(default_factory=dict)
    #: Not fatal, worth saying (a template file not found: the task will fail on it).
    warnings: list[str] = field(default_factory=list)
    #: The Airflow the file was read as (`--airflow-compat` files only).
    dialect: compat.Dialect | None = None
    #: Where Zonda's behaviour for this DAG differs from that Airflow's.
    differences: list[str] = field(default_factory=list)


@dataclass
class RenderReport:
    dags: list[RenderedDag] = field(default_factory=list)
    file_errors: dict[str, str] = field(default_factory=dict)  # file -> message with traceback tail

    @property
    def manifests(self) -> list[dict[str, Any]]:
        return [dag.manifest for dag in self.dags if dag.manifest is not None]

    @property
    def failed(self) -> bool:
        return bool(self.file_errors) or any(dag.errors for dag in self.dags)


def render_paths(
    paths: list[Path],
    *,
    airflow_compat: bool = False,
    safe_mode: bool = True,
    ignore_syntax: str | None = None,
    airflow_version: str | None = None,
) -> RenderReport:
    """Render every DAG under `paths` (folders or files); each folder is its DAGs folder.

    Each Airflow file gets the semantics of the Airflow it was written for (`compat.file_dialect`), or
    `airflow_version`'s when given."""
    report = RenderReport()
    seen_ids: dict[str, str] = {}
    seen_names: dict[str, tuple[str, str]] = {}
    for root in paths:
        folder = root if root.is_dir() else root.parent
        for path in dag_files.list_dag_files(root, safe_mode=safe_mode, ignore_syntax=ignore_syntax):
            shown = _shown(path, folder)
            dialect = None
            if airflow_compat and path.suffix == ".py":
                source = path.read_text()
                problems = compat.unsupported_imports(source, folder)
                if problems:
                    report.file_errors[shown] = "unsupported Airflow imports:\n  " + "\n  ".join(problems)
                    continue
                dialect = compat.file_dialect(source, forced=airflow_version)
            with compat.airflow_imports(enabled=airflow_compat, dialect=dialect):
                results = dag_files.load_file(path, folder)
            for result in results:
                where = _shown(result.path, folder)
                if result.failure is not None:
                    failure = result.failure
                    line = f":{failure.line}" if failure.line else ""
                    report.file_errors[where] = f"{where}{line}: {failure.message}\n{failure.traceback}"
                    continue
                for dag in result.dags:
                    rendered = _render(dag, where, folder, seen_ids, seen_names)
                    rendered.dialect = dialect
                    rendered.differences = differences(dag, dialect)
                    report.dags.append(rendered)
    return report


def _render(
    dag: Any,
    where: str,
    folder: Path,
    seen_ids: dict[str, str],
    seen_names: dict[str, tuple[str, str]],
) -> RenderedDag:
    rendered = RenderedDag(file=where, dag_id=dag.dag_id, manifest=None, unsupported=dict(dag.unsupported))
    if dag.dag_id in seen_ids:
        rendered.errors.append(f"dag id {dag.dag_id!r} is also defined in {seen_ids[dag.dag_id]}")
        return rendered
    seen_ids[dag.dag_id] = where
    try:
        manifest = manifests.dag_manifest(dag, dags_folder=folder)
    except manifests.ManifestError as error:
        rendered.errors.extend(error.errors)
        return rendered
    finally:  # the task arguments Zonda does not act on are noted while the manifest is written
        rendered.unsupported.update(dag.unsupported)
        rendered.warnings = list(getattr(dag, "warnings", []))
    name = manifest["metadata"]["name"]
    if name in seen_names:
        other_file, other_id = seen_names[name]
        rendered.errors.append(
            f"dag id {dag.dag_id!r} and {other_id!r} (in {other_file}) both become the resource name {name!r}"
        )
        return rendered
    seen_names[name] = (where, dag.dag_id)
    rendered.manifest = manifest
    return rendered


def _shown(path: Path, folder: Path) -> str:
    try:
        return path.resolve().relative_to(folder.resolve()).as_posix()
    except ValueError:
        return str(path)


#: Where Zonda differs from each Airflow for every DAG read as it (`differences` adds the DAG's own).
DIALECT_DIFFERENCES: dict[str, list[str]] = {
    "2": [
        "context: prev_ds, prev_ds_nodash, prev_execution_date(_success) are not provided "
        "(use data_interval_start, prev_data_interval_start_success)",
    ],
    "3": [
        "xcom_pull(include_prior_dates=True) orders runs by coalesce(logical_date, run_after); Airflow 3 "
        "orders by logical_date, the database placing runs without one (first on PostgreSQL)",
    ],
}


#: Where a partitioned DAG's runs differ from Airflow 3.2+'s (docs/assets.md, Partitions).
PARTITION_DIFFERENCES = [
    "a PartitionedAssetTimetable run is not started by an event without a partition key or whose key "
    "its mapper refuses, and that event is not logged (Airflow writes an audit-log row)",
]


def differences(dag: Any, dialect: compat.Dialect | None) -> list[str]:
    """Where Zonda's behaviour for `dag` differs from that of the Airflow its file was read as."""
    if dialect is None:
        return []
    found = list(DIALECT_DIFFERENCES.get(dialect.version, []))
    if isinstance(getattr(dag, "schedule_interval", None), PartitionedAssetTimetable):
        found.extend(PARTITION_DIFFERENCES)
    return found


def migration_table(report: RenderReport) -> str:
    """`--report`: one row per DAG (or failed file): file, DAG, the Airflow it was read as and why,
    status, unsupported features and where Zonda's behaviour differs from that Airflow's."""
    rows = [("FILE", "DAG", "AIRFLOW", "STATUS", "UNSUPPORTED / ERRORS / DIFFERENCES")]
    for dag in report.dags:
        warned = dag.unsupported or dag.warnings
        status = "error" if dag.errors else ("rendered, with warnings" if warned else "rendered")
        notes = [
            *dag.errors,
            *dag.warnings,
            *(f"{name}: {hint}" for name, hint in sorted(dag.unsupported.items())),
            *(f"differs: {difference}" for difference in dag.differences),
        ]
        read_as = f"{dag.dialect.version} ({dag.dialect.reason})" if dag.dialect else "-"
        rows.append((dag.file, dag.dag_id, read_as, status, "; ".join(notes) or "-"))
    for file, message in sorted(report.file_errors.items()):
        rows.append((file, "-", "-", "import error", message.splitlines()[0]))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    return (
        "\n".join(
            "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:4])) + "  " + row[4] for row in rows
        )
        + "\n"
    )
