"""Asset watchers (Airflow 3's `AssetWatcher`): the manifest, the Trigger per watcher, the object-condition
event trigger, the triggerer's loop and the AssetEvent each event records.

Real: the authoring loader, the asset reconciler, the pure core, asyncio on virtual time (`FakeClock`).
Fake: the API (`FakeKube`; a stub answering discovery and one object for the trigger). The cluster
tier (tests/cluster/test_asset_watchers.py) runs the triggerer and controller on a real apiserver.
"""

from __future__ import annotations

import asyncio
import copy
import textwrap
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pytest

from controller.kube import TRIGGERS, Kube
from controller.kube.fake import FakeKube
from controller.providers.kubernetes.triggers import (
    ObjectConditionEventTrigger,
    ObjectConditionTrigger,
    current_kube,
)
from controller.reconcilers.assets import AssetReconciler
from controller.reconcilers.common import StatusWriter
from controller.triggerer.running import drive_watcher
from controller.triggerer.runtime import Triggerer
from controller.triggerer.settings import TriggererSettings
from controller.triggerer.writes import Outcome, asset_event_body
from zonda.authoring import rendering
from zonda.authoring.assets import Asset, AssetWatcher
from zonda.resources.asset_models import AssetWatcherRef, asset_name, watcher_trigger_name
from zonda.schedules import assets
from zonda.triggers import (
    BaseEventTrigger,
    BaseTrigger,
    DirectoryFileDeleteTrigger,
    FileDeleteTrigger,
    TriggerEvent,
    load_trigger,
)
from zonda.triggers.testing import FakeClock

START = datetime(2026, 3, 1, tzinfo=UTC)
NS = "ns"
URI = "s3://b/flags"
WATCHER = {
    "name": "flag",
    "classpath": "controller.providers.kubernetes.triggers.ObjectConditionEventTrigger",
    "kwargs": {
        "api_version": "v1",
        "kind": "ConfigMap",
        "name": "flag",
        "namespace": NS,
        "field_path": "data",
    },
}


# ------------------------------------------------------------------------------------------ authoring


def test_an_asset_with_watchers_renders_them_into_the_schedule(tmp_path: Path) -> None:
    (tmp_path / "watched.py").write_text(
        textwrap.dedent(
            """
            from airflow.providers.standard.operators.empty import EmptyOperator
            from airflow.sdk import DAG, Asset, AssetWatcher
            from controller.providers.kubernetes.triggers import ObjectConditionEventTrigger

            done = ObjectConditionEventTrigger("batch/v1", "Job", "etl", "ns", condition="Complete")
            etl = Asset("etl-output", watchers=[AssetWatcher(name="etl_done", trigger=done)])
            with DAG("on_etl", schedule=[etl]):
                EmptyOperator(task_id="report")
            """
        )
    )
    report = rendering.render_paths([tmp_path], airflow_compat=True)
    assert report.file_errors == {}
    [watcher] = report.manifests[0]["spec"]["assetSchedule"]["watchers"]
    assert watcher["name"] == "etl_done"
    assert watcher["classpath"] == "controller.providers.kubernetes.triggers.ObjectConditionEventTrigger"
    assert watcher["kwargs"]["condition"] == "Complete" and watcher["kwargs"]["kind"] == "Job"
    rebuilt = load_trigger(watcher["classpath"], watcher["kwargs"])
    assert isinstance(rebuilt, ObjectConditionEventTrigger)


def test_a_trigger_that_is_not_an_event_trigger_is_refused_as_airflow_does() -> None:
    plain = ObjectConditionTrigger("batch/v1", "Job", "etl", "ns", condition="Complete")
    with pytest.raises(ValueError, match="must inherit ``BaseEventTrigger``"):
        AssetWatcher(name="w", trigger=plain)
    assert not isinstance(plain, BaseEventTrigger)
    event = ObjectConditionEventTrigger("batch/v1", "Job", "etl", "ns", condition="Complete")
    assert Asset("a", watchers=[AssetWatcher("w", event)]).to_manifest()["watchers"][0]["name"] == "w"


def test_the_watchers_of_an_asset_come_from_its_consumers_schedules_shared_by_trigger() -> None:
    nested = {"all": [{"uri": "s3://b/other"}, {"any": [{"uri": URI, "watchers": [WATCHER]}]}]}
    dags = {"one": {"assetSchedule": nested}, "two": {"assetSchedule": {"uri": URI, "watchers": [WATCHER]}}}
    found = assets.asset_watchers(URI, dags)
    assert list(found) == [watcher_trigger_name(URI, AssetWatcherRef.model_validate(WATCHER))]
    assert assets.asset_watchers("s3://b/other", dags) == {}
    changed = {**WATCHER, "kwargs": {**WATCHER["kwargs"], "name": "other"}}
    assert set(
        assets.asset_watchers(URI, {"three": {"assetSchedule": {"uri": URI, "watchers": [changed]}}})
    ) != set(found), "a changed trigger is a new Trigger"


# ------------------------------------------------------------------------------- the asset's Triggers


def reconcile_asset(kube: FakeKube) -> None:
    asyncio.run(AssetReconciler(kube, StatusWriter(kube), trigger_shards=4).reconcile(NS, URI))


def watcher_triggers(kube: FakeKube) -> list[dict[str, Any]]:
    return [body for (kind, _, _), body in sorted(kube.objects.items()) if kind == TRIGGERS]


def test_the_asset_runs_one_trigger_per_watcher_owned_by_it_and_drops_it_with_the_watcher() -> None:
    kube = FakeKube()
    dag = {
        "apiVersion": "zonda.dev/v1alpha1",
        "kind": "DAG",
        "metadata": {"name": "consumer"},
        "spec": {"assetSchedule": {"uri": URI, "watchers": [WATCHER]}, "tasks": []},
    }
    asyncio.run(kube.create_custom("dags", NS, copy.deepcopy(dag)))
    reconcile_asset(kube)
    reconcile_asset(kube)  # again: nothing more
    [trigger] = watcher_triggers(kube)
    asset = kube.objects[("assets", NS, asset_name(URI))]
    assert trigger["spec"]["asset"] == {"uri": URI, "watcher": "flag"}
    assert trigger["spec"]["classpath"] == WATCHER["classpath"]
    assert trigger["metadata"]["ownerReferences"][0]["uid"] == asset["metadata"]["uid"]
    assert trigger["metadata"]["labels"]["zonda.dev/shard"] == str(trigger["spec"]["shard"])
    assert asset["status"]["watchers"] == ["flag"]
    kube.objects[("dags", NS, "consumer")]["spec"]["assetSchedule"] = {"uri": URI}
    reconcile_asset(kube)
    assert watcher_triggers(kube) == []
    assert kube.objects[("assets", NS, asset_name(URI))]["status"].get("watchers", []) == []


# ---------------------------------------------------------------------- the object-condition trigger


class OneObject:
    """Answers API discovery for v1 and GETs of one ConfigMap, whose body the test changes."""

    def __init__(self) -> None:
        self.body: dict[str, Any] | None = None

    async def get_path(self, path: str) -> Any:
        if path == "/api/v1":
            return {"resources": [{"name": "configmaps", "kind": "ConfigMap", "namespaced": True}]}
        return copy.deepcopy(self.body)


def configmap(data: dict[str, str], uid: str = "u1", version: str = "1") -> dict[str, Any]:
    return {"metadata": {"name": "flag", "uid": uid, "resourceVersion": version}, "data": data}


def job(transition: str, status: str = "True") -> dict[str, Any]:
    condition = {"type": "Complete", "status": status, "lastTransitionTime": transition}
    return {"metadata": {"name": "etl", "uid": "j1"}, "status": {"conditions": [condition]}}


def events_over(trigger: BaseTrigger, api: OneObject, states: list[dict[str, Any] | None]) -> list[Any]:
    """The payloads the trigger yields while the object goes through `states`, one per poll."""
    found: list[Any] = []

    async def scenario() -> None:
        token = current_kube.set(api)  # type: ignore[arg-type]
        try:
            run = trigger.run()
            task = asyncio.ensure_future(_collect(run, found))
            for state in states:
                api.body = state
                await asyncio.sleep(1.0)  # the trigger polls every second
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        finally:
            current_kube.reset(token)

    with FakeClock(START) as clock:
        clock.run(scenario())
    return found


async def _collect(run: Any, found: list[Any]) -> None:
    async for event in run:
        found.append(event.payload)


def test_a_field_watcher_fires_once_per_new_value_not_per_unrelated_update() -> None:
    trigger = ObjectConditionEventTrigger("v1", "ConfigMap", "flag", NS, field_path="data", poll_interval=1.0)
    states = [
        None,  # not created yet
        configmap({"v": "1"}),
        configmap({"v": "1"}, version="2"),  # a label changed: same data
        configmap({"v": "2"}, version="3"),
        configmap({"v": "2"}, version="4"),
    ]
    payloads = events_over(trigger, OneObject(), states)
    assert [p["value"] for p in payloads] == [{"v": "1"}, {"v": "2"}]
    assert payloads[0] | {"value": None} == {
        "apiVersion": "v1", "kind": "ConfigMap", "namespace": NS, "name": "flag", "uid": "u1",
        "fieldPath": "data", "value": None,
    }  # fmt: skip


def test_a_condition_watcher_fires_on_each_transition_to_true() -> None:
    trigger = ObjectConditionEventTrigger(
        "v1", "ConfigMap", "flag", NS, condition="Complete", poll_interval=1.0
    )
    states = [job("t0", "False"), job("t1"), job("t1"), job("t2", "False"), job("t3"), job("t3")]
    payloads = events_over(trigger, OneObject(), states)
    assert [p["lastTransitionTime"] for p in payloads] == ["t1", "t3"]


def test_the_same_state_seen_by_another_replica_is_the_same_event_name() -> None:
    """Airflow: events must be "the same wherever the trigger is run" — a replay after a failover."""
    trigger = ObjectConditionEventTrigger("v1", "ConfigMap", "flag", NS, field_path="data", poll_interval=1.0)
    first = events_over(trigger, OneObject(), [configmap({"v": "1"})])
    replay = events_over(trigger, OneObject(), [configmap({"v": "1"}, version="9")])
    body = {
        "metadata": {
            "name": "watch-flag-abc",
            "namespace": NS,
            "ownerReferences": [
                {"apiVersion": "zonda.dev/v1alpha1", "kind": "Asset", "name": "a", "uid": "x"}
            ],
        },
        "spec": {"asset": {"uri": URI, "watcher": "flag"}},
    }
    one, two = asset_event_body(body, first[0]), asset_event_body(body, dict(reversed(replay[0].items())))
    assert one["metadata"]["name"] == two["metadata"]["name"]
    assert one["spec"]["extra"] == {"from_trigger": True, "payload": first[0]}  # Airflow's submit_event
    assert one["spec"]["sourceWatcher"] == "watch-flag-abc" and one["spec"]["uri"] == URI
    assert one["metadata"]["labels"] == {"zonda.dev/asset": "a"}
    other = events_over(trigger, OneObject(), [configmap({"v": "2"})])
    assert asset_event_body(body, other[0])["metadata"]["name"] != one["metadata"]["name"]


# ------------------------------------------------------------------------------ the triggerer's loop


class Finite(BaseEventTrigger):
    """Yields two events, then returns; counts its starts and cleanups."""

    starts = 0
    cleanups = 0

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return ("tests.Finite", {})

    async def run(self) -> Iterator[TriggerEvent]:  # type: ignore[override]
        Finite.starts += 1
        yield TriggerEvent({"n": 1})
        await asyncio.sleep(1)
        yield TriggerEvent({"n": 2})

    async def cleanup(self) -> None:
        Finite.cleanups += 1


def test_a_watcher_delivers_every_event_and_is_started_again_when_it_returns() -> None:
    delivered: list[Any] = []

    async def scenario() -> None:
        task = asyncio.ensure_future(
            drive_watcher(Finite, deliver=lambda t, e: delivered.append(e.payload), restart_after=5.0)
        )
        await asyncio.sleep(8.0)  # one run (1 s), the pause (5 s), a second run
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    Finite.starts = Finite.cleanups = 0
    with FakeClock(START) as clock:
        clock.run(scenario())
    assert delivered == [{"n": 1}, {"n": 2}, {"n": 1}, {"n": 2}]
    assert Finite.starts == 2 and Finite.cleanups == 2


# ------------------------------------------------------- the standard provider's file-delete watchers


def file_events(make: Any, writes: list[tuple[float, Path]], seconds: float) -> list[tuple[Any, str | None]]:
    """(payload, event_key) of each event a watcher of `make` delivers while `writes` create files (at
    virtual seconds), run as the triggerer runs it (restarted 5 s after each event)."""
    delivered: list[tuple[Any, str | None]] = []

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        for at, path in writes:
            loop.call_later(at, path.write_text, f"written at {at}")
        task = asyncio.ensure_future(
            drive_watcher(
                make,
                deliver=lambda t, e: delivered.append((e.payload, t.event_key(e))),  # type: ignore[attr-defined]
                restart_after=5.0,
            )
        )
        await asyncio.sleep(seconds)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    with FakeClock(START) as clock:
        clock.run(scenario())
    return delivered


def test_a_file_delete_watcher_reports_each_file_once_and_deletes_it(tmp_path: Path) -> None:
    """Airflow's FileDeleteTrigger yields True for every file: Zonda tells the files apart by the deleted
    file's identity (`event_key`), so each is one AssetEvent, and a file is reported once."""
    flag = tmp_path / "test"
    trigger = FileDeleteTrigger(filepath=str(flag), poke_interval=1.0)
    events = file_events(lambda: load_trigger(*trigger.serialize()), [(2, flag), (20, flag)], 40)
    assert [payload for payload, _ in events] == [True, True]
    assert not flag.exists()
    keys = [key for _, key in events]
    assert None not in keys and keys[0] != keys[1]
    body = {"metadata": {"name": "watch-test-abc", "namespace": NS}, "spec": {"asset": {"uri": URI}}}
    names = {asset_event_body(body, payload, key)["metadata"]["name"] for payload, key in events}
    assert len(names) == 2, "two files, two AssetEvents"
    assert asset_event_body(body, True, keys[0]) == asset_event_body(body, True, keys[0])


def test_directory_watchers_fire_each_for_its_own_file_only(tmp_path: Path) -> None:
    inbox = tmp_path / "region-flags"
    inbox.mkdir()

    def watcher(filename: str) -> Any:
        trigger = DirectoryFileDeleteTrigger(directory=str(inbox), filename=filename, poke_interval=1.0)
        return lambda: load_trigger(*trigger.serialize())

    us = file_events(watcher("us.flag"), [(2, inbox / "us.flag"), (3, inbox / "eu.flag")], 30)
    assert [payload for payload, _ in us] == [{"filepath": str(inbox / "us.flag")}]
    assert sorted(p.name for p in inbox.iterdir()) == ["eu.flag"], "the eu watcher's file is left alone"
    eu = file_events(watcher("eu.flag"), [(12, inbox / "eu.flag")], 30)
    assert [payload for payload, _ in eu] == [{"filepath": str(inbox / "eu.flag")}] * 2
    assert eu[0][1] != eu[1][1] and list(inbox.iterdir()) == []


def test_a_missing_directory_is_waited_for_and_siblings_share_a_stream_key(tmp_path: Path) -> None:
    inbox = tmp_path / "later"
    trigger = DirectoryFileDeleteTrigger(directory=str(inbox), filename="a", poke_interval=1.0)

    async def later() -> None:
        await asyncio.sleep(3)
        inbox.mkdir()
        (inbox / "a").write_text("x")

    def make() -> Any:
        return load_trigger(*trigger.serialize())

    events: list[Any] = []

    async def scenario() -> None:
        making = asyncio.ensure_future(later())
        task = asyncio.ensure_future(drive_watcher(make, deliver=lambda t, e: events.append(e.payload)))
        await asyncio.sleep(10)
        task.cancel()
        await asyncio.gather(task, making, return_exceptions=True)

    with FakeClock(START) as clock:
        clock.run(scenario())
    assert events == [{"filepath": str(inbox / "a")}]
    sibling = DirectoryFileDeleteTrigger(directory=f"{inbox}/", filename="b", poke_interval=1.0)
    assert sibling.shared_stream_key() == trigger.shared_stream_key() == ("directory-scan", str(inbox), 1.0)
    assert FileDeleteTrigger("/x").shared_stream_key() is None


def test_airflows_example_imports_the_file_triggers_from_the_standard_provider(tmp_path: Path) -> None:
    (tmp_path / "watched.py").write_text(
        textwrap.dedent(
            """
            from airflow.providers.standard.triggers.file import DirectoryFileDeleteTrigger, FileDeleteTrigger
            from airflow.sdk import DAG, Asset, AssetWatcher, task

            gone = FileDeleteTrigger(filepath="/tmp/t")
            one = Asset("one", watchers=[AssetWatcher(name="w1", trigger=gone)])
            two = Asset("two", watchers=[AssetWatcher(
                name="w2", trigger=DirectoryFileDeleteTrigger(directory="/tmp/d", filename="f")
            )])
            with DAG("on_files", schedule=[one, two]):
                @task
                def report():
                    pass
                report()
            """
        )
    )
    report = rendering.render_paths([tmp_path], airflow_compat=True)
    assert report.file_errors == {}
    schedule = report.manifests[0]["spec"]["assetSchedule"]["all"]
    assert [s["watchers"][0] for s in schedule] == [
        {
            "name": "w1",
            "classpath": "zonda.triggers.file.FileDeleteTrigger",
            "kwargs": {"filepath": "/tmp/t", "poke_interval": 5.0},
        },
        {
            "name": "w2",
            "classpath": "zonda.triggers.file.DirectoryFileDeleteTrigger",
            "kwargs": {"directory": "/tmp/d", "filename": "f", "poke_interval": 5.0},
        },
    ]


def lapsed_triggerer(kube: FakeKube) -> Triggerer:
    """A replica that holds no shard (its Lease lapsed): only its asset-event writes are exercised."""
    settings = TriggererSettings(
        namespace=NS, identity="me", shards=4, capacity=4, lease_duration=3, renew_every=1
    )
    return Triggerer(cast(Kube, kube), settings)


@pytest.mark.parametrize(
    ("consumed", "recorded"),
    [
        pytest.param(False, [], id="a state's event waits for the shard's new holder, which sees it again"),
        pytest.param(True, ["e1"], id="a consumed file's event is recorded: nobody else can see it again"),
    ],
)
def test_a_lapsed_lease_fences_state_events_but_not_consumed_ones(
    consumed: bool, recorded: list[str]
) -> None:
    kube = FakeKube()
    triggerer = lapsed_triggerer(kube)
    body = {
        "apiVersion": "zonda.dev/v1alpha1",
        "kind": "AssetEvent",
        "metadata": {"name": "e1", "namespace": NS},
        "spec": {"uri": URI},
    }
    outcome = Outcome(
        name=f"{NS}/w", shard=0, status={}, resource_version=None, produced_at=0.0, asset_event=body,
        consumed=consumed,
    )  # fmt: skip

    async def write() -> None:
        await triggerer._write_slots.acquire()
        triggerer.outcomes.put_nowait(outcome)
        await triggerer.outcomes.get()
        await triggerer._write_one(outcome)

    asyncio.run(write())
    assert [name for (kind, _, name) in kube.objects if kind == "assetevents"] == recorded


async def test_a_state_event_waits_for_a_late_lease_renewal_then_is_recorded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As a trigger's event (test_triggerer_runs.py): held while the shard's renewal is late by our own
    clock, recorded once the lease cycle renewed it, not dropped while this replica keeps the shard."""
    import time

    from controller.coordination.shard_leases import Holding
    from controller.triggerer import runtime
    from tests.unit.controller.triggerer.held_events import watched_holds

    kube = FakeKube()
    triggerer = lapsed_triggerer(kube)
    start = datetime(2024, 3, 1, tzinfo=UTC)
    triggerer.holdings[0] = Holding(0, "zonda-triggerer-shard-0", 1, start, "1", 3.0, time.monotonic() - 10)

    async def verify(holding: Holding) -> bool:  # the Lease read: the fencing check is tested with leases
        return True

    monkeypatch.setattr(triggerer.keeper, "verify", verify)
    monkeypatch.setattr(runtime, "LATE_RENEWAL_RETRY_SECONDS", 0.01)
    body = {"apiVersion": "zonda.dev/v1alpha1", "kind": "AssetEvent",
            "metadata": {"name": "e1", "namespace": NS}, "spec": {"uri": URI}}  # fmt: skip
    with watched_holds() as holds:
        writer = asyncio.create_task(triggerer._write_outcomes())
        triggerer.outcomes.put_nowait(
            Outcome(
                name=f"{NS}/w", shard=0, status={}, resource_version=None, produced_at=0.0, asset_event=body
            )
        )
        await holds.twice()  # retried while the renewal is late: nothing written, nothing dropped
    assert [name for (kind, _, name) in kube.objects if kind == "assetevents"] == []
    triggerer.holdings[0] = Holding(0, "zonda-triggerer-shard-0", 1, start, "2", 3.0, time.monotonic())
    await asyncio.wait_for(triggerer.outcomes.join(), 5)
    writer.cancel()
    assert [name for (kind, _, name) in kube.objects if kind == "assetevents"] == ["e1"]
