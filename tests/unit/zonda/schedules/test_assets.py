"""The pure half of data-aware scheduling: URIs as Airflow normalises them, conditions, the queue."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from zonda.resources.asset_models import AssetRef, TriggeringEvent, asset_event_name, sanitize_uri
from zonda.resources.models import DagStatus
from zonda.schedules import assets, dag_plans

T0 = datetime(2026, 3, 1, tzinfo=UTC)


def event(
    name: str, uri: str, seconds: int = 0, aliases: tuple[str, ...] = (), recorded: int | None = None
) -> TriggeringEvent:
    """An event at T0+seconds; `recorded`: when the apiserver recorded it (unset: at its timestamp)."""
    return TriggeringEvent(
        name=name,
        uri=uri,
        timestamp=T0 + timedelta(seconds=seconds),
        aliases=list(aliases),
        recorded=None if recorded is None else T0 + timedelta(seconds=recorded),
    )


@pytest.mark.parametrize(
    ("written", "normalised"),
    [
        ("s3://bucket/key", "s3://bucket/key"),
        ("S3://user:pw@bucket/key/?b=2&a=1#frag", "s3://bucket/key?a=1&b=2"),  # Airflow drops auth
        ("s3://bucket", "s3://bucket/"),
        ("just-a-name", "just-a-name"),
        ("x-custom://Keep/AS/is/", "x-custom://Keep/AS/is/"),
    ],
)
def test_uris_are_normalised_as_airflow_does(written: str, normalised: str) -> None:
    assert sanitize_uri(written) == normalised


@pytest.mark.parametrize(
    ("written", "message"),
    [("", "cannot be empty"), ("  ", "whitespace"), ("s3://bücket", "ASCII"), ("airflow://x", "reserved")],
)
def test_invalid_uris_are_refused_with_airflows_reason(written: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        sanitize_uri(written)


def test_conditions_evaluate_all_and_any() -> None:
    condition = assets.parse_condition({"any": [{"all": [{"uri": "a"}, {"uri": "b"}]}, {"alias": "x"}]})
    assert assets.condition_keys(condition) == {"a", "b", "alias:x"}
    assert not assets.evaluate(condition, frozenset({"a"}))
    assert assets.evaluate(condition, frozenset({"a", "b"}))
    assert assets.evaluate(condition, frozenset({"alias:x"}))


def test_a_bad_schedule_names_the_field_and_the_reason() -> None:
    with pytest.raises(assets.AssetConditionInvalid, match=r"spec.assetSchedule.all\[1\]: .*reserved"):
        assets.parse_condition({"all": [{"uri": "a"}, {"uri": "airflow://x"}]})


def test_a_satisfying_set_makes_one_run_named_by_its_events_and_the_rest_waits() -> None:
    condition = assets.parse_condition({"all": [{"uri": "a"}, {"uri": "b"}]})
    cursor = assets.Cursor(T0 - timedelta(seconds=1))
    first = assets.pending_events(condition, [event("e1", "a", 1)], consumed=frozenset(), cursor=cursor)
    assert assets.decide_asset_run("d", condition, first) is None, "b not updated yet"
    events = [event("e1", "a", 1), event("e2", "a", 2), event("e3", "b", 3), event("other", "z", 4)]
    pending = assets.pending_events(condition, events, consumed=frozenset(), cursor=cursor)
    due = assets.decide_asset_run("d", condition, pending)
    assert due is not None and [e.name for e in due.events] == ["e1", "e2", "e3"]  # all queued, as Airflow
    assert due.logical_date == T0 + timedelta(seconds=3)
    assert due.data_interval.start == T0 + timedelta(seconds=1)
    again = assets.decide_asset_run("d", condition, list(reversed(pending)))
    assert again is not None and again.run_name == due.run_name == assets.asset_run_name(
        "d", ["e3", "e2", "e1"]
    )
    # consumed by a run that exists, or behind the cursor: not pending again
    assert (
        assets.pending_events(condition, events, consumed=frozenset({"e1", "e2", "e3"}), cursor=cursor) == []
    )
    assert (
        assets.pending_events(condition, events, consumed=frozenset(), cursor=cursor.advanced(due.events))
        == []
    )


def test_an_event_at_the_cursors_time_that_was_not_consumed_is_still_pending() -> None:
    condition = assets.parse_condition({"uri": "a"})
    cursor = assets.Cursor(None).advanced([event("e1", "a", 5)])
    pending = assets.pending_events(
        condition, [event("e1", "a", 5), event("e0", "a", 5)], consumed=frozenset(), cursor=cursor
    )
    assert [e.name for e in pending] == ["e0"]


def test_a_late_event_with_an_old_timestamp_is_pending_by_arrival_and_consumed_once() -> None:
    # Airflow queues the DAG when an event is recorded (AssetDagRunQueue), whatever its timestamp
    condition = assets.parse_condition({"uri": "a"})
    first = event("e1", "a", 100, recorded=100)
    cursor = assets.Cursor(T0).advanced([first], [first])
    late = event("late", "a", 10, recorded=200)  # kubectl with an old timestamp, or a delayed write
    events = [first, late]
    pending = assets.pending_events(condition, events, consumed=frozenset(), cursor=cursor)
    assert [e.name for e in pending] == ["late"]
    due = assets.decide_asset_run("d", condition, pending)
    assert due is not None and [e.name for e in due.events] == ["late"]
    after = cursor.advanced(due.events, events)
    assert assets.pending_events(condition, events, consumed=frozenset(), cursor=after) == []
    # a write that became visible after a newer one was consumed, recorded a moment before it
    behind = event("behind", "a", 150, recorded=199)
    assert [
        e.name
        for e in assets.pending_events(condition, [*events, behind], consumed=frozenset(), cursor=after)
    ] == ["behind"]


def test_an_event_visible_long_after_newer_ones_were_consumed_is_consumed_once() -> None:
    """An event whose creationTimestamp is an hour older than events already consumed (a create that
    committed late, or an apiserver whose clock was behind) is pending when it becomes visible, and
    consumed once: the cursor names what it consumed for as long as the events exist."""
    condition = assets.parse_condition({"uri": "a"})
    newer = [event(f"e{i}", "a", 3600 + i, recorded=3600 + i) for i in range(3)]
    cursor = assets.Cursor(T0).advanced(newer, newer)
    assert cursor.names == {"e0", "e1", "e2"} and cursor.time == T0, "the horizon stays at the DAG's start"
    late = event("late", "a", 5, recorded=5)
    events = [*newer, late]
    pending = assets.pending_events(condition, events, consumed=frozenset(), cursor=cursor)
    assert [e.name for e in pending] == ["late"]
    after = cursor.advanced(pending, events)
    assert assets.pending_events(condition, events, consumed=frozenset(), cursor=after) == []
    assert after.names == {"e0", "e1", "e2", "late"}
    # a consumed event deleted since (history limit): its name is forgotten, it cannot come back
    assert after.advanced([], [late]).names == {"late"}


def test_beyond_the_most_names_the_oldest_are_dropped_and_the_horizon_passes_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(assets, "MAX_CURSOR_NAMES", 3)
    consumed = [event(f"e{i}", "a", i, recorded=t) for i, t in enumerate((10, 20, 20, 30, 40))]
    cursor = assets.Cursor(T0).advanced(consumed, consumed)
    # e2 shares e1's instant: both are before the horizon, so its name goes too
    assert cursor.names == {"e3", "e4"}
    assert cursor.time == T0 + timedelta(seconds=20, microseconds=1)
    # none of the five is pending again, an event recorded after the horizon is
    fresh = event("fresh", "a", 25, recorded=25)
    pending = assets.pending_events(
        assets.parse_condition({"uri": "a"}), [*consumed, fresh], consumed=frozenset(), cursor=cursor
    )
    assert [e.name for e in pending] == ["fresh"]
    held = assets.Cursor(T0).advanced(consumed, consumed, hold=T0 + timedelta(seconds=15))
    assert held.names == {"e1", "e2", "e3", "e4"}, "a held horizon keeps the names after it"


def test_alias_consumers_match_events_emitted_through_the_alias() -> None:
    condition = assets.parse_condition({"alias": "x"})
    pending = assets.pending_events(
        condition,
        [event("e1", "a", 1, ("x",)), event("e2", "a", 2)],
        consumed=frozenset(),
        cursor=assets.Cursor(None),
    )
    assert [e.name for e in pending] == ["e1"]


def test_outlet_events_take_the_extras_and_alias_additions_the_try_reported() -> None:
    outlets = [AssetRef(uri="s3://b/a"), AssetRef(alias="out")]
    reported = {
        "extras": {"s3://b/a": {"rows": 1}},
        "aliases": [
            {"alias": "out", "uri": "s3://b/c", "extra": {"k": 2}},
            {"alias": "nope", "uri": "s3://x"},
        ],
    }
    found = assets.outlet_events(outlets, reported)
    assert [(e.uri, dict(e.extra), e.aliases) for e in found] == [
        ("s3://b/a", {"rows": 1}, ()),
        ("s3://b/c", {"k": 2}, ("out",)),
    ]


def test_event_names_are_deterministic_per_try() -> None:
    one = asset_event_name("run-1", "t", -1, 1, "s3://b/a")
    assert one == asset_event_name("run-1", "t", -1, 1, "s3://b/a")
    assert one != asset_event_name("run-1", "t", -1, 2, "s3://b/a")


SPEC = {"assetSchedule": {"uri": "a"}, "tasks": [{"id": "t", "operator": "EmptyOperator"}]}


def test_plan_dag_makes_the_asset_run_and_moves_the_cursor_and_ignores_events_before_the_dag() -> None:
    created = T0
    later = T0 + timedelta(minutes=1)
    plan = dag_plans.plan_dag(
        "d", SPEC, status=DagStatus(), generation=1, created_at=created, runs=[], now=later,
        asset_events=[event("old", "a", -10), event("new", "a", 10)],
    )  # fmt: skip
    assert plan.asset_run is not None and [e.name for e in plan.asset_run.events] == ["new"]
    assert plan.status.asset_cursor_events == ["new"] and plan.status.awaited_assets == ["a"]  # again
    idle = dag_plans.plan_dag(
        "d", SPEC, status=plan.status, generation=1, created_at=created, runs=[], now=later,
        asset_events=[event("old", "a", -10), event("new", "a", 10)],
    )  # fmt: skip
    assert idle.asset_run is None and idle.status.awaited_assets == ["a"]
    ready = next(c for c in idle.status.conditions if c.type == "Ready")
    assert ready.reason == "AssetScheduled" and "waiting for asset events: a" in ready.message


def test_a_run_whose_cursor_was_never_written_moves_the_cursor_and_is_not_made_again() -> None:
    consumed = dag_plans.RunRef(
        name="d-asset-x", created_at=T0, run_type=None, state=None, data_interval=None,
        consumed_events=frozenset({"new"}),
    )  # fmt: skip
    plan = dag_plans.plan_dag(
        "d", SPEC, status=DagStatus(), generation=1, created_at=T0, runs=[consumed], now=T0,
        asset_events=[event("new", "a", 10)],
    )  # fmt: skip
    assert plan.asset_run is None and plan.status.asset_cursor_events == ["new"]


def test_plan_dag_consumes_a_late_event_once_across_a_lost_status_write() -> None:
    first = event("e1", "a", 100, recorded=100)
    plan = dag_plans.plan_dag(
        "d", SPEC, status=DagStatus(), generation=1, created_at=T0, runs=[], now=T0, asset_events=[first],
    )  # fmt: skip
    assert plan.asset_run is not None
    late = event("late", "a", -50, recorded=300)  # older than the DAG by its timestamp, recorded after
    events = [first, late]
    again = dag_plans.plan_dag(
        "d", SPEC, status=plan.status, generation=1, created_at=T0, runs=[], now=T0, asset_events=events,
    )  # fmt: skip
    assert again.asset_run is not None and [e.name for e in again.asset_run.events] == ["late"]
    run = dag_plans.RunRef(
        name=again.asset_run.run_name, created_at=T0, run_type=None, state=None, data_interval=None,
        consumed_events=frozenset({"late"}),
    )  # fmt: skip
    # the status write after creating the run was lost (a crash): the run is found, not made again
    restarted = dag_plans.plan_dag(
        "d", SPEC, status=plan.status, generation=1, created_at=T0, runs=[run], now=T0, asset_events=events,
    )  # fmt: skip
    assert restarted.asset_run is None and set(restarted.status.asset_cursor_events or ()) == {"e1", "late"}
    # and once that run is deleted (history limits), the cursor alone still says so
    later = dag_plans.plan_dag(
        "d", SPEC, status=restarted.status, generation=1, created_at=T0, runs=[], now=T0, asset_events=events,
    )  # fmt: skip
    assert later.asset_run is None


def test_the_history_limit_deletes_the_events_recorded_first() -> None:
    events = [event("late", "a", -100, recorded=50), event("e1", "a", 10, recorded=10)]
    assert assets.events_to_prune(events, 1, {}).doomed == ("e1",)


SEVEN = [event(f"e{i}", "a", i) for i in range(7)]


def test_the_history_limit_keeps_the_events_a_consumer_has_not_consumed() -> None:
    # the positive control: consumed by every consumer (by name, or before the horizon), pruned to 3
    consumed = assets.Cursor(T0, frozenset(f"e{i}" for i in range(7)))
    horizon = assets.Cursor(T0 + timedelta(seconds=10))
    assert assets.events_to_prune(SEVEN, 3, {"c": consumed, "h": horizon}).doomed == ("e0", "e1", "e2", "e3")
    assert assets.events_to_prune(SEVEN, 3, {}).doomed == ("e0", "e1", "e2", "e3")
    # a held consumer that consumed e0 and e1 keeps e2.. (past its cursor), whoever else consumed them
    held = assets.Cursor(T0, frozenset({"e0", "e1"}))
    pruning = assets.events_to_prune(SEVEN, 3, {"c": consumed, "held": held})
    assert pruning == assets.Pruning(doomed=("e0", "e1"), held=2, lost={})
    # a consumer's horizon (created after e3, or past its dropped names) makes the earlier not pending
    assert assets.events_to_prune(SEVEN, 3, {"new": assets.Cursor(T0 + timedelta(seconds=3))}).doomed == (
        "e0", "e1", "e2",
    )  # fmt: skip


def test_a_consumer_that_never_runs_keeps_events_only_up_to_the_ceiling() -> None:
    never = assets.Cursor(T0 - timedelta(seconds=1))
    # the default ceiling is ten times the limit: 7 events under a limit of 1 are all kept
    assert assets.events_to_prune(SEVEN, 1, {"paused": never}) == assets.Pruning(doomed=(), held=6)
    assert assets.HELD_EVENTS_CEILING_FACTOR == 10
    # past the ceiling, the oldest go even so, and the pruning names who had not consumed them
    pruning = assets.events_to_prune(SEVEN, 2, {"paused": never, "b": never}, ceiling=4)
    assert pruning.doomed == ("e0", "e1", "e2")
    assert pruning.held == 2
    assert pruning.lost == {"b": ("e0", "e1", "e2"), "paused": ("e0", "e1", "e2")}
    # a ceiling at the limit is the limit alone
    assert assets.events_to_prune(SEVEN, 3, {"p": never}, ceiling=3).doomed == ("e0", "e1", "e2", "e3")


def test_an_invalid_asset_schedule_is_an_invalid_dag() -> None:
    spec = {**SPEC, "assetSchedule": {"uri": "airflow://x"}}
    plan = dag_plans.plan_dag("d", spec, status=DagStatus(), generation=1, created_at=T0, runs=[], now=T0)
    valid = next(c for c in plan.status.conditions if c.type == "Valid")
    assert valid.status == "False" and "reserved" in valid.message


ALIAS_SPEC = {"assetSchedule": {"alias": "x"}, "tasks": [{"id": "t", "operator": "EmptyOperator"}]}


def test_an_alias_once_resolved_matches_later_events_of_its_assets_as_airflows_alias_condition() -> None:
    # Airflow 2.10 `_DatasetAliasCondition` / 3.x `AssetAliasCondition`: DatasetAny of the resolved datasets
    expanded = assets.expand_aliases(
        assets.parse_condition({"all": [{"alias": "x"}, {"uri": "b"}]}), {"x": {"a"}}
    )
    assert assets.evaluate(expanded, frozenset({"a", "b"}))  # a direct update of a, not through x
    assert not assets.evaluate(expanded, frozenset({"a"}))
    assert assets.condition_keys(expanded) == {"alias:x", "a", "b"}
    assert assets.expand_aliases(assets.parse_condition({"alias": "y"}), {"x": {"a"}}) == assets.Leaf(
        "alias:y"
    )
    plan = dag_plans.plan_dag(
        "d", ALIAS_SPEC, status=DagStatus(), generation=1, created_at=T0, runs=[], now=T0,
        asset_events=[event("direct", "a", 5)], alias_resolutions={"x": frozenset({"a"})},
    )  # fmt: skip
    assert plan.asset_run is not None and [e.name for e in plan.asset_run.events] == ["direct"]
    unresolved = dag_plans.plan_dag(
        "d", ALIAS_SPEC, status=DagStatus(), generation=1, created_at=T0, runs=[], now=T0,
        asset_events=[event("direct", "a", 5)], alias_outlets=frozenset({"x"}),
    )  # fmt: skip
    assert unresolved.asset_run is None, "before it resolved, only events emitted through it count"


def test_a_dag_scheduled_on_an_alias_resolved_to_the_asset_holds_its_events_as_a_uri_consumer() -> None:
    dags = {
        "uri": SPEC,
        "alias": ALIAS_SPEC,
        "nested": {"assetSchedule": {"all": [{"uri": "b"}, {"alias": "x"}]}},
        "other-alias": {"assetSchedule": {"alias": "y"}},
        "other-asset": {"assetSchedule": {"uri": "b"}},
        "producer": {"tasks": [{"id": "p", "outlets": [{"alias": "x"}, {"uri": "a"}]}]},
        "invalid": {"assetSchedule": {"uri": "airflow://x"}},
    }
    # the positive control: before x resolved to a, only the URI's consumer holds a's events
    assert assets.event_holders("a", [], dags) == ["uri"]
    assert assets.event_holders("a", ["x"], dags) == ["alias", "nested", "uri"]
    assert assets.asset_dags("a", dags) == (["producer"], ["uri"]), "consumingDags: the URI's"
    # seven events of a, one emitted through x (which resolved it), the others direct: the alias consumer,
    # held (it never ran), keeps all seven past a limit of 3, as a URI consumer would
    events = [event("e0", "a", 0, aliases=("x",)), *(event(f"e{i}", "a", i) for i in range(1, 7))]
    never = assets.Cursor(T0 - timedelta(seconds=1))
    held = {dag: never for dag in assets.event_holders("a", ["x"], {"alias": ALIAS_SPEC})}
    assert assets.events_to_prune(events, 3, held) == assets.Pruning(doomed=(), held=4)
    assert assets.events_to_prune(events, 3, {}).doomed == ("e0", "e1", "e2", "e3")
    # its run consumes every one of them (the direct ones too), and then its cursor lets the limit prune
    plan = dag_plans.plan_dag(
        "alias", ALIAS_SPEC, status=DagStatus(), generation=1, created_at=T0 - timedelta(seconds=1), runs=[],
        now=T0 + timedelta(seconds=10), asset_events=events, alias_resolutions={"x": frozenset({"a"})},
    )  # fmt: skip
    assert plan.asset_run is not None and [e.name for e in plan.asset_run.events] == [e.name for e in events]
    status = plan.status
    cursor = assets.Cursor(status.asset_cursor_time, frozenset(status.asset_cursor_events or ()))
    assert assets.events_to_prune(events, 3, {"alias": cursor}).doomed == ("e0", "e1", "e2", "e3")


def test_an_alias_no_task_outlets_and_nothing_resolved_is_reported_not_refused() -> None:
    def plan(status: DagStatus, **kwargs: object) -> dag_plans.DagPlan:
        return dag_plans.plan_dag(
            "d",
            ALIAS_SPEC,
            status=status,
            generation=1,
            created_at=T0,
            runs=[],
            now=T0,
            **kwargs,  # type: ignore[arg-type]
        )

    orphan = plan(DagStatus())
    by_type = {c.type: c for c in orphan.status.conditions}
    assert by_type["Valid"].status == "True", "Airflow accepts the DAG: a producer may come later"
    assert by_type["AssetAliasesResolvable"].status == "False"
    assert by_type["AssetAliasesResolvable"].reason == "NoAliasProducer"
    assert "AssetAlias x" in by_type["AssetAliasesResolvable"].message
    assert [e.reason for e in orphan.events] == ["UnresolvedAssetAlias"]
    assert plan(orphan.status).events == (), "told once, not on every pass"
    for resolved in ({"alias_outlets": frozenset({"x"})}, {"alias_resolutions": {"x": frozenset({"a"})}}):
        fine = {c.type: c for c in plan(orphan.status, **resolved).status.conditions}
        assert fine["AssetAliasesResolvable"].status == "True"
    plain = dag_plans.plan_dag("d", SPEC, status=DagStatus(), generation=1, created_at=T0, runs=[], now=T0)
    assert "AssetAliasesResolvable" not in {c.type for c in plain.status.conditions}


def test_plan_dag_consumes_an_event_visible_ten_minutes_late_once_across_a_lost_status_write() -> None:
    """Before, the horizon trailed the newest consumed arrival by five minutes: this event was missed."""
    newest = event("newest", "a", 900, recorded=900)
    plan = dag_plans.plan_dag(
        "d", SPEC, status=DagStatus(), generation=1, created_at=T0, runs=[], now=T0, asset_events=[newest],
    )  # fmt: skip
    assert plan.asset_run is not None
    late = event("late", "a", 300, recorded=300)  # recorded ten minutes before `newest`, seen after it
    events = [newest, late]
    again = dag_plans.plan_dag(
        "d", SPEC, status=plan.status, generation=1, created_at=T0, runs=[], now=T0, asset_events=events,
    )  # fmt: skip
    assert again.asset_run is not None and [e.name for e in again.asset_run.events] == ["late"]
    run = dag_plans.RunRef(
        name=again.asset_run.run_name, created_at=T0, run_type=None, state=None, data_interval=None,
        consumed_events=frozenset({"late"}),
    )  # fmt: skip
    for runs in ([run], []):  # the cursor write lost: found by its run; then the run deleted too
        status = plan.status if runs else again.status
        later = dag_plans.plan_dag(
            "d", SPEC, status=status, generation=1, created_at=T0, runs=runs, now=T0, asset_events=events,
        )  # fmt: skip
        assert later.asset_run is None, "consumed once"
        assert set(later.status.asset_cursor_events or ()) == {"newest", "late"}


def test_events_arriving_while_the_dag_is_at_max_active_runs_queue_into_one_next_run_and_say_so() -> None:
    """Airflow queues events that arrive faster than runs finish into its next run; Zonda holds that run
    while the DAG is at maxActiveRuns (the Ready condition counts the queued events), then makes one run
    of all of them."""
    spec = {**SPEC, "maxActiveRuns": 1}
    first = dag_plans.plan_dag(
        "d", spec, status=DagStatus(), generation=1, created_at=T0, runs=[], now=T0,
        asset_events=[event("e1", "a", 10)],
    )  # fmt: skip
    assert first.asset_run is not None and [e.name for e in first.asset_run.events] == ["e1"]
    running = dag_plans.RunRef(
        name=first.asset_run.run_name, created_at=T0, run_type="asset_triggered", state="running",
        data_interval=None, consumed_events=frozenset({"e1"}),
    )  # fmt: skip
    later = [event("e1", "a", 10), event("e2", "a", 20), event("e3", "a", 30)]
    held = dag_plans.plan_dag(
        "d", spec, status=first.status, generation=1, created_at=T0, runs=[running], now=T0,
        asset_events=later,
    )  # fmt: skip
    assert held.asset_run is None, "held at maxActiveRuns"
    ready = next(c for c in held.status.conditions if c.type == "Ready")
    assert (ready.reason, ready.message) == (
        "MaxActiveRuns",
        "2 asset events queued for the next run: 1 active runs reached maxActiveRuns",
    )
    assert held.status.asset_cursor_events == ["e1"], "the queued events stay pending"
    done = dataclasses.replace(running, state="success")
    after = dag_plans.plan_dag(
        "d", spec, status=held.status, generation=1, created_at=T0, runs=[done], now=T0, asset_events=later
    )
    assert after.asset_run is not None and [e.name for e in after.asset_run.events] == ["e2", "e3"]
    ready = next(c for c in after.status.conditions if c.type == "Ready")
    assert ready.reason == "AssetScheduled"
