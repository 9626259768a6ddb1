"""A DAG as Graphviz DOT: the one description of the graph, laid out by Graphviz's `dot` everywhere.

The browser renders this DOT with @viz-js/viz (Graphviz compiled to WebAssembly, vendored under
static/vendor) and `zonda dags show --format svg|png` with the Graphviz `dot` program, so the page and
the terminal get the same layout from the same rules; `--format dot` needs nothing but Python.
Task groups are clusters (or one box when collapsed), edge labels are DOT labels, and a task's
trigger rule and state are in its tooltip. Pure: a DAG body (and a run's states) in, text out.

The Assets page's graph (producer DAGs -> asset -> consumer DAGs, Airflow's dependency graph of
datasets) is DOT too, from the page's rows (`assets_dot`), and rendered the same way.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from controller.ui import views

if TYPE_CHECKING:
    from controller.ui.assets_page import AssetRow

#: Graphviz's SVG output escapes text itself; DOT strings only need quotes and backslashes escaped.
_DOT_ESCAPES = str.maketrans({"\\": "\\\\", '"': '\\"', "\n": "\\n"})


def quote(text: str) -> str:
    return '"' + str(text).translate(_DOT_ESCAPES) + '"'


def _attrs(**attrs: str) -> str:
    return "[" + ", ".join(f"{key}={quote(value)}" for key, value in attrs.items()) + "]"


def dag_dot(
    dag: Mapping[str, Any],
    *,
    states: Mapping[str, str] | None = None,
    collapsed: Collection[str] = (),
) -> str:
    """DOT for `dag` (a DAG body); `states` colour the tasks (task id -> state) as a run's graph does.

    A group in `collapsed` is drawn as one node standing for all of its tasks (its state summarised as
    in the grid); edges into or out of it are kept, edges inside it disappear.
    """
    resolved = views.resolve(dag)
    name = dag["metadata"]["name"]
    lines = [
        f"digraph {quote(name)} {{",
        '  graph [rankdir="LR", fontname="Helvetica", fontsize="11", nodesep="0.3", ranksep="0.5"];',
        '  node [shape="box", style="rounded,filled", fillcolor="white", fontname="Helvetica", '
        'fontsize="11", height="0.3"];',
        '  edge [fontname="Helvetica", fontsize="9", arrowsize="0.6"];',
    ]
    if resolved is None:
        lines.append(f"  {quote('invalid')} {_attrs(label='this DAG is invalid: see its Valid condition')};")
        lines.append("}")
        return "\n".join(lines) + "\n"

    spec = dag.get("spec") or {}
    parents: dict[str, str | None] = {g["id"]: g.get("parent") for g in spec.get("taskGroups") or []}
    tooltips = {g["id"]: g.get("tooltip") or "" for g in spec.get("taskGroups") or []}
    states = states or {}

    def shown_as(task_id: str) -> str:
        """The node a task is drawn in: itself, or its outermost collapsed group."""
        for group_id in views.group_chain(resolved.tasks[task_id].group, parents):
            if group_id in collapsed:
                return f"group:{group_id}"
        return task_id

    # Nodes, nested in clusters by group.
    children: dict[str | None, list[str]] = {}
    for group_id in parents:
        children.setdefault(parents[group_id] if parents[group_id] in parents else None, []).append(
            f"group:{group_id}"
        )
    for task_id, task in resolved.tasks.items():
        children.setdefault(task.group if task.group in parents else None, []).append(task_id)

    def members(group_id: str) -> list[str]:
        return [t for t, task in resolved.tasks.items() if group_id in views.group_chain(task.group, parents)]

    def emit(container: str | None, indent: str) -> None:
        for child in children.get(container, []):
            if child.startswith("group:"):
                group_id = child.removeprefix("group:")
                if group_id in collapsed:
                    state = views.summarise_states(states.get(t) for t in members(group_id)) or "none"
                    lines.append(
                        f"{indent}{quote(child)} "
                        + _attrs(
                            label=f"{group_id} (group)",
                            id=f"node-{child}",
                            shape="box3d",
                            color=views.STATE_COLORS.get(state, "black") if states else "black",
                            penwidth="3" if states else "1",
                            tooltip=tooltips.get(group_id) or f"task group {group_id}: {state}",
                        )
                        + ";"
                    )
                else:
                    lines.append(f"{indent}subgraph {quote('cluster_' + group_id)} {{")
                    lines.append(
                        f"{indent}  graph "
                        + _attrs(
                            label=group_id,
                            id=f"cluster-{group_id}",
                            style="rounded,dashed",
                            tooltip=tooltips.get(group_id) or f"task group {group_id}",
                        )
                        + ";"
                    )
                    emit(group_id, indent + "  ")
                    lines.append(f"{indent}}}")
            else:
                task = resolved.tasks[child]
                state = states.get(child, "none")
                operator = task.operator or "container"
                lines.append(
                    f"{indent}{quote(child)} "
                    + _attrs(
                        # Airflow's graph shows task_display_name; the id stays in the tooltip
                        label=task.display_name or (child.rsplit(".", 1)[-1] if task.group else child),
                        id=f"node-{child}",
                        color=views.STATE_COLORS.get(state, "black") if states else "black",
                        penwidth="3" if states else "1",
                        tooltip=f"{child}\n{operator}\ntrigger rule: {task.trigger_rule.value}"
                        + (f"\nstate: {state}" if states else ""),
                    )
                    + ";"
                )

    emit(None, "  ")

    edges: dict[tuple[str, str], str] = {}
    for task_id, task in resolved.tasks.items():
        for upstream in sorted(task.upstream):
            tail, head = shown_as(upstream), shown_as(task_id)
            if tail != head:
                label = task.edge_labels.get(upstream, "")
                edges[(tail, head)] = edges.get((tail, head)) or label
    for (tail, head), label in edges.items():
        attrs = f" {_attrs(label=label)}" if label else ""
        lines.append(f"  {quote(tail)} -> {quote(head)}{attrs};")
    lines.append("}")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class AssetGraph:
    """Airflow's dependency graph of assets: DAG and asset nodes, producer -> asset -> consumer edges."""

    dags: list[str]
    assets: list[str]  # URIs
    #: (DAG, URI): a task of the DAG lists the asset in its outlets
    produces: list[tuple[str, str]]
    #: (URI, DAG, waiting): the DAG's schedule names the asset; `waiting`: no event of it yet
    consumes: list[tuple[str, str, bool]]


def asset_graph(rows: Sequence[AssetRow]) -> AssetGraph:
    """The graph of the Assets page's rows (one per Asset, from its status), each DAG drawn once."""
    dags: dict[str, None] = {}
    produces: list[tuple[str, str]] = []
    consumes: list[tuple[str, str, bool]] = []
    for row in rows:
        for dag in row.producers:
            dags.setdefault(dag)
            produces.append((dag, row.uri))
        for consumer in row.consumers:
            dags.setdefault(consumer.dag)
            consumes.append((row.uri, consumer.dag, consumer.waiting))
    return AssetGraph(sorted(dags), [row.uri for row in rows], produces, consumes)


def assets_dot(namespace: str, rows: Sequence[AssetRow]) -> str:
    """DOT for a namespace's assets: DAGs as boxes linking to their grids, assets as cylinders; a
    consumer still waiting for an asset's event gets a dashed grey edge (the table's *waiting*)."""
    graph = asset_graph(rows)
    by_uri = {row.uri: row for row in rows}
    lines = [
        f"digraph {quote('assets ' + namespace)} {{",
        '  graph [rankdir="LR", fontname="Helvetica", fontsize="11", nodesep="0.3", ranksep="0.6"];',
        '  node [shape="box", style="rounded,filled", fillcolor="white", fontname="Helvetica", '
        'fontsize="11", height="0.3"];',
        '  edge [fontname="Helvetica", fontsize="9", arrowsize="0.6"];',
    ]
    for dag in graph.dags:
        lines.append(
            f"  {quote('dag:' + dag)} "
            + _attrs(label=dag, id=f"node-dag:{dag}", URL=f"/dags/{namespace}/{dag}", tooltip=f"DAG {dag}")
            + ";"
        )
    for uri in graph.assets:
        row = by_uri[uri]
        last = "no event yet"
        if row.last_event:
            last = f"last event: {row.last_event} at {row.last_event_time}"
        lines.append(
            f"  {quote('asset:' + uri)} "
            + _attrs(
                label=uri,
                id=f"node-asset:{uri}",
                shape="cylinder",
                style="filled",
                fillcolor="#ddf4ff",
                tooltip=f"asset {uri}\n{last}\nevents kept: {row.events}",
            )
            + ";"
        )
    for dag, uri in graph.produces:
        tail, head = f"dag:{dag}", f"asset:{uri}"
        lines.append(f"  {quote(tail)} -> {quote(head)} {_attrs(id=f'edge-{tail}->{head}')};")
    for uri, dag, waiting in graph.consumes:
        tail, head = f"asset:{uri}", f"dag:{dag}"
        attrs = {"id": f"edge-{tail}->{head}"}
        if waiting:
            tooltip = f"{dag} still waits for an event of {uri}"
            attrs |= {"style": "dashed", "color": "gray", "tooltip": tooltip}
        lines.append(f"  {quote(tail)} -> {quote(head)} {_attrs(**attrs)};")
    lines.append("}")
    return "\n".join(lines) + "\n"
