"""A DAG as Graphviz DOT: the one description of the graph, laid out by Graphviz's `dot` everywhere.

The browser renders this DOT with @viz-js/viz (Graphviz compiled to WebAssembly, vendored under
static/vendor) and `zonda dags show --format svg|png` with the Graphviz `dot` program, so the page and
the terminal get the same layout from the same rules; `--format dot` needs nothing but Python.
Task groups are clusters (or one box when collapsed), edge labels are DOT labels, and a task's
trigger rule and state are in its tooltip. Pure: a DAG body (and a run's states) in, text out.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from controller.ui import views

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
                        label=child.rsplit(".", 1)[-1] if task.group else child,
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
