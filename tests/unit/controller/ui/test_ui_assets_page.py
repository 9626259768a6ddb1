"""The Assets page's rows: from the Assets' status, each consumer marked waiting when its status awaits it;
and its graph, producer DAGs -> asset -> consumer DAGs, built from those rows."""

from __future__ import annotations

import shutil
import subprocess
from xml.etree import ElementTree

import pytest

from controller.ui.assets_page import AssetRow, Consumer, asset_rows
from controller.ui.graphs import asset_graph, assets_dot

SVG, XLINK = "{http://www.w3.org/2000/svg}", "{http://www.w3.org/1999/xlink}"


def test_rows_read_the_asset_status_and_the_consumers_awaited_assets() -> None:
    assets = [
        {
            "metadata": {"name": "b-1"},
            "spec": {"uri": "s3://b/z"},
            "status": {
                "consumingDags": ["c1", "c2"],
                "producingDags": ["p"],
                "events": 3,
                "lastEvent": "e3",
                "lastEventTime": "2026-01-01T00:00:00Z",
                "aliases": ["al"],
            },
        },
        {"metadata": {"name": "a-1"}, "spec": {"uri": "s3://b/a"}},
    ]
    dags = {"c1": {"status": {"awaitedAssets": ["s3://b/z"]}}, "c2": {"status": {"awaitedAssets": []}}}
    first, second = asset_rows(assets, dags)
    assert (first.uri, first.producers, first.events) == ("s3://b/a", [], 0)
    assert second.consumers == [Consumer("c1", waiting=True), Consumer("c2", waiting=False)]
    assert (second.last_event, second.events, second.aliases) == ("e3", 3, ["al"])


def _row(uri: str, producers: list[str], consumers: list[Consumer]) -> AssetRow:
    return AssetRow(uri, uri, producers, consumers, last_event="", last_event_time="", events=0)


def test_the_graph_joins_producers_to_assets_to_consumers_each_dag_drawn_once() -> None:
    rows = [
        _row("s3://b/a", ["p"], [Consumer("c", waiting=False)]),
        _row("s3://b/z", ["p", "q"], [Consumer("c", waiting=True), Consumer("p", waiting=False)]),
        _row("s3://b/outside", [], []),  # events only from kubectl: a node with no edges
    ]
    graph = asset_graph(rows)
    assert graph.dags == ["c", "p", "q"]
    assert graph.assets == ["s3://b/a", "s3://b/z", "s3://b/outside"]
    assert graph.produces == [("p", "s3://b/a"), ("p", "s3://b/z"), ("q", "s3://b/z")]
    assert graph.consumes == [("s3://b/a", "c", False), ("s3://b/z", "c", True), ("s3://b/z", "p", False)]


def test_the_graph_dot_names_edges_links_dags_and_dashes_what_is_awaited() -> None:
    rows = [_row('s3://b/"q"', ["p"], [Consumer("c", waiting=True), Consumer("d", waiting=False)])]
    dot = assets_dot("ns", rows)
    assert '"dag:p" [label="p", id="node-dag:p", URL="/dags/ns/p", tooltip="DAG p"];' in dot
    assert '"asset:s3://b/\\"q\\"" [label="s3://b/\\"q\\"", id="node-asset:s3://b/\\"q\\""' in dot
    assert '"dag:p" -> "asset:s3://b/\\"q\\"" [id="edge-dag:p->asset:s3://b/\\"q\\""];' in dot
    waiting = next(line for line in dot.splitlines() if '-> "dag:c"' in line)
    assert 'style="dashed"' in waiting and "c still waits for an event of" in waiting
    assert "dashed" not in next(line for line in dot.splitlines() if '-> "dag:d"' in line)


def test_the_graph_dot_is_laid_out_by_graphviz_with_its_edges() -> None:
    dot_program = shutil.which("dot")
    if dot_program is None:
        pytest.skip("Graphviz's dot is not installed (hack/install-browser.sh installs it)")
    rows = [_row("s3://b/a", ["p"], [Consumer("c", waiting=True)])]
    svg = subprocess.run(
        [dot_program, "-Tsvg"], input=assets_dot("ns", rows), capture_output=True, text=True, check=True
    ).stdout
    groups = {g.get("id"): g.get("class") for g in ElementTree.fromstring(svg).iter(f"{SVG}g")}
    assert groups["edge-dag:p->asset:s3://b/a"] == groups["edge-asset:s3://b/a->dag:c"] == "edge"
    assert groups["node-dag:p"] == groups["node-asset:s3://b/a"] == "node"
    links = {a.get(f"{XLINK}href") for a in ElementTree.fromstring(svg).iter(f"{SVG}a")}
    assert links >= {"/dags/ns/p", "/dags/ns/c"}
