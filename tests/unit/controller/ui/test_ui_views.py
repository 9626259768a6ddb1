"""The UI's pure parts: grid and list view models, the Gantt, the params form, DOT, Markdown sanitising.

Real: zonda's DAG resolution, markdown-it-py + nh3, jsonschema, Graphviz (`dot`) when installed.
"""

from __future__ import annotations

import re
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest

from controller.ui import graphs, params_form, views
from controller.ui.markup import render_markdown
from tests.tools import require_executable


def dag(**spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "zonda.dev/v1alpha1",
        "kind": "DAG",
        "metadata": {"name": "etl", "namespace": "data"},
        "spec": {
            "tasks": [
                {"id": "start", "operator": "EmptyOperator"},
                {"id": "a", "group": "section", "operator": "EmptyOperator", "dependsOn": ["start"]},
                {"id": "b", "group": "section", "operator": "EmptyOperator", "dependsOn": ["a"]},
                {
                    "id": "end",
                    "operator": "EmptyOperator",
                    "dependsOn": ["section"],
                    "edgeLabels": {"section": "when done"},
                    "triggerRule": "all_done",
                },
            ],
            "taskGroups": [{"id": "section", "tooltip": "the middle"}],
        },
    }
    body["spec"].update(spec)
    return body


def run(name: str, logical: str, state: str, tis: dict[str, str], **ti_fields: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "data", "creationTimestamp": logical},
        "spec": {"dagName": "etl", "runType": "manual"},
        "status": {
            "state": state,
            "logicalDate": logical,
            "taskInstances": {t: {"state": s, **ti_fields.get(t, {})} for t, s in tis.items()},
        },
    }


def test_the_grid_has_runs_oldest_first_and_groups_before_their_tasks() -> None:
    runs = [
        run("r2", "2026-01-02T00:00:00Z", "failed", {"start": "success", "section.a": "failed"}),
        run("r1", "2026-01-01T00:00:00Z", "success", {"start": "success", "section.a": "success"}),
    ]
    grid = views.grid(dag(), runs)
    assert [c.name for c in grid.columns] == ["r1", "r2"]
    assert [(r.key, r.depth, r.is_group) for r in grid.rows] == [
        ("start", 0, False),
        ("group:section", 0, True),
        ("section.a", 1, False),
        ("section.b", 1, False),
        ("end", 0, False),
    ]
    rows = {r.key: r for r in grid.rows}
    assert rows["section.a"].states == ("success", "failed")
    assert rows["section.b"].states == (None, None)  # no task instance yet: an empty cell
    assert rows["group:section"].states == ("success", "failed")
    assert rows["group:section"].tooltip == "the middle"
    assert rows["section.b"].parent_groups == ("section",)


def test_the_grid_keeps_only_the_newest_runs_and_shows_tasks_removed_from_the_dag() -> None:
    runs = [run(f"r{i}", f"2026-01-{i:02d}T00:00:00Z", "success", {"old": "success"}) for i in range(1, 6)]
    grid = views.grid(dag(), runs, last=3)
    assert [c.name for c in grid.columns] == ["r3", "r4", "r5"]
    assert grid.rows[-1].key == "old"


@pytest.mark.parametrize(
    ("states", "summary"),
    [
        (["success", "failed", "running"], "failed"),
        (["success", "running"], "running"),
        (["success", "skipped"], "success"),
        (["skipped"], "skipped"),
        ([], None),
    ],
)
def test_a_group_cell_summarises_its_tasks_as_airflows_grid_does(
    states: list[str], summary: str | None
) -> None:
    assert views.summarise_states(states) == summary


def test_a_dag_row_shows_the_newest_runs_and_matches_names_tags_and_owners() -> None:
    body = dag(tags=["finance"], defaultArgs={"owner": "ana"}, paused=True)
    body["status"] = {"timetableSummary": "@daily", "nextRunAfter": "2026-01-03T00:00:00Z"}
    runs = [run(f"r{i}", f"2026-01-{i:02d}T00:00:00Z", "success", {}) for i in range(1, 31)]
    row = views.dag_row(body, runs)
    assert len(row.runs) == 25 and row.runs[-1].name == "r30"
    assert row.schedule == "@daily"
    assert row.next_run is None  # paused: no next run
    assert row.owners == ("ana",)
    assert row.matches("FIN") and row.matches("ana") and row.matches("etl") and not row.matches("zzz")
    assert row.display_name is None


def test_a_dag_row_shows_and_matches_airflows_display_name() -> None:
    """`DAG(dag_display_name=...)` is `spec.displayName`: the list and the DAG's header show it, and
    the search finds it, as Airflow's UI."""
    row = views.dag_row(dag(displayName="Sample DAG with Display Name"), [])
    assert row.display_name == "Sample DAG with Display Name"
    assert row.matches("sample dag") and row.matches("etl")


def test_the_gantt_scales_tries_to_the_runs_span_and_a_running_try_ends_now() -> None:
    body = run(
        "r1",
        "2026-01-01T00:00:00Z",
        "running",
        {"start": "success", "section.a": "running", "section.b": "none"},
        start={"startDate": "2026-01-01T00:00:00Z", "endDate": "2026-01-01T00:00:10Z", "tryNumber": 1},
        **{"section.a": {"startDate": "2026-01-01T00:00:10Z", "tryNumber": 2}},
    )
    rows = views.gantt(body, now=datetime(2026, 1, 1, 0, 0, 40, tzinfo=UTC))
    assert [(b.task_id, b.offset_pct, b.width_pct) for row in rows for b in row.bars] == [
        ("start", 0.0, 25.0),
        ("section.a", 25.0, 75.0),
    ]


def test_the_gantt_shows_every_try_on_record_in_the_task_instances_row() -> None:
    """Try 1 failed (its pod records it), try 2 is the status's current one; a pod of try 2 (say,
    before a deferral) adds nothing: the status spans the whole current try."""
    body = run(
        "r1",
        "2026-01-01T00:00:00Z",
        "success",
        {"flaky": "success", "after": "success"},
        flaky={"startDate": "2026-01-01T00:00:20Z", "endDate": "2026-01-01T00:00:30Z", "tryNumber": 2},
        after={"startDate": "2026-01-01T00:00:30Z", "endDate": "2026-01-01T00:00:40Z", "tryNumber": 1},
    )
    recorded = views.earlier_try_spans(
        [
            (1, "Failed", "2026-01-01T00:00:00Z", "2026-01-01T00:00:10Z"),
            (2, "Succeeded", "2026-01-01T00:00:20Z", "2026-01-01T00:00:25Z"),
            (1, "Pending", None, None),  # never started: no bar
        ]
    )
    rows = views.gantt(body, now=datetime(2026, 1, 1, 0, 1, tzinfo=UTC), earlier_tries={"flaky": recorded})
    assert [
        (row.task_id, [(b.try_number, b.state, b.offset_pct, b.width_pct) for b in row.bars]) for row in rows
    ] == [
        ("flaky", [(1, "failed", 0.0, 25.0), (2, "success", 50.0, 25.0)]),
        ("after", [(1, "success", 75.0, 25.0)]),
    ]


def test_params_become_typed_form_fields_and_conf_is_checked_against_the_params_schema() -> None:
    spec = {
        "params": {"greeting": "hello", "count": 3, "dry": False, "mode": "fast", "extra": {"a": 1}},
        "paramsSchema": {
            "type": "object",
            "properties": {
                "count": {"type": "integer", "minimum": 1},
                "mode": {"type": "string", "enum": ["fast", "slow"], "description": "how"},
                "who": {"type": "string"},
            },
            "required": ["who"],
        },
    }
    fields = {f.name: f for f in params_form.param_fields(spec)}
    assert {n: f.kind for n, f in fields.items()} == {
        "greeting": "string",
        "count": "integer",
        "dry": "boolean",
        "mode": "string",
        "extra": "json",
        "who": "string",
    }
    assert fields["mode"].default == "fast" and fields["mode"].description == "how"
    assert fields["mode"].schema == {"type": "string", "enum": ["fast", "slow"]}
    assert fields["who"].default is None and not fields["who"].has_default and fields["count"].has_default
    assert params_form.params_schema(spec) == spec["paramsSchema"]
    assert params_form.conf_errors(spec, {"who": "ann", "count": 4, "mode": "slow", "other": [1]}) == []
    assert params_form.conf_errors(spec, {"count": "four", "mode": "medium"}) == [
        "param 'count': 'four' is not of type 'integer'",
        "param 'mode': 'medium' is not one of ['fast', 'slow']",
        "param 'who': no value given and it has no default",
    ]
    # Without a schema any conf goes, as Airflow accepts any value for a plain param.
    assert params_form.conf_errors({"params": {"count": 3}}, {"count": "four"}) == []


def test_doc_md_with_script_or_event_handlers_stays_inert() -> None:
    html = render_markdown(
        "# Title\n<script>alert(1)</script>\n\n<img src=x onerror=alert(1)>\n\n"
        "[link](javascript:alert(1)) [ok](https://example.com)\n\n**bold**"
    )
    assert "<script" not in html and "<img" not in html
    assert 'href="javascript' not in html
    assert "&lt;script&gt;" in html
    assert "<strong>bold</strong>" in html and "<h1>Title</h1>" in html
    assert 'href="https://example.com" rel="noopener noreferrer nofollow"' in html


def test_the_css_state_colours_are_airflows_table() -> None:
    css = (Path(views.__file__).parent / "static" / "app.css").read_text()
    found = dict(re.findall(r"\.s-([a-z_]+) \{ background-color: ([a-z]+); \}", css))
    assert found == views.STATE_COLORS


def test_dot_draws_groups_as_clusters_with_edge_labels_and_trigger_rules() -> None:
    text = graphs.dag_dot(dag())
    assert 'subgraph "cluster_section"' in text
    assert '"section.b" -> "end" [label="when done"]' in text
    assert "trigger rule: all_done" in text


def test_dot_colours_a_runs_states_and_folds_a_collapsed_group() -> None:
    text = graphs.dag_dot(dag(), states={"start": "success", "section.a": "failed"}, collapsed={"section"})
    assert "cluster_section" not in text
    assert '"group:section" [label="section (group)"' in text
    assert 'color="red"' in text  # the folded group shows its worst state, as the grid does
    assert '"start" -> "group:section";' in text and '"group:section" -> "end"' in text
    assert "section.a" not in text.split("->", 1)[1]  # no edge inside the folded group


def test_dot_escapes_quotes_and_an_invalid_dag_says_so() -> None:
    assert graphs.quote('say "hi"\\') == '"say \\"hi\\"\\\\"'
    invalid = graphs.dag_dot(dag(tasks=[{"id": "x", "dependsOn": ["missing"]}]))
    assert "this DAG is invalid" in invalid


def test_graphviz_lays_the_dot_out() -> None:
    dot = require_executable("dot", "run hack/install-browser.sh (apt-get install graphviz)")
    svg = subprocess.run(
        [dot, "-Tsvg"], input=graphs.dag_dot(dag()), capture_output=True, text=True, check=True
    ).stdout
    ids = {g.get("id") for g in ElementTree.fromstring(svg).iter("{http://www.w3.org/2000/svg}g")}
    assert {"node-section.a", "node-group:section", "cluster-section"} & ids == {
        "node-section.a",
        "cluster-section",
    }


def test_the_vendored_graphviz_is_the_version_the_lockfile_pins() -> None:
    """`cd ui && npm ci && npm run build` reproduces static/vendor/viz.js: same package, same version."""
    import json

    root = Path(views.__file__).resolve().parents[2]
    locked = json.loads((root / "ui" / "package-lock.json").read_text())["packages"][
        "node_modules/@viz-js/viz"
    ]
    wanted = json.loads((root / "ui" / "package.json").read_text())["dependencies"]["@viz-js/viz"]
    vendored = (Path(views.__file__).parent / "static" / "vendor" / "viz.js").read_text()[:200]
    assert locked["version"] == wanted
    assert f"Viz.js {wanted}" in vendored


# ------------------------------------------------------------------------------- asset schedule


def test_the_dag_page_writes_the_asset_condition_with_each_asset_awaited_or_updated() -> None:
    dag = {
        "metadata": {"name": "consumer", "namespace": "ns"},
        "spec": {
            "assetSchedule": {"any": [{"uri": "s3://a/x"}, {"all": [{"uri": "s3://b/y"}, {"alias": "al"}]}]}
        },
        "status": {"awaitedAssets": ["alias:al", "s3://b/y"]},
    }
    tokens = views.asset_schedule(dag)
    assert "".join(t.text for t in tokens) == "s3://a/x | (s3://b/y & alias al)"
    assert [(t.key, t.awaited) for t in tokens if t.key] == [
        ("s3://a/x", False), ("s3://b/y", True), ("alias:al", True),
    ]  # fmt: skip
    assert views.dag_row(dag, []).asset_schedule == tokens
    assert views.dag_row(dag, []).schedule == "Asset", "Airflow's AssetTriggeredTimetable.summary"
    with_summary = {**dag, "status": {**dag["status"], "timetableSummary": "None"}}
    assert views.dag_row(with_summary, []).schedule == "Asset"


def test_a_dag_not_scheduled_on_assets_or_with_an_invalid_condition_shows_none() -> None:
    assert views.asset_schedule({"metadata": {}, "spec": {"schedule": "@daily"}}) == ()
    assert views.asset_schedule({"metadata": {}, "spec": {"assetSchedule": {"all": []}}}) == ()


def test_the_dag_list_and_header_show_the_display_name_and_the_name() -> None:
    from controller.ui import pages

    body = dag(displayName="Sample DAG with Display Name")
    row = views.dag_row(body, [])
    env = pages.environment()
    listing = env.get_template("dags.html").render(
        rows=[row], total=1, query="", tag="", status="all", pages=1, page=1, viewer="me", csrf="x"
    )
    header = str(env.get_template("_macros.html").module.dag_header(body, row, "grid"))  # type: ignore[attr-defined]
    for html in (listing, header):
        assert "Sample DAG with Display Name" in html and 'title="the DAG\'s name">etl<' in html


def test_task_display_names_are_shown_in_the_grid_graph_and_pages_with_the_id_kept() -> None:
    """Airflow's `task_display_name` (`spec.tasks[].displayName`): the grid's row and the graph's node
    show it, the id stays in the row's tooltip, the node's tooltip and id, and the row's key; a mapped
    instance shows it with its index."""
    body = dag()
    body["spec"]["tasks"][1]["displayName"] = "Step A (nice)"
    rows = {r.key: r for r in views.grid(body, []).rows}
    assert (rows["section.a"].label, rows["section.a"].tooltip) == ("Step A (nice)", "section.a")
    assert (rows["section.b"].label, rows["section.b"].tooltip) == ("section.b", "")
    names = views.task_display_names(body)
    assert names == {"section.a": "Step A (nice)"}
    assert views.task_label("section.a", names) == "Step A (nice)"
    assert views.task_label("section.a[3]", names) == "Step A (nice) [3]"
    assert views.task_label("start", names) == "start"
    text = graphs.dag_dot(body)
    node = next(line for line in text.splitlines() if '"section.a" [' in line)
    assert 'label="Step A (nice)"' in node and 'id="node-section.a"' in node
    assert 'tooltip="section.a' in node
