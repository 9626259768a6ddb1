"""A triggerer replica: hold shard Leases, run the shards' triggers, write each first event once.

Four loops share one asyncio event loop:
- leases: every `renew_every` seconds one `coordination.shard_leases.ShardMembership` cycle (renew held
  shard Leases and the member Lease, read all Leases, acquire or release shards as
  `shards.plan_shards` says, the same cycle the controller runs with `--shards`); a Lease not renewed
  within its duration (or taken by someone else) is lost, and its shard's triggers are cancelled at once;
- triggers: list+watch the Trigger resources of the held shards (label selector), start a task per
  pending trigger, cancel the task of a deleted trigger (its `cleanup()` always runs);
- writer: turn each first event (or failure) into the Trigger's status — after re-reading the shard's
  Lease (fencing) and with a resourceVersion precondition, skipping Triggers already fired or failed,
  so a trigger that ran in two replicas during a partition is written exactly once;
- watchdog: measure event-loop lag and name the triggers that block it.

Exactly once rests on the status write, not on running each trigger once: during a failover a trigger
may run in two replicas, but only the first write of `state: fired` succeeds.

Running one trigger is `running.drive_trigger`, the status write `writes.write_outcome`. What stays
here (about 600 lines) is the `Triggerer` class alone: its four loops share the held shards, their
fencing tokens and the running triggers, and the invariant that a lost shard's triggers stop before
its Lease can be taken is easier to check in one class than across modules or mixins.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Mapping
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from controller.coordination.shard_leases import Holding, ShardMembership
from controller.coordination.shards import SHARD_LABEL, shard_capacity, shard_selector
from controller.kube import TRIGGERS, Kube, KubeError
from controller.processes.health import (
    LoopWatchdog,
    SlowSteps,
    describe_culprits,
    serve_http,
)
from controller.providers.kubernetes.triggers import current_kube
from controller.triggerer.leases import LeaseKeeper
from controller.triggerer.metrics import CONTENT_TYPE_LATEST, TriggererMetrics
from controller.triggerer.running import RunningTrigger, TriggerResult, drive_trigger, drive_watcher
from controller.triggerer.settings import TriggererSettings
from controller.triggerer.writes import (
    FINISHED_STATES,
    Outcome,
    WriteResult,
    asset_event_body,
    record_asset_event,
    write_outcome,
)
from zonda.resources.trigger_models import TriggerState, TriggerStatus
from zonda.triggers import BaseEventTrigger, BaseTrigger, TriggerEvent, load_trigger, to_json_safe

log = logging.getLogger(__name__)

#: Triggers started between two yields to the event loop when a list is reconciled.
RECONCILE_CHUNK = 100
#: Concurrent status writes (the API client's connection pool is the real limit).
WRITE_CONCURRENCY = 32
#: How soon an event held for a late Lease renewal is tried again.
LATE_RENEWAL_RETRY_SECONDS = 0.5


async def list_triggers(
    kube: Kube, namespace: str | None, label_selector: str
) -> tuple[list[dict[str, Any]], str | None]:
    """List Triggers (of one namespace, or all with None) with the list's resourceVersion."""
    return await kube.list_custom_with_version(TRIGGERS, namespace, label_selector)


def trigger_key(obj: Mapping[str, Any]) -> str:
    """`namespace/name`: Triggers of several namespaces may share a name."""
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta['name']}"


def _shard_of(obj: Mapping[str, Any]) -> int | None:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    try:
        return int(labels[SHARD_LABEL])
    except (KeyError, ValueError):
        shard = (obj.get("spec") or {}).get("shard")
        return shard if isinstance(shard, int) else None


class Triggerer:
    """One triggerer replica. `await run()` until `stop` is set, then it hands its shards over.

    :param shards: the number of shards; every replica and the controller must agree on it.
    :param capacity: Airflow's triggerer capacity, the most triggers it aims to run: once it runs that
        many it takes no further shard (see `shards.shard_capacity`).
    """

    def __init__(
        self,
        kube: Kube,
        settings: TriggererSettings,
        *,
        stop: asyncio.Event | None = None,
        metrics: TriggererMetrics | None = None,
        watchdog_interval: float = 0.5,
        block_threshold: float = 0.2,
        unhealthy_lag: float = 5.0,
    ) -> None:
        self.kube = kube
        self.settings = settings
        self.namespace = settings.namespace  # where the Leases live
        #: Namespaces whose Triggers this replica runs: None is every namespace.
        self.watch_namespaces: list[str] | None = (
            [settings.namespace]
            if settings.watch_namespaces is None
            else (list(settings.watch_namespaces) or None)
        )
        self.shard_count = settings.shards
        self.capacity = settings.capacity
        self.identity = settings.identity
        self.lease_duration = settings.lease_duration
        self.renew_every = settings.renew_every
        self.stop = stop or asyncio.Event()
        self.metrics = metrics or TriggererMetrics()
        self.unhealthy_lag = unhealthy_lag
        self.keeper = LeaseKeeper(
            kube, namespace=self.namespace, identity=self.identity, lease_duration=self.lease_duration
        )
        self.membership = ShardMembership(
            self.keeper, shard_count=self.shard_count, on_lost=self._lost, on_acquired=self._acquired
        )
        #: The shards held now, with their fencing tokens (the membership's live dict).
        self.holdings: dict[int, Holding] = self.membership.holdings
        self.running: dict[str, RunningTrigger] = {}
        self.awaiting_write: set[str] = set()
        self.finished: set[str] = set()
        self.outcomes: asyncio.Queue[Outcome] = asyncio.Queue()
        self.slow_steps = SlowSteps(minimum_seconds=min(0.05, block_threshold / 2))
        self.watchdog = LoopWatchdog(
            interval=watchdog_interval,
            threshold=block_threshold,
            describe=lambda: describe_culprits(self.slow_steps, self.running),
            on_sample=self.metrics.loop_lag.set,
            on_block=lambda lag: self.metrics.blocked_loop.inc(),
        )
        #: Monotonic time the lease loop last completed a cycle (health).
        self.last_lease_cycle: float | None = None
        #: Seconds from "event yielded" to "status written", for the benchmark.
        self.fire_latencies: list[float] = []
        self._shards_changed = asyncio.Event()
        self._write_slots = asyncio.Semaphore(WRITE_CONCURRENCY)
        self._lease_reads: dict[int, tuple[float, asyncio.Task[bool]]] = {}
        self._started_at = time.monotonic()

    # ----------------------------------------------------------------------------------- lifecycle

    async def run(self) -> None:
        """Run until `stop` is set, then shut down gracefully (cancel triggers, release Leases)."""
        current_kube.set(self.kube)
        loops = [
            asyncio.create_task(self._keep_leases(), name="triggerer leases"),
            asyncio.create_task(self._follow_triggers(), name="triggerer watch"),
            asyncio.create_task(self._write_outcomes(), name="triggerer writer"),
            asyncio.create_task(self.watchdog.run(), name="triggerer watchdog"),
        ]
        try:
            stopped = asyncio.create_task(self.stop.wait())
            done, _ = await asyncio.wait([stopped, *loops], return_when=asyncio.FIRST_COMPLETED)
            for task in done - {stopped}:
                task.result()  # a loop died: raise its error rather than limp on
            stopped.cancel()
        finally:
            await self._shut_down(loops)

    async def _shut_down(self, loops: list[asyncio.Task[Any]]) -> None:
        leases, watch, writer, watchdog = loops
        grace = min(5.0, self.lease_duration / 2)
        self.stop.set()
        # Let a lease cycle in flight finish, so no Lease it acquires goes unrecorded (and unreleased).
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(leases), grace)
        for task in (leases, watch):
            task.cancel()
        await asyncio.gather(leases, watch, return_exceptions=True)
        trigger_tasks = [trigger.task for trigger in self.running.values() if trigger.task is not None]
        for task in trigger_tasks:
            task.cancel()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.gather(*trigger_tasks, return_exceptions=True), grace)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.outcomes.join(), grace)  # events already yielded get written
        writer.cancel()
        await asyncio.gather(writer, return_exceptions=True)
        self.metrics.shards_held.set(0)
        released = await self.membership.release_all()
        watchdog.cancel()
        await asyncio.gather(watchdog, return_exceptions=True)
        log.info("Triggerer %s stopped; released shards %s", self.identity, released)

    # -------------------------------------------------------------------------------------- leases

    async def _keep_leases(self) -> None:
        """Renew and rebalance every `renew_every` seconds; returns (between cycles) once stopping."""
        while not self.stop.is_set():
            try:
                await self._lease_cycle()
                self.last_lease_cycle = time.monotonic()
            except (KubeError, OSError, TimeoutError) as error:
                log.warning("Lease cycle failed (retrying in %.1fs): %s", self.renew_every, error)
            self._drop_lapsed_holdings()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stop.wait(), self.renew_every)

    async def _lease_cycle(self) -> None:
        capacity = shard_capacity(
            running_triggers=len(self.running),
            trigger_capacity=self.capacity,
            held_shards=len(self.holdings),
            shard_count=self.shard_count,
        )
        await self.membership.cycle(capacity=capacity, may_acquire=not self.stop.is_set())
        self.metrics.shards_held.set(len(self.holdings))

    def _drop_lapsed_holdings(self) -> None:
        self.membership.drop_lapsed()

    def _lose(self, shard: int, reason: str) -> None:
        self.membership.lose(shard, reason)

    def _acquired(self, shards: frozenset[int]) -> None:
        self._shards_changed.set()

    def _lost(self, shard: int, reason: str) -> None:
        """Shard `shard` is no longer ours: cancel its triggers now, someone else may already run them."""
        doomed = [trigger for trigger in self.running.values() if trigger.shard == shard]
        log.warning("Stopping shard %d's %d triggers (%s)", shard, len(doomed), reason)
        for trigger in doomed:
            if trigger.task is not None:
                trigger.task.cancel()
        self.metrics.shards_held.set(len(self.holdings))
        self._shards_changed.set()

    # ------------------------------------------------------------------------------------ triggers

    async def _follow_triggers(self) -> None:
        """Watch the held shards' Triggers; restart the watch whenever the held set changes."""
        while True:
            self._shards_changed.clear()
            shards = frozenset(self.holdings)
            watch = asyncio.create_task(self._watch_shards(shards)) if shards else None
            changed = asyncio.create_task(self._shards_changed.wait())
            waiting: set[asyncio.Task[Any]] = {changed} if watch is None else {changed, watch}
            try:
                done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in waiting:
                    task.cancel()
                await asyncio.gather(*waiting, return_exceptions=True)
            if watch is not None and watch in done and not watch.cancelled() and watch.exception():
                log.warning("Trigger watch failed, restarting: %s", watch.exception())
                await asyncio.sleep(1.0)

    async def _watch_shards(self, shards: frozenset[int]) -> None:
        namespaces: list[str | None] = list(self.watch_namespaces) if self.watch_namespaces else [None]
        await asyncio.gather(*(self._watch_namespace(namespace, shards) for namespace in namespaces))

    async def _watch_namespace(self, namespace: str | None, shards: frozenset[int]) -> None:
        selector = shard_selector(shards)
        version: str | None = None
        while True:
            if version is None:
                items, version = await list_triggers(self.kube, namespace, selector)
                await self._reconcile(shards, items, namespace)
            try:
                async for kind, obj in self._watch(namespace, selector, version):
                    version = (obj.get("metadata") or {}).get("resourceVersion") or version
                    if kind == "DELETED":
                        self._forget(trigger_key(obj))
                    elif kind in ("ADDED", "MODIFIED"):
                        self._observe_trigger(obj)
            except KubeError as error:
                if error.status != 410:
                    raise
                version = None  # too old to resume: list again

    def _watch(
        self, namespace: str | None, selector: str, version: str | None
    ) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        return self.kube.watch_objects(TRIGGERS, namespace, label_selector=selector, resource_version=version)

    async def _reconcile(
        self, shards: frozenset[int], items: list[dict[str, Any]], namespace: str | None = None
    ) -> None:
        """Make the running set match a fresh list (of `namespace`, or of all); yields to the loop now
        and then, so that starting 10,000 triggers does not stall the ones already running."""
        present = {trigger_key(obj) for obj in items}
        listed = "" if namespace is None else f"{namespace}/"
        for key in [key for key, trigger in self.running.items() if trigger.shard in shards]:
            if key.startswith(listed) and key not in present:
                self._forget(key)  # deleted while we were not watching
        self.finished = {key for key in self.finished if not key.startswith(listed) or key in present}
        for index, obj in enumerate(items):
            self._observe_trigger(obj)
            if index % RECONCILE_CHUNK == RECONCILE_CHUNK - 1:
                await asyncio.sleep(0)

    def _observe_trigger(self, obj: dict[str, Any]) -> None:
        name = trigger_key(obj)
        shard = _shard_of(obj)
        if shard is None or shard not in self.holdings:
            return
        version = obj["metadata"].get("resourceVersion")
        if (obj.get("status") or {}).get("state") in FINISHED_STATES:
            self.finished.add(name)
            self._cancel(name)  # fired elsewhere (a failover duplicate): stop our copy
            return
        if name in self.running:
            self.running[name].resource_version = version
            return
        if name in self.finished or name in self.awaiting_write:
            return
        self._start(name, shard, obj, version)

    def _forget(self, name: str) -> None:
        """The Trigger was deleted (its task instance no longer waits): cancel it, forget it."""
        self._cancel(name)
        self.finished.discard(name)

    def _cancel(self, name: str) -> None:
        trigger = self.running.get(name)
        if trigger is not None and trigger.task is not None:
            trigger.task.cancel()

    def _start(self, name: str, shard: int, obj: Mapping[str, Any], version: str | None) -> None:
        record = RunningTrigger(name=name, shard=shard, resource_version=version)
        spec = obj.get("spec") or {}
        try:
            trigger = load_trigger(spec["classpath"], spec.get("kwargs") or {})
        except Exception as error:  # a bad classpath or kwargs fails the trigger, as in Airflow
            log.error("Trigger %s could not be loaded: %s", name, error)
            self._enqueue(record, self._failed(shard, f"Trigger could not be loaded: {error}"))
            return
        trigger.trigger_id = name
        if isinstance(spec.get("asset"), Mapping):
            record.task = asyncio.create_task(self._run_watcher(record, obj), name=f"watcher {name}")
        else:
            record.task = asyncio.create_task(self._run_trigger(record, trigger), name=f"trigger {name}")
        self.running[name] = record
        self.metrics.running_triggers.labels(shard=str(shard)).inc()

    async def _run_watcher(self, record: RunningTrigger, obj: Mapping[str, Any]) -> None:
        """An asset's watcher: every event it yields becomes an AssetEvent (a fenced create)."""
        spec = obj.get("spec") or {}

        def make() -> BaseTrigger:
            trigger = load_trigger(spec["classpath"], spec.get("kwargs") or {})
            trigger.trigger_id = record.name
            return trigger

        def deliver(trigger: BaseTrigger, event: TriggerEvent) -> None:
            key = trigger.event_key(event) if isinstance(trigger, BaseEventTrigger) else None
            try:
                body = asset_event_body(obj, event.payload, key)
            except TypeError as error:
                log.error("Asset watcher %s: event payload cannot be stored: %s", record.name, error)
                return
            self.outcomes.put_nowait(
                Outcome(
                    name=record.name,
                    shard=record.shard,
                    status={},
                    resource_version=None,
                    produced_at=time.monotonic(),
                    asset_event=body,
                    consumed=key is not None,
                )
            )

        log.info("Asset watcher %s started for %s", record.name, (spec.get("asset") or {}).get("uri"))
        try:
            await drive_watcher(
                make, deliver=deliver, report_step=self.slow_steps.reporter(record.name), name=record.name
            )
        finally:
            self._stopped(record)

    async def _run_trigger(self, record: RunningTrigger, trigger: BaseTrigger) -> None:
        def deliver(result: TriggerResult) -> None:
            if result.event is not None:
                self._enqueue(record, self._fired(record.shard, result.event))
            else:
                self._enqueue(record, self._failed(record.shard, result.failure or "Trigger failed"))

        try:
            await drive_trigger(
                trigger, deliver=deliver, report_step=self.slow_steps.reporter(record.name), name=record.name
            )
        finally:
            self._stopped(record)

    def _stopped(self, record: RunningTrigger) -> None:
        """A trigger's or watcher's task ended: forget it, unless a newer run of the name took over."""
        if self.running.get(record.name) is record:
            del self.running[record.name]
            self.metrics.running_triggers.labels(shard=str(record.shard)).dec()

    def _token(self, shard: int) -> str | None:
        holding = self.holdings.get(shard)
        return None if holding is None else holding.fencing_token(self.identity)

    def _fired(self, shard: int, event: TriggerEvent) -> dict[str, Any]:
        try:
            payload = to_json_safe(event.payload, path="event")
        except TypeError as error:
            return self._failed(shard, f"Trigger event payload cannot be stored: {error}")
        return TriggerStatus(
            state=TriggerState.FIRED,
            event=payload,
            fired_at=datetime.now(UTC),
            holder=self.identity,
            fencing_token=self._token(shard),
        ).to_wire()

    def _failed(self, shard: int, message: str) -> dict[str, Any]:
        return TriggerStatus(
            state=TriggerState.FAILED, message=message, holder=self.identity, fencing_token=self._token(shard)
        ).to_wire()

    def _enqueue(self, record: RunningTrigger, status: dict[str, Any]) -> None:
        self.awaiting_write.add(record.name)
        self.outcomes.put_nowait(
            Outcome(
                name=record.name,
                shard=record.shard,
                status=status,
                resource_version=record.resource_version,
                produced_at=time.monotonic(),
            )
        )

    # -------------------------------------------------------------------------------------- writer

    async def _write_outcomes(self) -> None:
        """Write outcomes as they come, up to `WRITE_CONCURRENCY` at once."""
        in_flight: set[asyncio.Task[None]] = set()
        try:
            while True:
                await self._write_slots.acquire()
                outcome = await self.outcomes.get()
                task = asyncio.create_task(self._write_one(outcome))
                in_flight.add(task)
                task.add_done_callback(in_flight.discard)
        finally:
            for task in in_flight:
                task.cancel()
            await asyncio.gather(*in_flight, return_exceptions=True)

    async def _write_one(self, outcome: Outcome) -> None:
        if outcome.asset_event is not None:
            await self._write_asset_event(outcome, outcome.asset_event)
            return
        try:
            if await self._held_for_late_renewal(outcome):
                return
            if not await self._lease_held_since(outcome.shard, outcome.produced_at):
                self.awaiting_write.discard(outcome.name)  # the shard's new holder runs it again
                self.metrics.fenced_writes.inc()
                log.warning("Not writing %s: shard %d's Lease is no longer ours", outcome.name, outcome.shard)
                return
            namespace, name = outcome.name.split("/", 1)
            result = await write_outcome(self.kube, namespace, name, outcome.status, outcome.resource_version)
        except (KubeError, OSError, TimeoutError) as error:
            log.warning("Writing %s failed, retrying: %s", outcome.name, error)
            await asyncio.sleep(1.0)
            self.outcomes.put_nowait(outcome)
            return
        finally:
            self.outcomes.task_done()
            self._write_slots.release()
        self.awaiting_write.discard(outcome.name)
        if result is WriteResult.GONE:
            return
        self.finished.add(outcome.name)
        if result is WriteResult.ALREADY_FINISHED:
            self.metrics.duplicate_events.inc()
            log.info("Dropped a duplicate event for %s: it had already fired or failed", outcome.name)
        elif outcome.status.get("state") == TriggerState.FIRED.value:
            self.metrics.events_fired.inc()
            self.fire_latencies.append(time.monotonic() - outcome.produced_at)
        else:
            self.metrics.triggers_failed.inc()

    async def _write_asset_event(self, outcome: Outcome, body: dict[str, Any]) -> None:
        """Record a watcher's event, if the shard's Lease is still ours (else its new holder's copy of
        the watcher reports it), or whatever the Lease if the watcher consumed what it reports (a deleted
        file: nobody reports it again); a 409 is the same event recorded before."""
        event = body["metadata"]["name"]
        try:
            if not outcome.consumed and await self._held_for_late_renewal(outcome):
                return
            if not outcome.consumed and not await self._lease_held_since(outcome.shard, outcome.produced_at):
                self.metrics.fenced_writes.inc()
                log.warning(
                    "Not recording asset event %s: shard %d's Lease is no longer ours", event, outcome.shard
                )
                return
            result = await record_asset_event(self.kube, body["metadata"]["namespace"], body)
        except (KubeError, OSError, TimeoutError) as error:
            log.warning("Recording asset event %s failed, retrying: %s", event, error)
            await asyncio.sleep(1.0)
            self.outcomes.put_nowait(outcome)
            return
        finally:
            self.outcomes.task_done()
            self._write_slots.release()
        if result is WriteResult.ALREADY_FINISHED:
            self.metrics.duplicate_events.inc()
            log.info("Asset event %s of watcher %s was already recorded", event, outcome.name)
        else:
            self.metrics.events_fired.inc()
            self.fire_latencies.append(time.monotonic() - outcome.produced_at)
            log.info("Recorded asset event %s of watcher %s", event, outcome.name)

    async def _held_for_late_renewal(self, outcome: Outcome) -> bool:
        """Put the outcome back for later when its shard is held but our renewal is late by our own
        clock (an apiserver or etcd away, a loaded machine): the lease cycle renews it (then the write
        goes on, fenced as ever) or loses it (then the shard's next holder runs the trigger again).
        Dropped instead, the event was lost for good once the renewal came through: this replica kept
        the shard and never ran that trigger again (the fault suite's etcd restart: a deferred task
        instance waited forever)."""
        if not self.membership.renewal_late(outcome.shard):
            return False
        log.info("Holding %s's event: shard %d's Lease renewal is late", outcome.name, outcome.shard)
        await asyncio.sleep(LATE_RENEWAL_RETRY_SECONDS)
        self.outcomes.put_nowait(outcome)
        return True

    async def _lease_held_since(self, shard: int, since: float) -> bool:
        """The fencing check: shard `shard`'s Lease, read from the API after `since`, is still ours.

        Events of one shard share reads: a read already in flight that started after `since` answers
        for every event produced before it started, so a burst of events costs one read per shard
        (per round trip), not one per event.
        """
        holding = self.holdings.get(shard)
        if holding is None or not holding.is_current(time.monotonic()):
            return False
        started, reading = self._lease_reads.get(shard, (float("-inf"), None))
        failed = (
            reading is not None
            and reading.done()
            and (reading.cancelled() or reading.exception() is not None)
        )
        if reading is None or started < since or failed:
            started, reading = time.monotonic(), asyncio.create_task(self._read_and_check(shard))
            self._lease_reads[shard] = (started, reading)
        return await asyncio.shield(reading)

    async def _read_and_check(self, shard: int) -> bool:
        holding = self.holdings.get(shard)
        if holding is None:
            return False
        if await self.keeper.verify(holding):
            return True
        self._lose(shard, "fencing check failed: the Lease changed hands")
        return False

    # -------------------------------------------------------------------------------------- health

    def health_problems(self) -> list[str]:
        """Why this replica is unhealthy (empty when healthy)."""
        now = time.monotonic()
        problems = []
        lag = self.watchdog.worst_lag(since=now - 10 * self.watchdog.interval, now=now)
        if lag > self.unhealthy_lag:
            problems.append(f"event loop lagged {lag:.2f}s (limit {self.unhealthy_lag:.2f}s)")
        stale_after = max(self.lease_duration, 3 * self.renew_every)
        last = self.last_lease_cycle if self.last_lease_cycle is not None else self._started_at
        if now - last > stale_after:
            problems.append(f"lease loop has not completed a cycle for {now - last:.1f}s")
        return problems

    async def healthz(self, request: web.Request) -> web.Response:
        problems = self.health_problems()
        if problems:
            return web.Response(status=500, text="unhealthy: " + "; ".join(problems) + "\n")
        return web.Response(text=f"ok: {len(self.holdings)} shards, {len(self.running)} triggers running\n")

    async def readyz(self, request: web.Request) -> web.Response:
        """Ready once a first lease cycle has completed (it knows which shards it runs)."""
        if self.last_lease_cycle is None:
            return web.Response(status=503, text="starting: no lease cycle completed yet\n")
        return web.Response(text=f"ok: {len(self.holdings)} shards\n")

    async def metrics_page(self, request: web.Request) -> web.Response:
        body = self.metrics.exposition()
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


async def run_triggerer(kube: Kube, settings: TriggererSettings, *, stop: asyncio.Event) -> None:
    """Run one triggerer replica until `stop` is set (the CLI sets it on SIGTERM/SIGINT)."""
    triggerer = Triggerer(kube, settings, stop=stop)
    health_port, metrics_port, bind_host = settings.health_port, settings.metrics_port, settings.bind_host
    servers: list[web.AppRunner] = []
    try:
        if health_port is not None:
            runner, port = await serve_http(
                {"/healthz": triggerer.healthz, "/readyz": triggerer.readyz}, host=bind_host, port=health_port
            )
            servers.append(runner)
            log.info("Health endpoint on %s:%d/healthz", bind_host, port)
        if metrics_port is not None:
            runner, port = await serve_http(
                {"/metrics": triggerer.metrics_page}, host=bind_host, port=metrics_port
            )
            servers.append(runner)
            log.info("Metrics on %s:%d/metrics", bind_host, port)
        await triggerer.run()
    finally:
        for runner in servers:
            await runner.cleanup()
