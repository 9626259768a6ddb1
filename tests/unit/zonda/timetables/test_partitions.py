"""Partition mappers, windows and CronPartitionTimetable against what Airflow 3.3's scheduler makes of
the same keys: `reference.json`'s `partitions` (`hack/airflow_reference/af3_reference.py --partitions`,
run under Airflow 3.3.2) for every DAG of its own `example_asset_partition.py`, rendered by Zonda."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pendulum
import pytest

from tests.airflow_examples import compare
from zonda.authoring import rendering
from zonda.schedules.partitioned_assets import Partitions, target_keys
from zonda.timetables import load_timetable
from zonda.timetables.base import AirflowTimetableInvalid
from zonda.timetables.partitions import (
    DayWindow,
    FanOutMapper,
    FixedKeyMapper,
    MinimumCount,
    PartitionSpecInvalid,
    RollupMapper,
    SegmentWindow,
    StartOfDayMapper,
    StartOfQuarterMapper,
    StartOfWeekMapper,
    WaitForAll,
    mapper_from_manifest,
)
from zonda.timetables.trigger import CronPartitionTimetable

REFERENCE: dict[str, Any] = compare.reference(compare.AF3)
FACTS: dict[str, Any] = REFERENCE["partitions"]


@pytest.fixture(scope="module")
def manifests() -> dict[str, dict[str, Any]]:
    report = rendering.render_paths(
        [compare.AF3 / "dags" / "core" / "example_asset_partition.py"], airflow_compat=True
    )
    assert report.file_errors == {}
    return {dag.dag_id: dag.manifest["spec"] for dag in report.dags if dag.manifest is not None}


def _leaves(raw: Any) -> list[dict[str, Any]]:
    for kind in ("all", "any"):
        if kind in raw:
            return [leaf for item in raw[kind] for leaf in _leaves(item)]
    return [raw]


def _ours(mapper: Any, key: str) -> dict[str, Any]:
    try:
        keys = target_keys(mapper, key)
    except Exception as error:
        return {"error": type(error).__name__}
    found: dict[str, Any] = {"keys": keys}
    dates = {k: mapper.to_partition_date(k) for k in keys}
    found["partition_dates"] = {k: d.isoformat() if d else None for k, d in dates.items()}
    if isinstance(mapper, RollupMapper):
        found["upstream"] = {k: sorted(mapper.to_upstream(k)) for k in keys}
    return found


def test_every_partitioned_example_renders_with_its_airflow_timetable(manifests: dict[str, Any]) -> None:
    assert set(manifests) == set(FACTS)
    for dag_id, facts in FACTS.items():
        spec = manifests[dag_id]
        kind = facts["timetable"]
        if kind == "CronPartitionTimetable":
            assert spec["timetable"]["class"].endswith(".CronPartitionTimetable"), dag_id
        elif kind == "PartitionedAssetTimetable":
            assert "assetPartitions" in spec and "assetSchedule" in spec, dag_id
        else:
            assert kind == "PartitionedAtRuntime" and spec["partitionedAtRuntime"] is True, dag_id


def test_the_migration_report_says_where_partitioned_runs_differ() -> None:
    report = rendering.render_paths(
        [compare.AF3 / "dags" / "core" / "example_asset_partition.py"], airflow_compat=True
    )
    noted = {
        d.dag_id for d in report.dags if any("PartitionedAssetTimetable run" in x for x in d.differences)
    }
    assert noted == {d for d, facts in FACTS.items() if facts["timetable"] == "PartitionedAssetTimetable"}


def test_cron_partition_keys_are_airflows(manifests: dict[str, Any]) -> None:
    compared = 0
    for dag_id, facts in FACTS.items():
        for firing, expected in (facts.get("firings") or {}).items():
            timetable = load_timetable(
                manifests[dag_id]["timetable"]["class"], manifests[dag_id]["timetable"]["params"]
            )
            at = pendulum.parse(firing)
            assert timetable.partition_key(at) == expected["key"], (dag_id, firing)
            assert timetable.partition_date(at) == pendulum.parse(expected["date"]), (dag_id, firing)
            compared += 1
    assert compared == 7


def test_mapped_keys_are_airflows(manifests: dict[str, Any]) -> None:
    """Every sample upstream key, through every asset's mapper of every partitioned example: the same
    downstream keys (or refusal), partition dates and rollup windows as Airflow's scheduler."""
    compared = 0
    for dag_id, facts in FACTS.items():
        if "assets" not in facts:
            continue
        spec = manifests[dag_id]
        partitions = Partitions.from_manifest(spec["assetPartitions"])
        by_name = {leaf.get("name", leaf["uri"]): leaf["uri"] for leaf in _leaves(spec["assetSchedule"])}
        for asset, samples in facts["assets"].items():
            uri = by_name[asset.removeprefix("name:")] if asset.startswith("name:") else asset
            for key, theirs in samples.items():
                # a fan-out over a SegmentWindow lists a frozenset: its order is no fact
                theirs = {**theirs, "keys": sorted(theirs["keys"])} if "keys" in theirs else theirs
                ours = _ours(partitions.mapper(uri), key)
                ours = {**ours, "keys": sorted(ours["keys"])} if "keys" in ours else ours
                assert ours == theirs, (dag_id, asset, key)
                compared += 1
    assert compared == 17 * 9  # 17 (DAG, asset) pairs, 9 sample keys each


def test_cron_partition_timetable_offsets_and_refusals() -> None:
    daily = CronPartitionTimetable("0 0 * * *", timezone="Asia/Taipei", run_offset=-1)
    # Taipei's midnight of 15 June is 16:00 UTC on the 14th: the key is local, one firing back
    assert daily.partition_key(dt.datetime(2026, 6, 14, 16, tzinfo=dt.UTC)) == "2026-06-14T00:00:00"
    assert CronPartitionTimetable.deserialize(daily.serialize()) == daily
    with pytest.raises(AirflowTimetableInvalid, match="Run offset other than integer"):
        CronPartitionTimetable("0 0 * * *", timezone="UTC", run_offset=dt.timedelta(days=1))  # type: ignore[arg-type]
    with pytest.raises(AirflowTimetableInvalid, match="run_immediately"):
        CronPartitionTimetable("0 0 * * *", timezone="UTC", run_immediately=True)


def test_mappers_round_trip_through_the_manifest() -> None:
    for mapper in (
        RollupMapper(upstream_mapper=StartOfDayMapper(), window=DayWindow(), wait_policy=MinimumCount(-2)),
        RollupMapper(upstream_mapper=FixedKeyMapper("all"), window=SegmentWindow(["a", "b"])),
        FanOutMapper(upstream_mapper=StartOfWeekMapper(), window=DayWindow(), max_downstream_keys=30),
        StartOfQuarterMapper(timezone="Europe/Paris", input_format="%Y-%m-%d"),
    ):
        assert mapper_from_manifest(mapper.to_manifest()) == mapper
    assert StartOfQuarterMapper().to_downstream("2024-05-13T10:42:15") == "2024-Q2"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"kind": "HalfDayMapper"}, "mapper.kind: unknown partition mapper 'HalfDayMapper'"),
        (
            {
                "kind": "RollupMapper",
                "upstreamMapper": {"kind": "IdentityMapper"},
                "window": {"kind": "DayWindow"},
            },
            "DayWindow expects decoded values of type 'datetime', but IdentityMapper decodes to 'str'",
        ),
        (
            {
                "kind": "FanOutMapper",
                "upstreamMapper": {"kind": "IdentityMapper"},
                "window": {"kind": "HourWindow"},
            },
            "no default downstream_mapper for window type HourWindow",
        ),
        ({"kind": "FixedKeyMapper", "downstreamKey": ""}, "downstream_key must be a non-empty str"),
        (
            {"kind": "IdentityMapper", "maxDownstreamKeys": 0},
            "max_downstream_keys must be a positive integer",
        ),
    ],
)
def test_a_bad_mapper_is_refused_saying_where(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(PartitionSpecInvalid, match=r"^mapper") as caught:
        mapper_from_manifest(raw)
    assert message in str(caught.value)


def test_wait_policies_count_as_airflows() -> None:
    assert WaitForAll().is_satisfied(3, 3) and not WaitForAll().is_satisfied(2, 3)
    assert MinimumCount(2).is_satisfied(2, 3) and not MinimumCount(2).is_satisfied(1, 3)
    assert MinimumCount(-1).is_satisfied(2, 3) and not MinimumCount(-1).is_satisfied(1, 3)
    with pytest.raises(ValueError, match="degenerate"):
        MinimumCount(0)
