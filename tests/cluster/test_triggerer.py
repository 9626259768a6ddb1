"""The triggerer against a real apiserver: shards split by Leases, failover, fencing, exactly once.

Real: the apiserver and etcd, Leases, Trigger resources and their status subresource, triggerer
replicas — in-process `Triggerer`s on the test's event loop where only their reasoning matters, real
`python -m controller.triggerer` processes where one must be SIGKILLed or SIGTERMed.
Exactly once is observed from outside: a watch records every change of every Trigger's status, and
each Trigger must go to `fired` in one write that nothing changes afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest

from controller.coordination.shards import SHARD_LABEL, shard_for
from controller.devtools.devcluster import REPO_ROOT, Cluster, free_port
from controller.kube import TRIGGERS, Kube
from controller.providers.kubernetes import triggers as kubernetes_triggers
from controller.providers.kubernetes.triggers import ObjectConditionTrigger
from controller.providers.kubernetes.triggers import get_object as read_object
from controller.triggerer.leases import shard_lease_name
from controller.triggerer.runtime import Triggerer
from controller.triggerer.settings import TriggererSettings
from controller.triggerer.writes import WriteResult, write_outcome
from zonda.resources.models import API_VERSION
from zonda.triggers import BaseTrigger, DateTimeTrigger, TriggerEvent, serialize_trigger

T = TypeVar("T")

#: Short leases so that failover is observable within seconds.
LEASE_SECONDS = 3.0
RENEW_SECONDS = 1.0


# ------------------------------------------------------------------------------------------ helpers


@pytest.fixture
async def kube(cluster: Cluster) -> AsyncIterator[Kube]:
    async with await Kube.connect(str(cluster.kubeconfig)) as connection:
        yield connection


def trigger_body(name: str, trigger: BaseTrigger, shards: int) -> dict[str, Any]:
    classpath, kwargs = serialize_trigger(trigger)
    shard = shard_for(name, shards)
    return {
        "apiVersion": API_VERSION,
        "kind": "Trigger",
        "metadata": {"name": name, "labels": {SHARD_LABEL: str(shard)}},
        "spec": {
            "classpath": classpath,
            "kwargs": kwargs,
            "dagRun": "run-1",
            "taskId": name,
            "tryNumber": 1,
            "shard": shard,
        },
    }


async def create_triggers(kube: Kube, namespace: str, bodies: list[dict[str, Any]]) -> None:
    limit = asyncio.Semaphore(20)

    async def create(body: dict[str, Any]) -> None:
        async with limit:
            await kube.create_custom(TRIGGERS, namespace, body)

    await asyncio.gather(*(create(body) for body in bodies))


async def eventually(check: Callable[[], Awaitable[T]], what: str, within: float = 30) -> T:
    deadline = time.monotonic() + within
    last: T | None = None
    while time.monotonic() < deadline:
        last = await check()
        if last:
            return last
        await asyncio.sleep(0.2)
    raise AssertionError(f"timed out after {within}s waiting for {what} (last: {last!r})")


class StatusRecorder:
    """Watches the namespace's Triggers and records every distinct status each one takes."""

    def __init__(self, kube: Kube, namespace: str) -> None:
        self.kube, self.namespace = kube, namespace
        self.statuses: dict[str, list[dict[str, Any]]] = {}
        self.seen: set[str] = set()  # every Trigger the watch has delivered, with a status or not
        self._task: asyncio.Task[None] | None = None
        self._syncs = 0

    async def _record(self) -> None:
        version = None
        while True:
            async for _, obj in self.kube.watch_objects(TRIGGERS, self.namespace, resource_version=version):
                version = obj["metadata"]["resourceVersion"]
                status = obj.get("status") or {}
                self.seen.add(obj["metadata"]["name"])
                history = self.statuses.get(obj["metadata"]["name"], [])
                if status and (not history or history[-1] != status):
                    self.statuses[obj["metadata"]["name"]] = [*history, status]

    async def __aenter__(self) -> StatusRecorder:
        self._task = asyncio.create_task(self._record())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    async def caught_up(self) -> None:
        """Wait until the watch has delivered everything written before now.

        Call it once every writer has stopped: it creates a marker Trigger (on no shard: nothing runs it)
        and waits for the watch to deliver it. A watch delivers in write order, so a second, wrongful
        write of any trigger, made before the writers stopped, has been recorded by then: a check for
        duplicates after it covers the whole life of the writers, not a fixed window."""
        self._syncs += 1
        name = f"zz-caught-up-{self._syncs}"
        body = {
            "apiVersion": API_VERSION,
            "kind": "Trigger",
            "metadata": {"name": name},
            "spec": {
                "classpath": "none",
                "kwargs": {},
                "dagRun": "none",
                "taskId": name,
                "tryNumber": 1,
                "shard": 0,
            },
        }  # fmt: skip  (no shard label: no replica selects it)
        await self.kube.create_custom(TRIGGERS, self.namespace, body)
        await eventually(lambda: _now(name in self.seen), "the watch to catch up")

    def fired(self) -> dict[str, dict[str, Any]]:
        latest = {name: history[-1] for name, history in self.statuses.items()}
        return {name: status for name, status in latest.items() if status["state"] == "fired"}

    def assert_each_fired_exactly_once(self, names: list[str]) -> None:
        for name in names:
            history = self.statuses.get(name, [])
            assert [status["state"] for status in history] == ["fired"], f"{name}: {history}"


@contextlib.asynccontextmanager
async def replica(kube: Kube, namespace: str, identity: str, **options: Any) -> AsyncIterator[Triggerer]:
    """An in-process triggerer replica running on the test's event loop."""
    settings: dict[str, Any] = {
        "shards": 4,
        "capacity": 1000,
        "lease_duration": LEASE_SECONDS,
        "renew_every": RENEW_SECONDS,
        **options,
    }
    triggerer = Triggerer(kube, TriggererSettings(namespace=namespace, identity=identity, **settings))
    task = asyncio.create_task(triggerer.run())
    try:
        yield triggerer
    finally:
        triggerer.stop.set()
        await asyncio.wait_for(task, 15)


class ReplicaProcess:
    """A `python -m controller.triggerer` process with its own metrics and health ports."""

    def __init__(
        self, cluster: Cluster, namespace: str, identity: str, log_dir: Path, **options: Any
    ) -> None:
        self.identity = identity
        self.metrics_port, self.health_port = free_port(), free_port()
        self.log_path = log_dir / f"triggerer-{identity}.log"
        arguments = {"shards": 4, "lease-duration": LEASE_SECONDS, "renew-every": RENEW_SECONDS, **options}
        command = [
            sys.executable,
            "-m",
            "controller.triggerer",
            "--kubeconfig",
            str(cluster.kubeconfig),
            "--namespace",
            namespace,
            "--identity",
            identity,
            "--bind-host",
            "127.0.0.1",
            "--metrics-port",
            str(self.metrics_port),
            "--health-port",
            str(self.health_port),
            *(item for key, value in arguments.items() for item in (f"--{key}", str(value))),
        ]
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=REPO_ROOT,
                start_new_session=True,
                env=dict(os.environ, PYTHONUNBUFFERED="1"),
            )

    def signal(self, number: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, number)

    def wait(self, timeout: float = 20) -> int:
        return self.process.wait(timeout=timeout)

    def metric(self, name: str) -> float:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as reply:
            for line in reply.read().decode().splitlines():
                if line.startswith(name + " "):
                    return float(line.split()[1])
        raise AssertionError(f"{name} not exposed")

    def health(self) -> int:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.health_port}/healthz", timeout=5) as reply:
                return int(reply.status)
        except urllib.error.HTTPError as error:
            return int(error.code)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[list[ReplicaProcess]]:
    started: list[ReplicaProcess] = []
    yield started
    for process in started:
        process.signal(signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(5)
        print(f"--- {process.log_path.name}\n{process.log()[-4000:]}")


async def lease_holders(kube: Kube, namespace: str, shards: int) -> dict[int, str | None]:
    holders: dict[int, str | None] = {}
    for shard in range(shards):
        lease = await kube.get_lease(namespace, shard_lease_name(shard))
        holders[shard] = None if lease is None else (lease["spec"].get("holderIdentity") or None)
    return holders


async def shards_split(kube: Kube, namespace: str, *identities: str) -> dict[int, str | None]:
    """Wait until every shard is held and `identities` hold equal shares (give or take one)."""
    return await eventually(
        lambda: _if(lease_holders(kube, namespace, 4), split_between(*identities)), "the shards to split"
    )


def split_between(*identities: str) -> Callable[[dict[int, str | None]], bool]:
    def balanced(holders: dict[int, str | None]) -> bool:
        counts = [list(holders.values()).count(identity) for identity in identities]
        return None not in holders.values() and max(counts) - min(counts) <= 1 and min(counts) > 0

    return balanced


def date_time_triggers(
    prefix: str, count: int, first_due: datetime, spread: timedelta
) -> list[dict[str, Any]]:
    return [
        trigger_body(f"{prefix}-{index}", DateTimeTrigger(first_due + spread * index / count), shards=4)
        for index in range(count)
    ]


# ------------------------------------------------------------------------------------------ tests


async def test_two_replicas_split_the_shards_and_fire_every_trigger_exactly_once(
    kube: Kube, namespace: str
) -> None:
    # Both replicas share the test's event loop with 80 creations and a watch: a lease longer than a
    # loaded loop's stall keeps the shards where they were split (the holder check below needs that).
    stable = {"lease_duration": 15.0}
    async with StatusRecorder(kube, namespace) as recorder:
        async with (
            replica(kube, namespace, "a", **stable) as a,
            replica(kube, namespace, "b", **stable) as b,
        ):
            holders = await shards_split(kube, namespace, "a", "b")
            first_due = datetime.now(UTC) + timedelta(seconds=2)
            bodies = date_time_triggers("wait", 80, first_due, timedelta(seconds=2))
            await create_triggers(kube, namespace, bodies)
            names = [body["metadata"]["name"] for body in bodies]
            await eventually(lambda: _now(len(recorder.fired()) == len(names)), "every trigger to fire")
        await recorder.caught_up()  # both replicas stopped: every write they made has been recorded
        recorder.assert_each_fired_exactly_once(names)
        for body in bodies:
            status = recorder.fired()[body["metadata"]["name"]]
            shard = body["spec"]["shard"]
            assert status["holder"] == holders[shard], "written by the replica holding the trigger's shard"
            assert status["fencingToken"].startswith(f"{holders[shard]}/")
            assert status["event"] == body["spec"]["kwargs"]["moment"]  # DateTimeTrigger's payload
            assert status["firedAt"] >= status["event"]
        written = count(a, "events_fired") + count(b, "events_fired")
        assert written == len(names)
        assert count(a, "duplicate_events") + count(b, "duplicate_events") == 0


async def test_sigkill_moves_the_shards_after_the_lease_duration_and_every_trigger_fires_once(
    cluster: Cluster, kube: Kube, namespace: str, tmp_path: Path, processes: list[ReplicaProcess]
) -> None:
    processes += [ReplicaProcess(cluster, namespace, name, tmp_path) for name in ("a", "b")]
    a, b = processes
    holders = await shards_split(kube, namespace, "a", "b")
    a_shards = [shard for shard, holder in holders.items() if holder == "a"]
    early = date_time_triggers("early", 20, datetime.now(UTC) + timedelta(seconds=1), timedelta(seconds=1))
    # The late triggers wait on a gate the test opens only after a is dead, so a runs them but can never
    # fire them, however late a loaded machine gets to the kill (due times could pass before it).
    gate = {"metadata": {"name": "gate"}, "data": {"open": "no"}}
    await kube.core.create_namespaced_config_map(namespace, gate)  # type: ignore[arg-type]
    opened = ObjectConditionTrigger(
        "v1", "ConfigMap", "gate", namespace, field_path="data.open", value="yes", poll_interval=1.0
    )
    late = [trigger_body(f"late-{index}", opened, shards=4) for index in range(20)]
    async with StatusRecorder(kube, namespace) as recorder:
        await create_triggers(kube, namespace, early + late)
        early_names = [body["metadata"]["name"] for body in early]
        await eventually(lambda: _now(set(early_names) <= set(recorder.fired())), "the early triggers")

        a.signal(signal.SIGKILL)
        await asyncio.to_thread(a.wait)
        # a's last renewals, read once it is dead (one still in flight can only land later).
        last_renewed = {
            shard: lease["spec"]["renewTime"]
            for shard in a_shards
            if (lease := await kube.get_lease(namespace, shard_lease_name(shard)))
            and lease["spec"].get("holderIdentity") == "a"
        }
        await kube.core.patch_namespaced_config_map("gate", namespace, {"data": {"open": "yes"}})
        await eventually(
            lambda: _if(lease_holders(kube, namespace, 4), lambda h: all(h[s] == "b" for s in a_shards)),
            "b to take over a's shards",
            within=30,
        )
        names = [body["metadata"]["name"] for body in early + late]
        await eventually(lambda: _now(len(recorder.fired()) == len(names)), "all to fire", within=60)
        # b's numbers, then b stopped too: the watch then covers every write either replica made.
        b_fired = b.metric("zonda_triggerer_events_fired_total")
        b_shards = b.metric("zonda_triggerer_shards_held")
        taken_over = {
            shard: await kube.get_lease(namespace, shard_lease_name(shard)) for shard in last_renewed
        }
        await eventually(lambda: _now(b.health() == 200), "b to be healthy")
        b.signal(signal.SIGTERM)
        await asyncio.to_thread(b.wait)
        await recorder.caught_up()
    recorder.assert_each_fired_exactly_once(names)
    # b takes a Lease over only once it has seen it unchanged for a lease duration of its own clock, so
    # never sooner than a lease duration after a's last renewal (the same machine's wall clock).
    for shard, renewed in last_renewed.items():
        lease = taken_over[shard]  # read before b stopped (stopping releases them)
        assert lease is not None
        taken = datetime.fromisoformat(lease["spec"]["acquireTime"]) - datetime.fromisoformat(renewed)
        assert taken >= timedelta(seconds=LEASE_SECONDS), (shard, renewed, lease["spec"])
    late_names = {body["metadata"]["name"] for body in late}
    assert all(recorder.fired()[name]["holder"] == "b" for name in late_names), "a was dead by then"
    written_by_b = sum(1 for status in recorder.fired().values() if status["holder"] == "b")
    assert b_fired == written_by_b
    assert b_shards == 4


async def test_graceful_sigterm_hands_over_faster_than_the_lease_duration(
    cluster: Cluster, kube: Kube, namespace: str, tmp_path: Path, processes: list[ReplicaProcess]
) -> None:
    # Far longer than a loaded machine needs to hand over, so a handover within half of it can only
    # be the release, never the lease expiring.
    long_lease = 60.0
    processes += [
        ReplicaProcess(cluster, namespace, name, tmp_path, **{"lease-duration": long_lease})
        for name in ("a", "b")
    ]
    a, _ = processes
    await shards_split(kube, namespace, "a", "b")
    bodies = date_time_triggers("after", 12, datetime.now(UTC) + timedelta(seconds=3), timedelta(seconds=1))
    async with StatusRecorder(kube, namespace) as recorder:
        await create_triggers(kube, namespace, bodies)
        a.signal(signal.SIGTERM)
        stopped_at = time.monotonic()
        await eventually(
            lambda: _if(lease_holders(kube, namespace, 4), lambda h: set(h.values()) == {"b"}),
            "b to hold every shard",
            within=long_lease / 2,
        )
        handover = time.monotonic() - stopped_at
        assert a.wait() == 0
        names = [body["metadata"]["name"] for body in bodies]
        await eventually(lambda: _now(len(recorder.fired()) == len(names)), "all to fire", within=20)
        processes[1].signal(signal.SIGTERM)
        await asyncio.to_thread(processes[1].wait)
        await recorder.caught_up()
    assert handover < long_lease / 2, handover
    recorder.assert_each_fired_exactly_once(names)
    assert await kube.get_lease(namespace, "zonda-triggerer-member-a") is None, "a withdrew its membership"


async def test_a_replica_whose_lease_was_stolen_cannot_write_an_event(kube: Kube, namespace: str) -> None:
    # Renewing rarely, the replica cannot notice the theft before the event: only fencing stops it.
    async with replica(kube, namespace, "victim", shards=1, lease_duration=60, renew_every=30) as victim:
        await eventually(lambda: _now(0 in victim.holdings), "the victim to hold shard 0")
        lease = await kube.get_lease(namespace, shard_lease_name(0))
        assert lease is not None
        lease["spec"].update(holderIdentity="thief", leaseTransitions=lease["spec"]["leaseTransitions"] + 1)
        await kube.replace_lease(namespace, lease)

        body = trigger_body("stolen", DateTimeTrigger(datetime.now(UTC)), shards=1)
        await kube.create_custom(TRIGGERS, namespace, body)
        await eventually(lambda: _now(count(victim, "fenced_writes") == 1), "fencing to refuse the write")
        await eventually(lambda: _now(0 not in victim.holdings), "the victim to give the shard up")
    # The victim has stopped: whatever it wrote, it wrote before this read.
    stored = await kube.get_custom(TRIGGERS, namespace, "stolen")
    assert stored is not None and not stored.get("status"), stored.get("status")
    assert count(victim, "events_fired") == 0


async def test_a_duplicate_event_changes_nothing(kube: Kube, namespace: str) -> None:
    body = trigger_body("dup", DateTimeTrigger(datetime.now(UTC)), 4)
    created = await kube.create_custom(TRIGGERS, namespace, body)
    version = created["metadata"]["resourceVersion"]
    first = {"state": "fired", "event": 1, "holder": "a", "fencingToken": "a/1"}
    second = {"state": "fired", "event": 1, "holder": "b", "fencingToken": "b/2"}
    # Both replicas saw the same version of the Trigger: only the first write lands.
    assert await write_outcome(kube, namespace, "dup", first, version) is WriteResult.WRITTEN
    assert await write_outcome(kube, namespace, "dup", second, version) is WriteResult.ALREADY_FINISHED
    stored = await kube.get_custom(TRIGGERS, namespace, "dup")
    assert stored is not None and stored["status"] == first
    assert await write_outcome(kube, namespace, "gone", first, None) is WriteResult.GONE


class SleepingTrigger(BaseTrigger):
    """Waits an hour; records its cleanups so a test can see them."""

    cleaned: list[str] = []

    def __init__(self, label: str) -> None:
        super().__init__()
        self.label = label

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (f"{__name__}.SleepingTrigger", {"label": self.label})

    async def run(self) -> AsyncIterator[TriggerEvent]:
        await asyncio.sleep(3600)
        yield TriggerEvent(self.label)

    async def cleanup(self) -> None:
        SleepingTrigger.cleaned.append(self.label)


async def test_deleting_a_trigger_cancels_it_and_runs_its_cleanup(kube: Kube, namespace: str) -> None:
    async with replica(kube, namespace, "solo") as solo:
        await eventually(lambda: _now(len(solo.holdings) == 4), "the replica to hold every shard")
        await kube.create_custom(TRIGGERS, namespace, trigger_body("sleeper", SleepingTrigger("sleeper"), 4))
        key = f"{namespace}/sleeper"  # running triggers are keyed by namespace/name
        await eventually(lambda: _now(key in solo.running), "the trigger to start")
        await kube.delete_custom(TRIGGERS, namespace, "sleeper")
        await eventually(lambda: _now(key not in solo.running), "it to stop", within=10)
    assert SleepingTrigger.cleaned == ["sleeper"]


@pytest.mark.parametrize(
    ("classpath", "kwargs", "message"),
    [
        pytest.param("no.such.Trigger", {}, "could not be loaded", id="an unknown class fails the trigger"),
        pytest.param(
            "zonda.triggers.temporal.DateTimeTrigger",
            {"moment": "2024-01-01T00:00:00"},
            "naive",
            id="kwargs the class rejects fail the trigger",
        ),
        pytest.param(
            "zonda.triggers.file.FileTrigger",
            {"filepath": "/nonexistent/*", "poke_interval": "soon"},
            "Trigger could not be loaded",
            id="a wrongly typed argument fails the trigger",
        ),
    ],
)
async def test_a_trigger_that_cannot_run_is_marked_failed(
    kube: Kube, namespace: str, classpath: str, kwargs: dict[str, Any], message: str
) -> None:
    body = trigger_body("broken", DateTimeTrigger(datetime.now(UTC)), 4)
    body["spec"].update(classpath=classpath, kwargs=kwargs)
    async with replica(kube, namespace, "solo"):
        await kube.create_custom(TRIGGERS, namespace, body)
        stored = await eventually(lambda: _failed(kube, namespace, "broken"), "the trigger to fail")
    assert message in stored["message"]
    assert stored["holder"] == "solo"


async def test_object_condition_trigger_fires_when_the_field_has_the_value(
    kube: Kube, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = {"metadata": {"name": "gate"}, "data": {"open": "no"}}
    await kube.core.create_namespaced_config_map(namespace, gate)  # type: ignore[arg-type]
    trigger = ObjectConditionTrigger(
        "v1", "ConfigMap", "gate", namespace, field_path="data.open", value="yes", poll_interval=0.2
    )
    reads: list[Any] = []  # what each of the trigger's polls read (it runs in this process)

    async def counted_get_object(*args: Any, **kwargs: Any) -> Any:
        obj = await read_object(*args, **kwargs)
        reads.append(((obj or {}).get("data") or {}).get("open"))
        return obj

    monkeypatch.setattr(kubernetes_triggers, "get_object", counted_get_object)
    async with replica(kube, namespace, "solo"), StatusRecorder(kube, namespace) as recorder:
        await kube.create_custom(TRIGGERS, namespace, trigger_body("gate", trigger, 4))
        # A third poll means the first two read "no" and did not match (a match ends the trigger).
        await eventually(lambda: _now(len(reads) >= 3), "the trigger to poll the gate three times")
        assert reads[:2] == ["no", "no"], reads
        await recorder.caught_up()
        assert recorder.fired() == {}, "not before the field has the value"
        await kube.core.patch_namespaced_config_map("gate", namespace, {"data": {"open": "yes"}})
        await eventually(lambda: _now("gate" in recorder.fired()), "the trigger to fire")
    assert recorder.fired()["gate"]["event"] == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "namespace": namespace,
        "name": "gate",
        "fieldPath": "data.open",
        "value": "yes",
    }


# ------------------------------------------------------------------------------------------ bits


def count(triggerer: Triggerer, counter: str) -> float:
    value = triggerer.metrics.registry.get_sample_value(f"zonda_triggerer_{counter}_total")
    return value or 0.0


async def _now(value: T) -> T:
    return value


async def _if(value: Awaitable[T], predicate: Callable[[T], bool]) -> T | None:
    result = await value
    return result if predicate(result) else None


async def _failed(kube: Kube, namespace: str, name: str) -> dict[str, Any] | None:
    stored = await kube.get_custom(TRIGGERS, namespace, name)
    status = (stored or {}).get("status") or {}
    return status if status.get("state") == "failed" else None
