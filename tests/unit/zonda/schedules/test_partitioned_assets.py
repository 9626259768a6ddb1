"""A PartitionedAssetTimetable DAG's runs: one per downstream partition key, once its assets' events
for that key are there, exactly once (deterministic names), the rest waiting for its key."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

from zonda.resources.asset_models import AssetRef, TriggeringEvent, asset_event_name
from zonda.resources.models import DagRunState, DagStatus
from zonda.schedules import assets, dag_plans
from zonda.schedules.partitioned_assets import partition_run_name
from zonda.timetables.partitions import (
    FanOutMapper,
    FixedKeyMapper,
    MinimumCount,
    RollupMapper,
    SegmentWindow,
    StartOfHourMapper,
    StartOfWeekMapper,
    WeekWindow,
)
from zonda.tries.asset_events import OutletEventAccessors

T0 = datetime(2026, 6, 14, 3, tzinfo=UTC)
TASKS = [{"id": "t", "operator": "EmptyOperator"}]


def event(name: str, uri: str, key: str | None, seconds: int = 0) -> TriggeringEvent:
    return TriggeringEvent(
        name=name,
        uri=uri,
        timestamp=T0 + timedelta(seconds=seconds),
        partition_key=key,
        recorded=T0 + timedelta(seconds=seconds),
    )


def spec(condition: dict[str, Any], mapper: Any, **more: Any) -> dict[str, Any]:
    return {
        "assetSchedule": condition,
        "assetPartitions": {"defaultMapper": mapper.to_manifest()},
        "tasks": TASKS,
        **more,
    }


ABC = spec({"all": [{"uri": "a"}, {"uri": "b"}, {"uri": "c"}]}, StartOfHourMapper())


def plan(raw: dict[str, Any], events: list[TriggeringEvent], runs: list[dag_plans.RunRef] = [], status=None):  # noqa: B006
    return dag_plans.plan_dag(
        "d", raw, status=status or DagStatus(), generation=1, created_at=T0 - timedelta(hours=1),
        runs=runs, now=T0 + timedelta(hours=2), asset_events=events,
    )  # fmt: skip


def ref(due: assets.AssetRunDue) -> dag_plans.RunRef:
    return dag_plans.RunRef(
        name=due.run_name, created_at=T0, run_type=None, state=None, data_interval=None,
        consumed_events=frozenset(e.name for e in due.events), partition_key=due.partition_key,
    )  # fmt: skip


def test_a_key_runs_once_all_its_assets_have_it_and_the_run_carries_it() -> None:
    events = [event("a3", "a", "2026-06-14T03:00:00"), event("b3", "b", "2026-06-14T03:15:00", 900)]
    waiting = plan(ABC, events)
    assert waiting.partition_runs == () and waiting.status.awaited_assets == ["c"]
    events.append(event("c3", "c", "2026-06-14T03:30:00", 1800))
    due = plan(ABC, events, status=waiting.status)
    [run] = due.partition_runs
    assert run.partition_key == "2026-06-14T03" and run.partition_date == T0
    assert [e.name for e in run.events] == ["a3", "b3", "c3"]
    assert run.run_name == partition_run_name("d", "2026-06-14T03", ["a3", "b3", "c3"])
    # the same events again, the run found (or the cursor having moved): never a second run
    assert plan(ABC, events, runs=[ref(run)], status=waiting.status).partition_runs == ()
    assert plan(ABC, events, status=due.status).partition_runs == ()


def test_a_late_key_still_finds_its_earlier_events_after_later_keys_ran() -> None:
    hour3 = [event("a3", "a", "2026-06-14T03:00:00"), event("b3", "b", "2026-06-14T03:15:00", 900)]
    hour4 = [
        event(n, u, "2026-06-14T04:00:00", 3600 + i)
        for i, (n, u) in enumerate([("a4", "a"), ("b4", "b"), ("c4", "c")])
    ]
    first = plan(ABC, hour3 + hour4)
    assert [r.partition_key for r in first.partition_runs] == ["2026-06-14T04"]
    late = event("c3", "c", "2026-06-14T03:59:59", 4 * 3600)  # hours later than hour 4's run
    second = plan(ABC, [*hour3, *hour4, late], runs=[ref(first.partition_runs[0])], status=first.status)
    assert [(r.partition_key, [e.name for e in r.events]) for r in second.partition_runs] == [
        ("2026-06-14T03", ["a3", "b3", "c3"])
    ]


def test_keys_that_never_align_never_run() -> None:
    """Airflow's `player_odds_quality_check_wont_ever_to_trigger`: "%Y" and "%Y-%m-%dT%H" never meet."""
    raw = {
        "assetSchedule": {"all": [{"uri": "a"}, {"uri": "b"}]},
        "assetPartitions": {
            "defaultMapper": StartOfHourMapper().to_manifest(),
            "mappers": [{"uri": "a", "mapper": {"kind": "StartOfYearMapper"}}],
        },
        "tasks": TASKS,
    }
    events = [event("a3", "a", "2026-06-14T03:00:00"), event("b3", "b", "2026-06-14T03:00:00")]
    assert plan(raw, events).partition_runs == ()


def test_a_fan_out_makes_one_run_per_key_within_max_active_runs() -> None:
    raw = spec(
        {"uri": "w"}, FanOutMapper(upstream_mapper=StartOfWeekMapper(), window=WeekWindow()), maxActiveRuns=3
    )
    events = [event("w1", "w", "2026-06-15T00:00:00")]
    first = plan(raw, events)
    assert [r.partition_key for r in first.partition_runs] == ["2026-06-15", "2026-06-16", "2026-06-17"]
    assert first.status.asset_cursor_events == []  # the event still has keys to run
    done = [dataclasses.replace(ref(r), state=DagRunState.SUCCESS) for r in first.partition_runs]
    second = plan(raw, events, runs=done, status=first.status)
    assert [r.partition_key for r in second.partition_runs] == ["2026-06-18", "2026-06-19", "2026-06-20"]
    names = {r.run_name for r in first.partition_runs} | {r.run_name for r in second.partition_runs}
    assert len(names) == 6  # one event, six runs: the key is in each name


def test_a_segment_rollup_waits_for_its_policy() -> None:
    rollup = RollupMapper(upstream_mapper=FixedKeyMapper("all"), window=SegmentWindow(["us", "eu", "apac"]))
    early = RollupMapper(
        upstream_mapper=FixedKeyMapper("all"),
        window=SegmentWindow(["us", "eu", "apac"]),
        wait_policy=MinimumCount(2),
    )
    events = [event("us", "r", "us"), event("eu", "r", "eu", 1)]
    assert plan(spec({"uri": "r"}, rollup), events).partition_runs == ()
    [run] = plan(spec({"uri": "r"}, early), events).partition_runs
    assert run.partition_key == "all" and run.partition_date is None
    [run] = plan(spec({"uri": "r"}, rollup), [*events, event("apac", "r", "apac", 2)]).partition_runs
    assert [e.name for e in run.events] == ["us", "eu", "apac"]


def test_events_without_a_key_or_that_the_mapper_refuses_trigger_nothing() -> None:
    raw = spec({"uri": "r"}, FixedKeyMapper("x"))
    assert plan(raw, [event("none", "r", None)]).partition_runs == ()
    allowed = spec({"uri": "r"}, FixedKeyMapper("x"))
    allowed["assetPartitions"]["defaultMapper"] = {"kind": "AllowedKeyMapper", "allowedKeys": ["us"]}
    assert [
        r.partition_key
        for r in plan(allowed, [event("xx", "r", "xx"), event("us", "r", "us", 1)]).partition_runs
    ] == ["us"]


def test_a_bad_partition_spec_is_an_invalid_dag() -> None:
    raw = {**ABC, "assetPartitions": {"defaultMapper": {"kind": "HalfDayMapper"}}}
    valid = next(c for c in plan(raw, []).status.conditions if c.type == "Valid")
    assert valid.status == "False" and "spec.assetPartitions.defaultMapper.kind" in valid.message
    no_assets = {"assetPartitions": {"defaultMapper": {"kind": "IdentityMapper"}}, "tasks": TASKS}
    valid = next(c for c in plan(no_assets, []).status.conditions if c.type == "Valid")
    assert valid.status == "False" and "assetPartitions needs an assetSchedule" in valid.message


def test_a_producer_records_its_runs_key_or_one_event_per_key_it_added() -> None:
    outlets = [AssetRef(uri="s3://b/a"), AssetRef(uri="s3://b/c")]
    accessors = OutletEventAccessors()
    accessors[AssetRef(uri="s3://b/c")].add_partitions(["us", "eu", "us"])
    found = assets.outlet_events(outlets, accessors.to_wire(), "2026-06-14T03:00:00")
    assert [(e.uri, e.partition_key, e.added_partition) for e in found] == [
        ("s3://b/a", "2026-06-14T03:00:00", False),
        ("s3://b/c", "eu", True),
        ("s3://b/c", "us", True),
    ]
    names = {
        asset_event_name("r", "t", -1, 1, e.uri, e.partition_key if e.added_partition else None)
        for e in found
    }
    assert len(names) == 3  # one event per added key, each its own name
    assert asset_event_name("r", "t", -1, 1, "s3://b/a") == asset_event_name(
        "r", "t", -1, 1, "s3://b/a", None
    )
