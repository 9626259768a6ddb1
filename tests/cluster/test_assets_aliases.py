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
from tests.cluster.zonda_processes import (
    apply,
    controller,
    create_asset_events,
    get,
    runs_of,
    wait_for,
    wait_run_finished,
)

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


def test_the_history_limit_keeps_the_events_a_held_alias_consumer_has_not_consumed(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    """A DAG scheduled only on an alias resolved to the asset consumes the asset's direct events too, so
    the asset's history limit (3) waits for it as for a URI consumer: held at maxActiveRuns 1 (its first
    run waits on a gate file) while seven direct events arrive, none is deleted before its run takes
    them, and that run names all seven. The positive control: once consumed, the limit prunes to three."""
    from zonda.resources.asset_models import asset_name

    gate = tmp_path / "gate"
    dag = consumer("alias-consumer", "orders-alias")
    dag["spec"]["maxActiveRuns"] = 1
    dag["spec"]["tasks"] = [
        {
            "id": "t",
            "operator": "BashOperator",
            "args": {"bash_command": f"while [ ! -e {gate} ]; do sleep 0.1; done"},
        }
    ]
    apply(cluster, namespace, dag)
    limited = {"metadata": {"name": asset_name(URI)}, "spec": {"uri": URI, "eventsHistoryLimit": 3}}
    apply(cluster, namespace, {"apiVersion": "zonda.dev/v1alpha1", "kind": "Asset", **limited})
    held = [f"direct-{i}" for i in range(7)]

    def asset_status() -> dict[str, Any]:
        status: dict[str, Any] = get(cluster, namespace, "asset", asset_name(URI)).get("status") or {}
        return status

    def cursor_names(name: str) -> bool:
        status = get(cluster, namespace, "dag", "alias-consumer").get("status") or {}
        return name in (status.get("assetCursorEvents") or [])

    def kept() -> list[str]:
        return sorted(e["metadata"]["name"] for e in get(cluster, namespace, "assetevents")["items"])

    with controller(cluster, namespace, tmp_path, executor="local"):
        create_event(cluster, namespace, "through-alias", ["orders-alias"])
        first = [["through-alias"]]
        wait_for(lambda: consumed(cluster, namespace, "alias-consumer") == first, "the first run")
        wait_for(lambda: cursor_names("through-alias"), "through-alias consumed")
        wait_for(lambda: asset_status().get("aliases") == ["orders-alias"], "the alias resolved to the asset")
        assert asset_status().get("consumingDags", []) == [], "scheduled on the alias, not on the URI"
        create_asset_events(cluster, namespace, URI, held)  # direct: not through the alias
        wait_for(
            lambda: any(
                c["type"] == "Ready" and (c.get("message") or "").startswith("7 asset events queued")
                for c in (get(cluster, namespace, "dag", "alias-consumer").get("status") or {}).get(
                    "conditions", []
                )
            ),
            "the alias consumer to say seven events are queued",
        )
        # eight events past a limit of three: the consumed one goes, the four the consumer awaits stay
        wait_for(
            lambda: (s := asset_status()).get("events") == 7 and s.get("heldEvents") == 4,
            "the Asset to keep seven, four of them held for the alias consumer",
        )
        assert kept() == held, "the apiserver keeps every event the alias consumer has not consumed"
        assert "unconsumedDeleted" not in asset_status()
        gate.touch()
        wait_for(lambda: cursor_names("direct-6"), "the held events consumed")
        runs = runs_of(cluster, namespace, "alias-consumer")
        for run in runs:
            finished = wait_run_finished(cluster, namespace, run["metadata"]["name"])
            assert finished["status"]["state"] == "success"
        # the positive control: nothing pending any more, the limit prunes to the newest three
        wait_for(lambda: kept() == held[-3:], "the apiserver to hold the newest three events")
        wait_for(
            lambda: (s := asset_status()).get("events") == 3 and s.get("heldEvents", 0) == 0,
            "the Asset to count three, none held",
        )
    assert sorted(consumed(cluster, namespace, "alias-consumer")) == sorted([["through-alias"], held])
