"""What each page shows, computed from DAG and DagRun bodies (plain dicts): pure, no I/O, no clock.

The server gathers bodies from the store and renders these view models with Jinja (autoescaped), so
everything here is testable without a browser or a cluster.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from zonda.resources import wire
from zonda.schedules import assets
from zonda.specs import mapping
from zonda.specs.dags import DagInvalid, ResolvedDag, parse_dag_spec, resolve_dag

Body = Mapping[str, Any]

#: Airflow's default `STATE_COLORS` (airflow/settings.py), so a cell means what it means in Airflow.
STATE_COLORS: dict[str, str] = {
    "deferred": "mediumpurple",
    "failed": "red",
    "queued": "gray",
    "removed": "lightgrey",
    "restarting": "violet",
    "running": "lime",
    "scheduled": "tan",
    "skipped": "hotpink",
    "success": "green",
    "up_for_reschedule": "turquoise",
    "up_for_retry": "gold",
    "upstream_failed": "orange",
    "none": "white",
}

#: How Airflow's grid summarises a task group in one cell: the first state present wins
#: (airflow/www/views.py, `task_group_to_grid`).
GROUP_STATE_PRIORITY: tuple[str, ...] = (
    "failed",
    "upstream_failed",
    "up_for_retry",
    "up_for_reschedule",
    "queued",
    "scheduled",
    "deferred",
    "running",
    "restarting",
    "none",
    "success",
    "skipped",
    "removed",
)


def parse_time(value: Any) -> datetime | None:
    """`zonda.resources.wire.parse_time`, lenient: a page shows "-" rather than fail on an odd timestamp."""
    try:
        return wire.parse_time(value)
    except ValueError:
        return None


def summarise_states(states: Iterable[str | None]) -> str | None:
    """One state for a group of task instances, Airflow's way; None when the group has none."""
    present = {state for state in states if state is not None}
    for state in GROUP_STATE_PRIORITY:
        if state in present:
            return state
    return None


def task_states(tis: Mapping[str, Any]) -> dict[str, str]:
    """Each task's state in a run: a mapped task's instances (``task[i]``) summarised as Airflow's grid
    shows a mapped task."""
    by_task: dict[str, list[str]] = {}
    for key, ti in tis.items():
        by_task.setdefault(mapping.split_key(key)[0], []).append(ti.get("state") or "none")
    return {task_id: summarise_states(states) or "none" for task_id, states in by_task.items()}


def resolve(dag: Body) -> ResolvedDag | None:
    """The DAG resolved as the controller resolves it; None when its spec is invalid."""
    try:
        return resolve_dag(dag["metadata"]["name"], parse_dag_spec(dag.get("spec") or {}))
    except DagInvalid:
        return None


def task_display_names(dag: Body) -> dict[str, str]:
    """Full task id -> Airflow's `task_display_name` (`spec.tasks[].displayName`), for the tasks that
    have one; empty when the spec is invalid. `dag`: a DAG body, or a run's `dagSpec` under `spec`."""
    resolved = resolve(dag)
    if resolved is None:
        return {}
    return {task_id: task.display_name for task_id, task in resolved.tasks.items() if task.display_name}


def task_label(key: str, display_names: Mapping[str, str]) -> str:
    """What a page shows for a task instance key (`task` or a mapped `task[i]`): its task's display name
    (with the map index), else the key itself."""
    task_id, map_index = mapping.split_key(key)
    name = display_names.get(task_id)
    if name is None:
        return key
    return name if map_index < 0 else f"{name} [{map_index}]"


def run_sort_key(run: Body) -> str:
    status = run.get("status") or {}
    return str(
        status.get("logicalDate")
        or (run.get("spec") or {}).get("logicalDate")
        or status.get("runAfter")  # an Airflow 3 manual run without a logical date: when it was due
        or (run.get("spec") or {}).get("runAfter")
        or run["metadata"].get("creationTimestamp", "")
    )


# ------------------------------------------------------------------------------------- DAG list


@dataclass(frozen=True)
class RunMark:
    name: str
    state: str
    logical_date: str


@dataclass(frozen=True)
class DagRow:
    namespace: str
    name: str
    schedule: str
    paused: bool
    next_run: str | None
    tags: tuple[str, ...]
    owners: tuple[str, ...]
    valid: bool
    runs: tuple[RunMark, ...]
    #: The asset condition, each asset marked awaited or updated (empty: not scheduled on assets).
    asset_schedule: tuple[ScheduleToken, ...] = ()
    #: Airflow's `dag_display_name` (`spec.displayName`), shown instead of the name where given.
    display_name: str | None = None

    def matches(self, query: str) -> bool:
        needle = query.lower()
        haystack = [self.name, self.display_name or "", self.namespace, *self.tags, *self.owners]
        return any(needle in text.lower() for text in haystack)


def _schedule_summary(spec: Body, status: Body) -> str:
    summary = str(status.get("timetableSummary") or spec.get("schedule") or "None")
    if spec.get("assetSchedule") and summary == "None":
        # Airflow's `AssetTriggeredTimetable.summary` ("Dataset" in Airflow 2's dialect)
        return "Dataset" if spec.get("assetRunType") == "dataset_triggered" else "Asset"
    return summary


def dag_row(dag: Body, runs: Sequence[Body], *, last: int = 25) -> DagRow:
    """One line of the DAG list; `runs` are the DAG's runs in any order (the newest `last` show)."""
    spec = dag.get("spec") or {}
    status = dag.get("status") or {}
    conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
    owners = {str(t.get("owner")) for t in spec.get("tasks") or [] if t.get("owner")}
    default_owner = (spec.get("defaultArgs") or {}).get("owner")
    if default_owner:
        owners.add(str(default_owner))
    newest = sorted(runs, key=run_sort_key)[-last:]
    return DagRow(
        namespace=dag["metadata"]["namespace"],
        name=dag["metadata"]["name"],
        schedule=_schedule_summary(spec, status),
        paused=bool(spec.get("paused")),
        next_run=None if spec.get("paused") else status.get("nextRunAfter"),
        tags=tuple(spec.get("tags") or ()),
        owners=tuple(sorted(owners)) or ("airflow",),
        valid=conditions.get("Valid") != "False",
        runs=tuple(
            RunMark(
                name=r["metadata"]["name"],
                state=(r.get("status") or {}).get("state") or "queued",
                logical_date=run_sort_key(r),
            )
            for r in newest
        ),
        asset_schedule=asset_schedule(dag),
        display_name=spec.get("displayName") or None,
    )


# ------------------------------------------------------------------------------- asset schedule


@dataclass(frozen=True)
class ScheduleToken:
    """One piece of a DAG's asset condition as the DAG page writes it: an asset (or alias), marked
    awaited or updated, or an operator (``&``, ``|``) or parenthesis."""

    text: str
    key: str | None = None  # a URI or alias:<name>; None for an operator
    awaited: bool = False


def asset_schedule(dag: Body) -> tuple[ScheduleToken, ...]:
    """The DAG's asset condition, each asset marked awaited when the controller's last pass found no
    event for it since the DAG's last asset-triggered run (`status.awaitedAssets`); empty for a DAG
    not scheduled on assets (or whose condition is invalid: the DAG's `Valid` condition says why)."""
    raw = (dag.get("spec") or {}).get("assetSchedule")
    if not raw:
        return ()
    try:
        condition = assets.parse_condition(raw)
    except assets.AssetConditionInvalid:
        return ()
    awaited = set((dag.get("status") or {}).get("awaitedAssets") or [])
    return tuple(_tokens(condition, awaited, top=True))


def _tokens(condition: assets.Condition, awaited: set[str], *, top: bool) -> list[ScheduleToken]:
    if isinstance(condition, assets.Leaf):
        label = condition.key.replace("alias:", "alias ", 1)
        return [ScheduleToken(label, condition.key, condition.key in awaited)]
    operator = " & " if isinstance(condition, assets.AllOf) else " | "
    found: list[ScheduleToken] = [] if top else [ScheduleToken("(")]
    for index, item in enumerate(condition.items):
        if index:
            found.append(ScheduleToken(operator))
        found.extend(_tokens(item, awaited, top=False))
    return found if top else [*found, ScheduleToken(")")]


# ------------------------------------------------------------------------------------------ grid


@dataclass(frozen=True)
class GridColumn:
    name: str
    state: str
    logical_date: str
    run_type: str


@dataclass(frozen=True)
class GridRow:
    key: str  # the task id, or "group:<group id>"
    label: str
    depth: int
    is_group: bool
    parent_groups: tuple[str, ...]  # enclosing group ids, outermost first
    states: tuple[str | None, ...]  # one per column; None: no task instance in that run
    tooltip: str = ""


@dataclass(frozen=True)
class Grid:
    columns: tuple[GridColumn, ...]
    rows: tuple[GridRow, ...]


def group_chain(group: str | None, parents: Mapping[str, str | None]) -> list[str]:
    chain: list[str] = []
    while group is not None and group not in chain:
        chain.append(group)
        group = parents.get(group)
    return list(reversed(chain))


def grid(dag: Body, runs: Sequence[Body], *, last: int = 25) -> Grid:
    """Airflow's grid: the newest `last` runs as columns (oldest left), tasks and groups as rows.

    Rows follow the current DAG's topological order, each group's row placed before its first task;
    task ids found only in runs (tasks since removed from the DAG) come last.
    """
    chosen = sorted(runs, key=run_sort_key)[-last:]
    columns = tuple(
        GridColumn(
            name=r["metadata"]["name"],
            state=(r.get("status") or {}).get("state") or "queued",
            logical_date=run_sort_key(r),
            run_type=(r.get("spec") or {}).get("runType") or "manual",
        )
        for r in chosen
    )
    instances = [((r.get("status") or {}).get("taskInstances") or {}) for r in chosen]

    def states_of(task_ids: Iterable[str]) -> tuple[str | None, ...]:
        ids = list(task_ids)
        summaries = [task_states(tis) for tis in instances]  # a mapped task's instances as one
        return tuple(summarise_states(states[t] for t in ids if t in states) for states in summaries)

    resolved = resolve(dag)
    spec = dag.get("spec") or {}
    parents: dict[str, str | None] = {g["id"]: g.get("parent") for g in spec.get("taskGroups") or []}
    tooltips = {g["id"]: g.get("tooltip") or "" for g in spec.get("taskGroups") or []}
    task_groups: dict[str, str | None] = {}
    display_names: dict[str, str] = {}
    if resolved is not None:
        task_groups = {task_id: task.group for task_id, task in resolved.tasks.items()}
        display_names = {t: task.display_name for t, task in resolved.tasks.items() if task.display_name}
    members: dict[str, list[str]] = {}
    for task_id, group in task_groups.items():
        for group_id in group_chain(group, parents):
            members.setdefault(group_id, []).append(task_id)

    rows: list[GridRow] = []
    placed_groups: set[str] = set()
    for task_id, group in task_groups.items():
        chain = group_chain(group, parents)
        for depth, group_id in enumerate(chain):
            if group_id not in placed_groups:
                placed_groups.add(group_id)
                rows.append(
                    GridRow(
                        key=f"group:{group_id}",
                        label=group_id,
                        depth=depth,
                        is_group=True,
                        parent_groups=tuple(chain[:depth]),
                        states=states_of(members[group_id]),
                        tooltip=tooltips.get(group_id, ""),
                    )
                )
        rows.append(
            GridRow(
                key=task_id,
                label=display_names.get(task_id, task_id),  # Airflow's grid shows task_display_name
                depth=len(chain),
                is_group=False,
                parent_groups=tuple(chain),
                states=states_of([task_id]),
                tooltip=task_id if task_id in display_names else "",
            )
        )
    removed = sorted({t for tis in instances for t in tis} - set(task_groups))
    rows.extend(
        GridRow(key=t, label=t, depth=0, is_group=False, parent_groups=(), states=states_of([t]))
        for t in removed
    )
    return Grid(columns=columns, rows=tuple(rows))


# -------------------------------------------------------------------------------------- run page


@dataclass(frozen=True)
class TrySpan:
    """One earlier try of a task instance, as its pod or process recorded it (the run's status keeps
    only the current try's times)."""

    try_number: int
    state: str
    start: datetime
    end: datetime | None


@dataclass(frozen=True)
class GanttBar:
    task_id: str
    state: str
    try_number: int
    start: str
    end: str | None
    offset_pct: float
    width_pct: float


@dataclass(frozen=True)
class GanttRow:
    task_id: str
    bars: tuple[GanttBar, ...]  # every try on record, oldest first


#: An attempt's phase (pod phase or local process) as the task-instance state its bar is coloured by.
ATTEMPT_STATES = {"succeeded": "success", "failed": "failed", "running": "running", "pending": "queued"}


def gantt(
    run: Body, *, now: datetime, earlier_tries: Mapping[str, Sequence[TrySpan]] | None = None
) -> list[GanttRow]:
    """The run's timeline: a row per task instance with a bar per try, scaled to the run's span.

    The current try's times come from the run's status; earlier tries (retries, a cleared task's
    previous runs) from `earlier_tries`, those its pods or processes still record. A try still
    running ends at `now` (passed in: this module reads no clock).
    """
    tis = (run.get("status") or {}).get("taskInstances") or {}
    spans: list[tuple[str, TrySpan]] = []
    for task_id, ti in tis.items():
        current = int(ti.get("tryNumber") or 0)
        spans += [(task_id, t) for t in (earlier_tries or {}).get(task_id, ()) if t.try_number < current]
        start = parse_time(ti.get("startDate"))
        if start is not None:
            state = str(ti.get("state") or "none")
            spans.append((task_id, TrySpan(current, state, start, parse_time(ti.get("endDate")))))
    if not spans:
        return []
    first = min(span.start for _, span in spans)
    last = max(max(span.end or now, span.start) for _, span in spans)
    total = max((last - first).total_seconds(), 1e-6)
    rows: dict[str, list[GanttBar]] = {}
    for task_id, span in sorted(spans, key=lambda item: (item[1].start, item[1].try_number)):
        end = max(span.end or now, span.start)
        rows.setdefault(task_id, []).append(
            GanttBar(
                task_id=task_id,
                state=span.state,
                try_number=span.try_number,
                start=span.start.isoformat(),
                end=span.end.isoformat() if span.end else None,
                offset_pct=round(100 * (span.start - first).total_seconds() / total, 2),
                width_pct=max(round(100 * (end - span.start).total_seconds() / total, 2), 0.5),
            )
        )
    ordered = sorted(rows.items(), key=lambda row: (row[1][0].offset_pct, row[0]))
    return [GanttRow(task_id=task_id, bars=tuple(bars)) for task_id, bars in ordered]


def earlier_try_spans(attempts: Iterable[tuple[int, str, str | None, str | None]]) -> list[TrySpan]:
    """Spans of a task's attempts (try number, phase, started, finished) with a start time."""
    spans = []
    for try_number, phase, started, finished in attempts:
        start = parse_time(started)
        if start is not None:
            state = ATTEMPT_STATES.get(phase.lower(), "none")
            spans.append(TrySpan(try_number, state, start, parse_time(finished)))
    return spans
