"""AssetAlias schedules on a real apiserver: as wide as Airflow's, and an alias nothing resolves told.

Airflow (2.10 `_DatasetAliasCondition`, 3.x `AssetAliasCondition`) reads an alias in a schedule as any
of the assets events were emitted through it for: once resolved, a later update of such an asset by
anyone triggers the DAG, not only one emitted through the alias. An alias no task outlets and nothing
resolved is accepted (as Airflow) but reported as `AssetAliasesResolvable=False`. Runs are counted
from the apiserver.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from controller.devtools.devcluster import Cluster
from tests.cluster.zonda_processes import apply, controller, get, runs_of, wait_for

URI = "s3://assets-alias/orders"


def consumer(name: str, alias: str) -> dict[str, Any]:
    return {
        "apiVersion": "zonda.dev/v1alpha1",
        "kind": "DAG",
        "metadata": {"name": name},
        "spec": {"assetSchedule": {"alias": alias}, "tasks": [{"id": "t", "operator": "EmptyOperator"}]},
    }


def alias_producer(alias: str) -> dict[str, Any]:
    return {
        "apiVersion": "zonda.dev/v1alpha1",
        "kind": "DAG",
        "metadata": {"name": "alias-producer"},
        "spec": {
            "schedule": None,
            "tasks": [{"id": "t", "operator": "EmptyOperator", "outlets": [{"alias": alias}]}],
        },
    }


def create_event(cluster: Cluster, namespace: str, name: str, aliases: list[str]) -> None:
    body = {
        "apiVersion": "zonda.dev/v1alpha1",
        "kind": "AssetEvent",
        "metadata": {"name": name},
        "spec": {"uri": URI, "aliases": aliases},
    }
    cluster.kubectl("create", "-n", namespace, "-f", "-", input=json.dumps(body))


def resolvable(cluster: Cluster, namespace: str, dag: str) -> tuple[str, str] | None:
    status = get(cluster, namespace, "dag", dag).get("status") or {}
    found = [c for c in status.get("conditions") or [] if c["type"] == "AssetAliasesResolvable"]
    return (found[0]["status"], found[0]["reason"]) if found else None


def consumed(cluster: Cluster, namespace: str, dag: str) -> list[list[str]]:
    return [
        [e["name"] for e in r["spec"].get("triggeringAssetEvents") or []]
        for r in runs_of(cluster, namespace, dag)
    ]


def test_an_alias_resolved_by_one_event_then_matches_its_assets_later_events_and_an_orphan_is_told(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    apply(cluster, namespace, consumer("alias-consumer", "orders-alias"))
    apply(cluster, namespace, consumer("later-consumer", "later-alias"))
    with controller(cluster, namespace, tmp_path, executor="local"):
        for dag in ("alias-consumer", "later-consumer"):
            wait_for(lambda d=dag: resolvable(cluster, namespace, d) == ("False", "NoAliasProducer"), "told")
        events = get(cluster, namespace, "events")["items"]
        assert any(e["reason"] == "UnresolvedAssetAlias" for e in events), "a Warning Event where users look"

        create_event(cluster, namespace, "through-alias", ["orders-alias"])
        wait_for(
            lambda: consumed(cluster, namespace, "alias-consumer") == [["through-alias"]], "the alias run"
        )
        wait_for(
            lambda: (
                "orders-alias"
                in next(
                    (a.get("status") or {}).get("aliases", [])
                    for a in get(cluster, namespace, "assets")["items"]
                )
            ),
            "the Asset to record the alias it resolved",
        )
        wait_for(
            lambda: resolvable(cluster, namespace, "alias-consumer") == ("True", "AliasesResolvable"), "ok"
        )

        create_event(cluster, namespace, "direct", [])  # not through the alias: Airflow triggers it too
        wait_for(
            lambda: consumed(cluster, namespace, "alias-consumer") == [["through-alias"], ["direct"]],
            "a run for the resolved asset's direct event",
        )
        assert consumed(cluster, namespace, "later-consumer") == [], "another alias is not resolved by it"

        apply(cluster, namespace, alias_producer("later-alias"))  # a producer applied later
        wait_for(
            lambda: resolvable(cluster, namespace, "later-consumer") == ("True", "AliasesResolvable"), "ok"
        )
    assert len(runs_of(cluster, namespace, "alias-consumer")) == 2
