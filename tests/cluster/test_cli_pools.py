"""`zonda pools list|get|set|delete|import|export` against a real apiserver, with the controller
writing the Pools' status: Airflow's pool commands on Pool resources, and `set` never overwriting a
concurrent edit."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import click
import pytest

from controller.cli.pools import write_pool
from controller.devtools.devcluster import Cluster
from controller.kube import POOLS, Kube
from tests.cluster.zonda_processes import controller, get, wait_for, zonda


def test_pools_set_list_get_and_delete_as_airflow(cluster: Cluster, namespace: str, tmp_path: Path) -> None:
    ns = ["-n", namespace]

    def listing() -> str | None:  # a just-started apiserver answers 429 while its storage initialises
        done = zonda(cluster, "pools", "list", *ns, check=False)
        return done.stdout if done.returncode == 0 else None

    before = str(wait_for(listing, "the Pool resource to be served")).splitlines()
    assert before[0].split()[:3] == ["NAME", "SLOTS", "USED"]
    assert before[1].split()[:2] == ["default-pool", "128"], "Airflow always lists default_pool"

    created = zonda(cluster, "pools", "set", "warehouse_pool", "3", "the warehouse's connections", *ns)
    assert created.stdout.strip() == "pool.zonda.dev/warehouse-pool created"
    spec = get(cluster, namespace, "pool", "warehouse-pool")["spec"]
    assert spec == {"slots": 3, "description": "the warehouse's connections", "includeDeferred": False}

    with controller(cluster, namespace, tmp_path):
        wait_for(
            lambda: (
                (get(cluster, namespace, "pool", "warehouse-pool").get("status") or {}).get("used") == "0/3"
            ),
            "the controller to count the new pool",
        )
    listed = zonda(cluster, "pools", "list", *ns).stdout.splitlines()
    assert [line.split()[0] for line in listed[1:]] == ["default-pool", "warehouse-pool"]
    row = listed[2].split()
    assert row[:8] == ["warehouse-pool", "3", "0/3", "0", "0", "0", "3", "0"] and row[8] == "False", listed
    assert listed[2].endswith("the warehouse's connections")

    updated = zonda(cluster, "pools", "set", "warehouse_pool", "5", "bigger", "--include-deferred", *ns)
    assert updated.stdout.strip() == "pool.zonda.dev/warehouse-pool configured"
    spec = get(cluster, namespace, "pool", "warehouse-pool")["spec"]
    assert spec == {"slots": 5, "description": "bigger", "includeDeferred": True}
    again = zonda(cluster, "pools", "set", "warehouse-pool", "5", "bigger", "--include-deferred", *ns)
    assert again.stdout.strip() == "pool.zonda.dev/warehouse-pool unchanged"

    shown = zonda(cluster, "pools", "get", "warehouse_pool", *ns).stdout.splitlines()
    assert len(shown) == 2 and shown[1].split()[:2] == ["warehouse-pool", "5"] and "True" in shown[1]
    default = zonda(cluster, "pools", "get", "default_pool", *ns).stdout.splitlines()
    assert default[1].split()[:2] == ["default-pool", "128"]

    refused = zonda(cluster, "pools", "delete", "default_pool", *ns, check=False)
    assert refused.returncode != 0 and "default_pool cannot be deleted" in refused.stderr
    zonda(cluster, "pools", "set", "default_pool", "16", "Default pool", *ns)
    assert get(cluster, namespace, "pool", "default-pool")["spec"]["slots"] == 16
    refused = zonda(cluster, "pools", "delete", "default-pool", *ns, check=False)
    assert refused.returncode != 0 and "default_pool cannot be deleted" in refused.stderr

    assert zonda(cluster, "pools", "delete", "warehouse_pool", *ns).stdout.strip() == (
        "pool.zonda.dev/warehouse-pool deleted"
    )
    names = [p["metadata"]["name"] for p in get(cluster, namespace, "pools")["items"]]
    assert names == ["default-pool"]
    missing = zonda(cluster, "pools", "delete", "warehouse_pool", *ns, check=False)
    assert missing.returncode != 0 and "Pool warehouse_pool does not exist" in missing.stderr
    missing = zonda(cluster, "pools", "get", "nope", *ns, check=False)
    assert missing.returncode != 0 and "Pool nope does not exist" in missing.stderr

    bad = zonda(cluster, "pools", "set", "Bad Name!", "1", "x", *ns, check=False)
    assert bad.returncode == 2 and "cannot name a Pool resource" in bad.stderr
    bad = zonda(cluster, "pools", "set", "small", "-2", "x", *ns, check=False)
    assert bad.returncode == 2 and "Invalid value for SLOTS" in bad.stderr, bad.stderr
    unlimited = zonda(cluster, "pools", "set", "small", "-1", "no limit", *ns)
    assert unlimited.stdout.strip() == "pool.zonda.dev/small created"
    assert zonda(cluster, "pools", "get", "small", *ns).stdout.splitlines()[1].split()[:2] == [
        "small",
        "unlimited",
    ]


def test_pools_set_does_not_overwrite_a_change_made_since_it_read_the_pool(
    cluster: Cluster, namespace: str
) -> None:
    zonda(cluster, "pools", "set", "gpu", "2", "two cards", "-n", namespace)

    async def race() -> None:
        async with await Kube.connect(str(cluster.kubeconfig), component="zonda-test") as kube:
            read = await kube.get_custom(POOLS, namespace, "gpu")
            assert read is not None
            # Someone else resizes the pool between our read and our write.
            await kube.patch_custom(POOLS, namespace, "gpu", {"spec": {"slots": 4}})
            wanted = {"slots": 1, "description": "one card", "includeDeferred": False}
            with pytest.raises(click.ClickException, match="changed since it was read"):
                await write_pool(kube, namespace, "gpu", read, wanted)
            with pytest.raises(click.ClickException, match="created by someone else"):
                await write_pool(kube, namespace, "gpu", None, wanted)

    asyncio.run(race())
    assert get(cluster, namespace, "pool", "gpu")["spec"] == {
        "slots": 4,
        "description": "two cards",
        "includeDeferred": False,
    }, "the concurrent change survives"


def test_pools_move_from_airflow_with_import_and_export(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    """`airflow pools export` JSON in, the same shape out; what cannot be a Pool is named, the rest lands."""
    exported_by_airflow = {
        "default_pool": {"slots": 64, "description": "Default pool", "include_deferred": False},
        "etl_pool": {"slots": 3, "description": "nightly loads", "include_deferred": True},
        "broken": {"slots": 2},
    }
    source = tmp_path / "airflow-pools.json"
    source.write_text(json.dumps(exported_by_airflow))
    imported = zonda(cluster, "pools", "import", str(source), "-n", namespace, check=False)
    assert imported.returncode == 1 and imported.stdout.strip() == "Uploaded 2 pool(s)", imported
    assert "Failed to update pool(s): broken (needs slots and description)" in imported.stderr
    specs = {p["metadata"]["name"]: p["spec"] for p in get(cluster, namespace, "pools")["items"]}
    assert specs == {
        "default-pool": {"slots": 64, "description": "Default pool", "includeDeferred": False},
        "etl-pool": {"slots": 3, "description": "nightly loads", "includeDeferred": True},
    }

    target = tmp_path / "zonda-pools.json"
    exported = zonda(cluster, "pools", "export", str(target), "-n", namespace)
    assert exported.stdout.strip() == f"Exported 2 pool(s) to {target}"
    assert json.loads(target.read_text()) == {
        "default-pool": exported_by_airflow["default_pool"],
        "etl-pool": exported_by_airflow["etl_pool"],
    }
    again = zonda(cluster, "pools", "import", str(target), "-n", namespace)
    assert again.stdout.strip() == "Uploaded 2 pool(s)", "importing what is there changes nothing"
