"""The rows `zonda pools list` and the UI's Pools page show: from a Pool's spec and the status the
controller wrote; `default_pool` always listed; numbers of an older generation not shown as current."""

from __future__ import annotations

import json
from typing import Any

import click
import pytest

from controller.cli.pools import (
    pools_from_json,
    pools_to_json,
    resource_name,
    wanted_spec,
)
from controller.operations.pool_rows import pool_row, pool_rows


def pool(name: str, spec: dict[str, Any], status: dict[str, Any] | None = None, generation: int = 1) -> Any:
    body: dict[str, Any] = {"metadata": {"name": name, "generation": generation}, "spec": spec}
    if status is not None:
        body["status"] = status
    return body


COUNTED = {
    "observedGeneration": 1,
    "used": "3/4",
    "runningSlots": 2,
    "queuedSlots": 1,
    "deferredSlots": 1,
    "scheduledSlots": 5,
    "openSlots": 1,
}


def test_a_counted_pool_shows_its_spec_and_status() -> None:
    row = pool_row(pool("gpu", {"slots": 4, "description": "cards", "includeDeferred": True}, COUNTED))
    assert row.cells() == ["gpu", "4", "3/4", "2", "1", "5", "1", "1", "True", "cards"]


def test_numbers_of_an_older_generation_or_none_yet_show_as_unknown() -> None:
    stale = pool_row(pool("gpu", {"slots": 8}, COUNTED, generation=2))
    assert stale.cells()[1:8] == ["8", "-", "-", "-", "-", "-", "-"]
    fresh = pool_row(pool("gpu", {"slots": 8}))
    assert fresh.cells()[2:8] == ["-"] * 6


def test_an_unlimited_pool_says_so() -> None:
    row = pool_row(pool("any", {"slots": -1}, {**COUNTED, "openSlots": -1, "used": "3/unlimited"}))
    assert (row.slots, row.open, row.used) == ("unlimited", "unlimited", "3/unlimited")


def test_default_pool_is_listed_without_a_resource_and_by_its_resource_when_there_is_one() -> None:
    rows = pool_rows([pool("zeta", {"slots": 1}), pool("alpha", {"slots": 2})])
    assert [r.name for r in rows] == ["alpha", "default-pool", "zeta"]
    implicit = rows[1]
    assert implicit.implicit and implicit.slots == "128"
    rows = pool_rows([pool("default-pool", {"slots": 16})])
    assert [(r.name, r.slots, r.implicit) for r in rows] == [("default-pool", "16", False)]


def test_airflow_names_become_resource_names_and_bad_ones_are_usage_errors() -> None:
    assert resource_name("My_Pool") == "my-pool"
    with pytest.raises(click.BadParameter, match="cannot name a Pool resource"):
        resource_name("no spaces")
    with pytest.raises(click.BadParameter, match="greater than or equal to -1"):
        wanted_spec(-2, "", False)
    assert wanted_spec(-1, "d", True) == {"slots": -1, "description": "d", "includeDeferred": True}


AIRFLOW_EXPORT = """{
    "default_pool": {"slots": 128, "description": "Default pool", "include_deferred": false},
    "my_pool": {"slots": 4, "description": "warehouse", "include_deferred": true},
    "my-pool": {"slots": 1, "description": "the same pool in Kubernetes"},
    "bad": {"slots": "many", "description": "x"},
    "nameless": {"slots": 2},
    "Not OK!": {"slots": 2, "description": "x"}
}"""


def test_an_airflow_pools_export_becomes_pool_specs_and_says_which_cannot() -> None:
    specs, failed = pools_from_json(AIRFLOW_EXPORT)
    assert specs == {
        "default-pool": {"slots": 128, "description": "Default pool", "includeDeferred": False},
        "my-pool": {"slots": 4, "description": "warehouse", "includeDeferred": True},
    }
    assert set(failed) == {"my-pool", "bad", "nameless", "Not OK!"}
    assert "the same Pool (my-pool) as 'my_pool'" in failed["my-pool"]
    assert failed["nameless"] == "needs slots and description"
    assert "slots" in failed["bad"] and "cannot name a Pool resource" in failed["Not OK!"]
    with pytest.raises(click.ClickException, match="Invalid json file"):
        pools_from_json("[1, 2]")


def test_export_writes_what_import_reads() -> None:
    unlimited = pool("a", {"slots": -1, "includeDeferred": True})
    bodies = [pool("b", {"slots": 2, "description": "bee"}), unlimited]
    text = pools_to_json(bodies)
    assert list(json.loads(text)) == ["a", "b"]
    specs, failed = pools_from_json(text)
    assert failed == {} and specs == {
        "a": {"slots": -1, "description": "", "includeDeferred": True},
        "b": {"slots": 2, "description": "bee", "includeDeferred": False},
    }
