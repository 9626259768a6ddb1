"""The controller process: kopf and our followers watch, our work queue reconciles.

kopf gives us login, watch streams (with re-listing and back-off), namespaces, and a liveness
probe. Its handlers here are thin: they note what changed and enqueue a key; the reconcilers in
`controller.reconcilers.reconcilers` do the work. The two hottest watches, the task pods and the
DagRuns (most of the events: several per task instance), are followed by `controller.kube.follow`
instead, which calls the same handlers with the same arguments: kopf's per-event machinery cost
more than the handlers (a fifth of the busy loop with 100 runs at once). Only `on.event` handlers
are used, so kopf stores nothing on our objects (no finalizers, no annotations): GitOps tools see
no drift, and deleting a DAG never waits for a controller that is down. The handlers are
coroutines: kopf runs a plain function in its thread pool, a hop per watch event that cost more
than the handler (and the work queue is not thread-safe), and no diff-base is built
(`NoDiffBase`): only change handlers read one.

One replica acts at a time: with `--peering`, the work queue is gated by a Lease. With `--shards N`
(N > 1) replicas act at once instead, each for the DAGs (with their runs and Backfills) of the shards
whose Leases it holds (`controller.manager.shards`); the peering Lease is then not used.

The process is one object, `ControllerProcess`: its settings, and what it builds at start (the API
client, the executor, the reconcilers, the work queue, the leader elector) in one `Services`. Its
kopf handlers are its own methods, registered on a registry of its own, so nothing lives at module
level and importing this module registers nothing.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import threading
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import kopf
from aiohttp import web
from prometheus_client import start_http_server

from controller.coordination.shards import dag_shard, object_shard
from controller.executors import references
from controller.executors.base import Executor
from controller.executors.kubernetes import KubernetesExecutor, PodNews
from controller.executors.local import LocalExecutor
from controller.kube import BACKFILLS, DAGRUNS, DAGS, TRIGGERS, Kube, KubeError
from controller.kube.cache import LabelledObjects, ObjectCache
from controller.kube.client import PODS, in_cluster_server
from controller.kube.follow import Follower
from controller.manager import leader, served
from controller.manager.settings import ControllerSettings
from controller.manager.shards import ControllerShards
from controller.manager.workqueue import WorkQueue
from controller.processes import clock, collector
from controller.processes.deadlines import MainThreadChecks
from controller.processes.health import serve_http
from controller.reconcilers import metrics
from controller.reconcilers.asset_index import AliasResolutions, AssetDagIndex, AssetEventIndex, asset_keys_of
from controller.reconcilers.dags import DagRunRefs
from controller.reconcilers.index import RunSummary
from controller.reconcilers.pools import POOLS, Sharding, runs_to_wake
from controller.reconcilers.reconcilers import FINISHED_RUN_STATES, Reconcilers
from zonda.passes import try_tracking
from zonda.resources.asset_models import (
    ASSETEVENTS,
    ASSETS,
    event_from_body,
    sanitize_uri,
    watcher_trigger_name,
)
from zonda.resources.models import GROUP, VERSION
from zonda.resources.run_events import RunEvent
from zonda.resources.wire import LABEL_DAGRUN_UID
from zonda.schedules import assets
from zonda.specs import params

logger = logging.getLogger(__name__)

#: How long a stopping controller waits for the Events its last passes are still posting.
EVENT_FLUSH_SECONDS = 5.0

#: Seconds a task pod's start waits for a pass: a short try's end usually comes first, and one pass
#: (one status write) then records both; a long one shows running this much later (its start time is
#: the pod's own either way). Nothing waits on it: timeouts count from the pod's own start time.
#: 5 s, not 1: a DagRun status PUT of a 20-task chain costs the apiserver ~26 ms of CPU (against ~14 ms
#: for a task pod's whole life), and with 100 runs at once the end of a 100 ms kwok pod reached the
#: controller more than 1 s after its start for 41 % of task instances on main and 74 % once the
#: controller's writes got faster (each a status write of its own); at 5 s, 7 of 2,000.
STARTED_PASS_DELAY = 5.0
#: After that, the pass that only records a start waits behind the passes queued (launches, ends, DAG
#: passes: `STARTED_PRIORITY`), at most `STARTED_PASS_LATEST` seconds more: a controller with work
#: queued records the start with the try's end when that comes first.
STARTED_PASS_LATEST = 10.0
#: Seconds between the tries of releasing a held task pod whose run is gone or finished (the API
#: unreachable): a held pod changes no more, so no later event of it would try again.
HELD_POD_RETRIES = (0.5, 1.0, 2.0, 4.0, 8.0, 16.0)

#: The work queue's priority of a DAG's status-writing pass after its runs were created (`dag_later`):
#: after the DAG passes (0) and the run passes (1) queued.
LATER_PRIORITY = 2
#: The work queue's priority of a pass that only records a task's start, after all those.
STARTED_PRIORITY = 3

_PLURALS = {"dag": DAGS, "run": DAGRUNS, "backfill": BACKFILLS, "pool": POOLS, "asset": ASSETS}


class NoDiffBase(kopf.DiffBaseStorage):
    """No "last handled" essence: kopf deep-copies every object for one on every watch event, and
    only its on.create/update/resume handlers (none here) compare against it."""

    def build(self, *, body: kopf.Body, extra_fields: Any = None) -> kopf.BodyEssence:
        return {}

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        return None

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        return None


@dataclass
class Services:
    """What the process builds at start (it needs the event loop), all at once: never half built."""

    kube: Kube
    executor: Executor
    reconcilers: Reconcilers
    queue: WorkQueue
    elector: leader.LeaderElector | None = None
    shards: ControllerShards | None = None


class ControllerProcess:
    """The controller process: settings read once, the services built at start, the kopf handlers."""

    def __init__(self, settings: ControllerSettings) -> None:
        self.settings = settings
        self.services: Services | None = None  # None until kopf's startup has built them
        self.tasks: list[asyncio.Task[Any]] = []
        self.http: list[web.AppRunner] = []
        #: (namespace, DAG) -> its Backfills, from their watch: a run of the DAG starting or finishing
        #: wakes them (a finished run makes room for the next).
        self.backfills: dict[tuple[str, str], set[str]] = {}
        #: (namespace, DAG) -> the keys (URIs, alias:<name>) of its asset schedule, from the DAG watch:
        #: an AssetEvent wakes the DAGs it may make due.
        self.asset_consumers: dict[tuple[str, str], frozenset[str]] = {}
        #: (namespace, DAG) -> every asset key its spec names (schedule and outlets), as last seen.
        self.dag_assets: dict[tuple[str, str], frozenset[str]] = {}
        #: (namespace, Backfill) -> its DAG, from the Backfill watch: the Backfill's shard is its DAG's.
        self.backfill_dags: dict[tuple[str, str], str] = {}
        #: (namespace, DAG) -> (URI, watcher Trigger name) of the AssetWatchers its schedule names.
        self.dag_watchers: dict[tuple[str, str], frozenset[tuple[str, str]]] = {}
        #: Each consumer DAG's asset cursor as last seen (a hash): when it moves, its assets prune again.
        self.dag_cursors: dict[tuple[str, str], int] = {}

    def registry(self) -> kopf.OperatorRegistry:
        """kopf's handlers: this object's methods. Only `on.event`, so kopf stores nothing on objects.
        The DagRuns and task pods are not kopf's: `followers` calls `on_dagrun` and `on_task_pod`."""
        registry = kopf.OperatorRegistry()
        kopf.on.startup(registry=registry)(self.startup)
        kopf.on.cleanup(registry=registry)(self.cleanup)
        kopf.on.login(registry=registry)(self.login)
        kopf.on.event(GROUP, VERSION, "dags", registry=registry)(self.on_dag)
        kopf.on.event(GROUP, VERSION, BACKFILLS, registry=registry)(self.on_backfill)
        kopf.on.event(GROUP, VERSION, POOLS, registry=registry)(self.on_pool)
        kopf.on.event(GROUP, VERSION, "triggers", registry=registry)(self.on_trigger)
        kopf.on.event(GROUP, VERSION, ASSETEVENTS, registry=registry)(self.on_asset_event)
        kopf.on.event(GROUP, VERSION, ASSETS, registry=registry)(self.on_asset)
        return registry

    # ------------------------------------------------------------------------------------ the queue

    def enqueue(self, kind: str, namespace: str, name: str) -> None:
        if self.services is None:
            return
        if kind == "pool" and not self.pool_exists(namespace, name):
            return
        self.services.queue.add((kind, namespace, name))

    def pool_exists(self, namespace: str, name: str) -> bool:
        """Whether a Pool pass has a Pool to write the status of: one the Pool watch delivered. A
        run's pass wakes the Pools whose numbers it moved, `default-pool` on every task that names
        no pool, which has Airflow's 128 slots while no such resource exists: its pass read a 404
        and wrote nothing (0.2-0.4 GETs per task instance with 100 runs at once, 773 passes on the
        Pools' replica with `--shards 2`). A Pool the watch delivers later is enqueued by its own
        event, and that pass counts every run's slots from the index then."""
        cache = self.services.kube.cache if self.services is not None else None
        return cache is None or cache.holds(POOLS, namespace, name)

    @staticmethod
    def priority(key: Hashable) -> int:
        """DAG passes first: they create the runs due now, and each is one short pass per DAG."""
        return 0 if isinstance(key, tuple) and key[0] == "dag" else 1

    def dag_later(self, namespace: str, name: str) -> None:
        """A DAG's status-writing pass after the creations and run passes queued now
        (`dag_plans.status_written_later`); its run's start wakes it sooner (`add` moves it up)."""
        if self.services is not None:
            self.services.queue.add(("dag", namespace, name), LATER_PRIORITY)

    def shard_of(self, kind: str, namespace: str, name: str) -> int | None:
        """The controller shard of a work-queue key (None: not known yet; its watch event will tell).

        A DAG's runs and Backfills are in the DAG's shard; Pools and Assets, which no DAG owns, are
        spread by their own names.
        """
        assert self.services is not None and self.services.shards is not None
        count = self.services.shards.shard_count
        if kind == "dag":
            return dag_shard(namespace, name, count)
        if kind == "run":
            summary = self.services.reconcilers.index.runs.get((namespace, name))
            return None if summary is None else dag_shard(namespace, summary.dag_name, count)
        if kind == "backfill":
            dag = self.backfill_dags.get((namespace, name))
            return None if dag is None else dag_shard(namespace, dag, count)
        return object_shard(kind, namespace, name, count)

    def serves(self, kind: str, namespace: str, name: str) -> bool:
        """Whether this replica reconciles the key now (always, unsharded)."""
        shards = self.services.shards if self.services is not None else None
        if shards is None:
            return True
        shard = self.shard_of(kind, namespace, name)
        return shard is not None and shards.owns(shard)

    def retry_when_renewed(self, kind: str, namespace: str, name: str) -> datetime | None:
        """When a key this replica does not serve now is to be looked at again: after the next shard
        cycle if its shard is ours but the renewal is late, else never (another replica's shard, or
        none's: whoever takes it enqueues all of it). Dropped, a DAG's key lost its wake-up until its
        shard changed hands: its scheduled runs were no longer created (1,000 DAGs on two and four
        replicas at load 20, where a busy loop renewed late)."""
        shards = self.services.shards if self.services is not None else None
        shard = self.shard_of(kind, namespace, name) if shards is not None else None
        if shards is None or shard is None or not shards.renewal_late(shard):
            return None
        return clock.now_utc() + timedelta(seconds=shards.renew_every)

    async def reconcile(self, key: Hashable) -> datetime | None:
        assert isinstance(key, tuple) and self.services is not None
        kind, namespace, name = key
        if not self.serves(kind, namespace, name):
            return self.retry_when_renewed(kind, namespace, name)
        reconcilers = self.services.reconcilers
        metrics.RECONCILES.labels(kind).inc()
        try:
            return await reconcilers.reconcile(kind, namespace, name)
        finally:
            metrics.RECONCILES_DONE.labels(kind).inc()

    async def report_failing(self, key: Hashable, failures: int, error: BaseException) -> None:
        assert isinstance(key, tuple) and self.services is not None
        kind, namespace, name = key
        if kind == "asset":
            return  # keyed by URI; its failures are in the log
        await self.services.reconcilers.report_failing(_PLURALS[kind], namespace, name, failures, error)

    async def report_recovered(self, key: Hashable) -> None:
        assert isinstance(key, tuple) and self.services is not None
        kind, namespace, name = key
        if kind == "asset":
            return
        await self.services.reconcilers.report_recovered(_PLURALS[kind], namespace, name)

    # ---------------------------------------------------------------------------------- life cycle

    async def startup(self, settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.posting.enabled = False  # our reconcilers post the Events users read
        settings.scanning.disabled = True  # no cluster-wide CRD/namespace scans: least privilege
        settings.watching.server_timeout = 300
        # kopf waits for a quiet window before calling handlers (0.1 s by default); ours only enqueue a
        # key and the queue deduplicates bursts, so the window would only add latency.
        settings.batching.batch_window = 0.005
        settings.persistence.diffbase_storage = NoDiffBase()
        # A check of a conf against a DAG's patterns met in a custom timetable's thread runs here, in
        # the main thread, under its deadline (controller.processes.deadlines).
        if threading.current_thread() is threading.main_thread():
            params.run_checks_with(MainThreadChecks(asyncio.get_running_loop()))
        ours = self.settings
        kube = await Kube.connect(ours.kubeconfig, component="zonda-controller")
        # kopf's own calls (its watches' connects, its patches) bounded as ours are (controller.kube.timeouts)
        settings.networking.request_timeout = kube.timeouts.total
        settings.networking.connect_timeout = kube.timeouts.connect
        # The DAGs, runs and Pools as the watches below deliver them: a pass reads its object from here.
        kube.cache = ObjectCache(frozenset({DAGS, DAGRUNS, POOLS}), listable=frozenset({POOLS}))
        kube.run_shards.inline_limit = ours.inline_task_instances  # past it, a run's instances in shards
        executor: Executor
        if ours.executor == "local":
            executor = LocalExecutor(
                ours.state_dir,
                parallelism=ours.parallelism,
                on_exit=lambda namespace, run: self.enqueue("run", namespace, run),
                environment_for=references.LocalEnvironment(kube),
            )
        else:
            executor = KubernetesExecutor(kube, ours.pod_defaults)
            executor.pods = LabelledObjects(LABEL_DAGRUN_UID)  # fed by the task pod watch below
        reconcilers = Reconcilers(
            kube,
            executor,
            trigger_shards=ours.trigger_shards,
            limits=ours.pass_limits(),
            on_run_state_change=self.run_state_changed,
            enqueue=self.enqueue,
        )
        reconcilers.writer.fold_seconds = ours.event_fold_seconds
        for calls in (reconcilers.dags, reconcilers.runs, reconcilers.backfills):  # user code: one limit
            calls.timetable_calls.limit_seconds = ours.timetable_timeout
        reconcilers.runs.triggers = LabelledObjects(LABEL_DAGRUN_UID)  # fed by the Trigger watch below
        reconcilers.dags.keep_runs(DagRunRefs())  # fed by the DagRun watch below and our own writes
        # the AssetEvents by asset and the DAGs by the assets they name: fed by the watches below
        reconcilers.dags.asset_events = reconcilers.assets.events = AssetEventIndex()
        reconcilers.dags.asset_dags = reconcilers.assets.dags = AssetDagIndex()
        reconcilers.dags.aliases = reconcilers.assets.aliases = AliasResolutions()
        queue = WorkQueue(
            self.reconcile,
            workers=ours.workers,
            on_failing=self.report_failing,
            on_recovered=self.report_recovered,
            priority=self.priority,
        )
        reconcilers.dags.later = self.dag_later
        elector = None
        shards = None
        if ours.shards > 1:
            shards = ControllerShards(
                kube,
                namespace=ours.leader_namespace or (ours.namespaces or ["default"])[0],
                identity=ours.identity,
                shard_count=ours.shards,
                lease_duration=ours.leader_lease_duration,
                on_acquired=self.shards_acquired,
                on_lost=lambda shard, reason: logger.info("controller shard %d lost: %s", shard, reason),
            )
            reconcilers.runs.admission.sharding = Sharding(ours.shards, shards.served, shards.ledger)
            self.tasks.append(asyncio.create_task(shards.run(self.after_shard_cycle), name="shards"))
        elif ours.leader_election:
            queue.pause()
            elector = leader.LeaderElector(
                kube,
                namespace=ours.leader_namespace or (ours.namespaces or ["default"])[0],
                name=ours.leader_lease,
                identity=ours.identity,
                on_started_leading=lambda: self.started_leading(queue),
                on_stopped_leading=queue.pause,
                lease_duration=ours.leader_lease_duration,
                retry_period=min(2.0, ours.leader_lease_duration / 4),
            )
            self.tasks.append(asyncio.create_task(elector.run(), name="leader-election"))
        self.services = Services(
            kube=kube, executor=executor, reconcilers=reconcilers, queue=queue, elector=elector, shards=shards
        )
        for follower in self.followers():
            where = follower.namespace or "all"
            self.tasks.append(asyncio.create_task(follower.run(), name=f"watch-{follower.plural}-{where}"))
        queue.start()
        if ours.health_port:
            runner, _port = await serve_http(
                {"/healthz": self.healthz, "/readyz": self.readyz}, host="0.0.0.0", port=ours.health_port
            )
            self.http.append(runner)
        if isinstance(executor, LocalExecutor):
            executor.adopt()
        if ours.metrics_port:
            start_http_server(ours.metrics_port)
        logger.info(
            "zonda controller started (executor=%s, namespaces=%s)", ours.executor, ours.namespaces or "all"
        )

    def followers(self) -> list[Follower]:
        """The DagRuns and the task pods (labelled with their run's uid), listed and watched in each
        namespace served (or all), into `on_dagrun` and `on_task_pod`: started once the services
        are built, since a handler drops what comes before."""
        assert self.services is not None
        kube = self.services.kube
        followers: list[Follower] = []
        namespaces: list[str | None] = [*self.settings.namespaces] or [None]
        for namespace in namespaces:
            followers.append(Follower(kube, DAGRUNS, namespace, self.on_dagrun))
            pods = Follower(kube, PODS, namespace, self.on_task_pod, label_selector=LABEL_DAGRUN_UID)
            followers.append(pods)
        return followers

    def started_leading(self, queue: WorkQueue) -> None:
        """Leading now: the indexes the watches fed are listed again before the first pass uses them.

        A standby's watch may lag behind what the old leader created just before it stopped (a run it
        made from some events): the first passes read a list made after the takeover, never older.
        """
        self.relist_indexes()
        queue.resume()

    def relist_indexes(self) -> None:
        """The indexes the watches fed are listed again before the next pass uses them (a standby's
        or another shard's holder's writes may not have reached our watch yet)."""
        if self.services is not None:
            reconcilers = self.services.reconcilers
            indexes = (reconcilers.dags.runs, reconcilers.dags.asset_events, reconcilers.assets.dags)
            for index in (*indexes, reconcilers.assets.aliases):
                if index is not None:
                    index.relist()
            reconcilers.runs.admission.seeded.clear()

    def shards_acquired(self, shards: frozenset[int]) -> None:
        """Shards taken (at start, from a replica that died or left): everything in them is looked at
        now, on indexes listed again, as a new leader does; later changes come from the watches."""
        if self.services is None:
            return
        logger.info("controller shards acquired: %s", ",".join(str(s) for s in sorted(shards)))
        self.relist_indexes()
        cache = self.services.kube.cache
        keys: set[tuple[str, str, str]] = set()
        for plural, kind in ((DAGS, "dag"), (POOLS, "pool")):
            for cached_plural, namespace, name in list(cache.objects) if cache is not None else ():
                if cached_plural == plural:
                    keys.add((kind, namespace, name))
        keys |= {("run", namespace, name) for namespace, name in self.services.reconcilers.index.runs}
        keys |= {("backfill", namespace, name) for namespace, name in self.backfill_dags}
        for (namespace, _dag), uris in self.dag_assets.items():
            keys |= {("asset", namespace, uri) for uri in uris if not uri.startswith("alias:")}
        for kind, namespace, name in sorted(keys):
            if self.shard_of(kind, namespace, name) in shards:
                self.enqueue(kind, namespace, name)

    def after_shard_cycle(self, changed: list[str]) -> None:
        """After each shard Lease cycle: runs waiting for slots another replica gave back look again,
        and the slots our own shards no longer hold are given back, in the background
        (`PoolAdmission.release_in_background`: the lease loop must not wait for admission's lock)."""
        if self.services is None:
            return
        reconcilers = self.services.reconcilers
        for namespace in changed:
            for name, summary in reconcilers.index.occupying(namespace).items():
                if summary.waiting:
                    self.enqueue("run", namespace, name)
        reconcilers.runs.admission.release_in_background()

    async def healthz(self, request: web.Request) -> web.Response:
        """Liveness: the event loop answers (this handler runs) and every reconcile worker is alive."""
        queue = self.services.queue if self.services else None
        dead = [task.get_name() for task in (queue.tasks if queue else []) if task.done()]
        if dead:
            return web.Response(status=500, text=f"reconcile workers stopped: {', '.join(dead)}\n")
        return web.Response(text=f"ok: {queue.pending if queue else 0} keys queued\n")

    async def readyz(self, request: web.Request) -> web.Response:
        """Readiness: started and connected. A standby replica is ready too (it takes over on failover)."""
        if self.services is None:
            return web.Response(status=503, text="starting\n")
        elector, shards = self.services.elector, self.services.shards
        if shards is not None:
            return web.Response(text=f"ok: shards {shards.describe()} of {shards.shard_count}\n")
        return web.Response(text="ok: leading\n" if elector is None or elector.leading else "ok: standby\n")

    async def cleanup(self, **_: Any) -> None:
        for runner in self.http:
            await runner.cleanup()
        services = self.services
        if services is not None:
            await services.queue.stop()
            unposted = await services.reconcilers.writer.flush_events(within=EVENT_FLUSH_SECONDS)
            if unposted:
                logger.warning(
                    "stopping with %d Event posts unfinished after %ss", unposted, EVENT_FLUSH_SECONDS
                )
        for task in self.tasks:
            task.cancel()
        if services is None:
            return
        if services.elector is not None:
            await services.elector.release()
        if services.shards is not None:
            released = await services.shards.release()
            logger.info("controller shards released: %s", ",".join(str(s) for s in released) or "none")
        if isinstance(services.executor, LocalExecutor):
            await services.executor.close()
        await services.kube.close()

    def login(self, **kwargs: Any) -> kopf.ConnectionInfo | None:
        if self.settings.kubeconfig:
            os.environ["KUBECONFIG"] = self.settings.kubeconfig
        in_pod = kopf.login_with_service_account(**kwargs)
        if in_pod is None:
            return kopf.login_with_kubeconfig(**kwargs)
        # kopf names the apiserver `kubernetes.default.svc`, which needs cluster DNS; in-cluster
        # clients (client-go, our own Kube) use the Service's address from the environment: no DNS.
        return dataclasses.replace(in_pod, server=in_cluster_server(os.environ) or in_pod.server)

    # --------------------------------------------------------------------------------- the watches

    async def on_dag(self, **event: Any) -> None:
        if self.services is None:
            return
        self.cached(DAGS, event)
        namespace, spec = event["namespace"], event["body"].get("spec") or {}
        key = (namespace, event["name"])
        keys = frozenset() if event["type"] == "DELETED" else asset_keys_of(spec)
        dag_index = self.services.reconcilers.assets.dags
        if dag_index is not None:
            (dag_index.deleted if event["type"] == "DELETED" else dag_index.observed)(event["body"])
        self.asset_consumers.pop(key, None)
        if spec.get("assetSchedule") is not None and event["type"] != "DELETED":
            self.asset_consumers[key] = keys
        before = self.dag_assets.pop(key, None)
        if keys:
            self.dag_assets[key] = keys
        # watchers added, removed or changed on the assets of its schedule: those assets' Triggers
        watched = frozenset(
            (uri, watcher_trigger_name(uri, w))
            for uri, w in assets.schedule_watchers(spec.get("assetSchedule"))
        )
        watched_before = self.dag_watchers.pop(key, frozenset())
        if watched and event["type"] != "DELETED":
            self.dag_watchers[key] = watched
        for uri in sorted({uri for uri, _ in watched ^ watched_before}):
            self.enqueue("asset", namespace, uri)
        if keys != before:  # the assets' producers and consumers changed (not on our status writes)
            changed = keys ^ (before or frozenset())
            for uri in self.asset_uris(namespace, keys | (before or frozenset())):
                self.enqueue("asset", namespace, uri)
            # an alias outlet added or removed: its consumers say again whether anything resolves it
            for (dag_namespace, dag), wanted in list(self.asset_consumers.items()):
                touched = wanted & changed
                if dag_namespace == namespace and any(k.startswith("alias:") for k in touched):
                    self.enqueue("dag", namespace, dag)
        # a consumer's cursor moved (it consumed events): its assets delete what it alone kept
        status = event["body"].get("status") or {}
        cursor = hash((status.get("assetCursorTime"), tuple(status.get("assetCursorEvents") or ())))
        if self.dag_cursors.pop(key, cursor) != cursor and keys == before:
            for uri in self.asset_uris(namespace, keys):
                self.enqueue("asset", namespace, uri)
        if spec.get("assetSchedule") is not None and event["type"] != "DELETED":
            self.dag_cursors[key] = cursor
        if event["type"] == "DELETED":
            return
        version = event["body"].get("metadata", {}).get("resourceVersion")
        if not self.services.reconcilers.is_own_write(DAGS, event["namespace"], event["name"], version):
            self.enqueue("dag", event["namespace"], event["name"])

    def asset_uris(self, namespace: str, keys: frozenset[str]) -> list[str]:
        """The assets of these keys: the URIs, and those their aliases resolved to (a DAG scheduled on
        an alias holds the events of those assets too, `zonda.schedules.assets.event_holders`)."""
        uris = {k for k in keys if not k.startswith("alias:")}
        resolutions = self.services.reconcilers.assets.aliases if self.services is not None else None
        if resolutions is not None:
            aliases = [k.removeprefix("alias:") for k in keys if k.startswith("alias:")]
            uris.update(*resolutions.of_aliases(namespace, aliases).values())
        return sorted(uris)

    async def on_backfill(self, **event: Any) -> None:
        if self.services is None:
            return
        dag = (event["body"].get("spec") or {}).get("dagName", "")
        for names in self.backfills.values():
            names.discard(event["name"])  # the DAG may have changed
        if event["type"] == "DELETED":  # deleting a backfill cancels what has not started
            self.backfill_dags.pop((event["namespace"], event["name"]), None)
            return
        self.backfill_dags[(event["namespace"], event["name"])] = dag
        self.backfills.setdefault((event["namespace"], dag), set()).add(event["name"])
        version = event["body"].get("metadata", {}).get("resourceVersion")
        if not self.services.reconcilers.is_own_write(BACKFILLS, event["namespace"], event["name"], version):
            self.enqueue("backfill", event["namespace"], event["name"])

    async def on_dagrun(self, **event: Any) -> None:
        type, body, name, namespace = event["type"], event["body"], event["name"], event["namespace"]
        if self.services is None:
            return
        version = body.get("metadata", {}).get("resourceVersion")
        writer = self.services.reconcilers.writer
        if type != "DELETED" and not writer.is_own_write(DAGRUNS, namespace, name, version):
            # our own status write's event may come before its answer: judged once that is known
            await writer.settled(DAGRUNS, namespace, name)
        # the ADDED of a run a DAG pass created and recorded: no news for that DAG (its backfills and
        # siblings are still told below)
        created_by_its_dag = (
            type != "DELETED"
            and self.services.reconcilers.dags.runs is not None
            and (self.services.reconcilers.dags.runs.knows(body))
        )
        self.cached(DAGRUNS, event)
        reconcilers = self.services.reconcilers
        dag_name = (body.get("spec") or {}).get("dagName")
        if type == "DELETED":
            self.wake_for_slots(namespace, name, reconcilers.index.remove(namespace, name))
            if dag_name:
                self.enqueue("dag", namespace, dag_name)
            return
        previous = reconcilers.index.update(body)
        self.wake_for_slots(namespace, name, previous)
        if not reconcilers.is_own_write(DAGRUNS, namespace, name, version):
            self.enqueue("run", namespace, name)
        new_state = (body.get("status") or {}).get("state")
        if dag_name and (previous is None or previous.state != new_state):
            # new, or changed by someone else
            self.run_state_changed(namespace, dag_name, name, new_state, wake_dag=not created_by_its_dag)

    def cached(self, plural: str, event: Mapping[str, Any]) -> None:
        """Keep the watch's newest body where the reconcilers read it (`controller.kube.cache`, and
        the DAGs' runs in `DagRunRefs`)."""
        if self.services is None:
            return
        cache, body = self.services.kube.cache, event["event"]["object"]
        refs = self.services.reconcilers.dags.runs if plural == DAGRUNS else None
        if event["type"] == "DELETED":
            if cache is not None:
                cache.deleted(plural, event["namespace"], event["name"])
            if refs is not None:
                refs.deleted(body)
            return
        if cache is not None:
            cache.observed(plural, body)
        if refs is not None:
            refs.observed(body)

    def wake_for_slots(self, namespace: str, name: str, previous: RunSummary | None) -> None:
        """A run changed by someone else (a user's mark or clear, a deletion) may free pool slots."""
        if self.services is None:
            return
        index = self.services.reconcilers.index
        runs, pools = runs_to_wake(index, namespace, name, previous, index.runs.get((namespace, name)))
        for run in sorted(runs):
            self.enqueue("run", namespace, run)
        for pool in sorted(pools):
            self.enqueue("pool", namespace, pool)

    async def on_pool(self, **event: Any) -> None:
        """A Pool created or resized: its status, and the runs waiting for slots (it may have grown)."""
        if self.services is None:
            return
        self.cached(POOLS, event)
        if event["type"] == "DELETED":
            return
        namespace = event["namespace"]
        version = event["body"].get("metadata", {}).get("resourceVersion")
        if self.services.reconcilers.is_own_write(POOLS, namespace, event["name"], version):
            return
        self.enqueue("pool", namespace, event["name"])
        for name, summary in self.services.reconcilers.index.occupying(namespace).items():
            if summary.waiting:
                self.enqueue("run", namespace, name)

    def run_state_changed(
        self, namespace: str, dag_name: str, run_name: str, new_state: str | None, *, wake_dag: bool = True
    ) -> None:
        """A run started or finished: its DAG may schedule more, its siblings may proceed."""
        if wake_dag:
            self.enqueue("dag", namespace, dag_name)  # maxActiveRuns, last run state
        for backfill in self.backfills.get((namespace, dag_name), ()):
            self.enqueue("backfill", namespace, backfill)
        if new_state in FINISHED_RUN_STATES and self.services is not None:
            # dependsOnPast / maxActiveTasks: the DAG's other unfinished runs may proceed now
            for other, summary in self.services.reconcilers.index.of_dag(namespace, dag_name).items():
                if summary.state not in FINISHED_RUN_STATES and other != run_name:
                    self.enqueue("run", namespace, other)

    async def on_task_pod(self, **event: Any) -> None:
        body, namespace = event["body"], event["namespace"]
        executor = self.services.executor if self.services is not None else None
        held = event["type"] != "DELETED" and try_tracking.held(body)
        if held and isinstance(executor, KubernetesExecutor) and await self._release_held(executor, body):
            return  # its run is gone or finished: no pass would record it, and nothing launches it again
        if isinstance(executor, KubernetesExecutor) and executor.pods is not None:
            pod = event["event"]["object"]
            if event["type"] == "DELETED":
                executor.pod_deleted(pod)
                executor.pods.deleted(pod)
            else:
                news = executor.news(pod)
                executor.pods.observed(pod)
                if news is PodNews.NONE and not held:  # a held pod waits for its run's pass to record its try
                    return
                if news is PodNews.STARTED and self.services is not None:
                    for owner in body.get("metadata", {}).get("ownerReferences") or []:
                        if owner.get("kind") == "DagRun":
                            key = ("run", namespace, owner["name"])
                            self.services.queue.add_soon(
                                key, STARTED_PASS_DELAY, priority=STARTED_PRIORITY, latest=STARTED_PASS_LATEST
                            )
                    return
        for owner in body.get("metadata", {}).get("ownerReferences") or []:
            if owner.get("kind") == "DagRun":
                self.enqueue("run", namespace, owner["name"])

    async def _release_held(self, executor: KubernetesExecutor, pod: Mapping[str, Any]) -> bool:
        """A task pod being deleted that our finalizer holds: released now if its run is gone, being
        deleted or finished (`try_tracking.release_without_pass`: the run's deletion, its history
        limit, its namespace's deletion, `kubectl delete pod` after it ended). Whether it was.

        A failure of the moment (the API unreachable) is tried again a few times here: a held pod
        changes no more, so no later event of it would. Any replica may do it (a second one's patch
        fails its test and is ignored)."""
        if self.services is None:
            return False
        meta = pod.get("metadata") or {}
        owner = next((o for o in meta.get("ownerReferences") or [] if o.get("kind") == "DagRun"), None)
        run_uid = (meta.get("labels") or {}).get(LABEL_DAGRUN_UID)
        for delay in HELD_POD_RETRIES:
            try:
                run = (
                    await self.services.kube.get_custom(DAGRUNS, meta.get("namespace", ""), owner["name"])
                    if owner is not None
                    else None
                )
                if not try_tracking.release_without_pass(run, run_uid):
                    return False
                await executor.release(pod)
                return True
            except KubeError as error:
                logger.warning(
                    "pod %s/%s: finalizer not removed yet: %s", meta.get("namespace"), meta.get("name"), error
                )
                await asyncio.sleep(delay)
        return False

    async def on_trigger(self, **event: Any) -> None:
        body, namespace = event["body"], event["namespace"]
        triggers = self.services.reconcilers.runs.triggers if self.services is not None else None
        if triggers is not None:  # before the pass it wakes, so that pass sees it
            trigger = event["event"]["object"]
            (triggers.deleted if event["type"] == "DELETED" else triggers.observed)(trigger)
        run_name = (body.get("spec") or {}).get("dagRun")
        if run_name:
            self.enqueue("run", namespace, run_name)

    async def on_asset_event(self, **event: Any) -> None:
        """An asset updated (by a producing task, kubectl, another system): its consumers and the asset."""
        if self.services is None:
            return
        namespace = event["namespace"]
        index = self.services.reconcilers.assets.events
        if index is not None:  # before the passes it wakes, so they see it
            (index.deleted if event["type"] == "DELETED" else index.observed)(event["body"])
        found = event_from_body(event["body"])
        if found is None:
            if event["type"] != "DELETED":
                self.services.reconcilers.writer.post_events(
                    event["body"],
                    [RunEvent("InvalidSpec", "not a valid AssetEvent: check spec.uri", warning=True)],
                )
            return
        self.enqueue("asset", namespace, found.uri)
        if event["type"] == "DELETED":
            return
        keys = assets.event_keys(found)
        resolutions = self.services.reconcilers.assets.aliases
        if resolutions is not None:  # an asset an alias resolved to: the alias's consumers too
            keys |= {f"alias:{a}" for a in resolutions.aliases_of(namespace, found.uri)}
        for (dag_namespace, dag), wanted in list(self.asset_consumers.items()):
            if dag_namespace == namespace and wanted & keys:
                self.enqueue("dag", namespace, dag)

    async def on_asset(self, **event: Any) -> None:
        if self.services is None or event["type"] == "DELETED":
            return
        resolutions = self.services.reconcilers.assets.aliases
        if resolutions is not None:
            resolutions.observed(event["body"])
        version = event["body"].get("metadata", {}).get("resourceVersion")
        if self.services.reconcilers.is_own_write(ASSETS, event["namespace"], event["name"], version):
            return
        uri = (event["body"].get("spec") or {}).get("uri")
        if isinstance(uri, str):
            try:
                self.enqueue("asset", event["namespace"], sanitize_uri(uri))
            except ValueError:
                return


WATCHED = (DAGS, DAGRUNS, BACKFILLS, POOLS, TRIGGERS, ASSETEVENTS, ASSETS)


async def _wait_until_served(settings: ControllerSettings) -> None:
    kube = await Kube.connect(settings.kubeconfig, component="zonda-controller")
    try:
        await served.wait_until_served(kube, WATCHED)
    finally:
        await kube.close()


def run_controller(settings: ControllerSettings) -> None:
    """Run until SIGINT/SIGTERM (kopf handles the signals)."""
    process = ControllerProcess(settings)
    if settings.kubeconfig:
        os.environ["KUBECONFIG"] = settings.kubeconfig
    # Our logging (controller.processes.logs) stays in charge; kopf's per-handler chatter is not news.
    logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    logging.getLogger("kopf.activities").setLevel(logging.WARNING)
    asyncio.run(_wait_until_served(settings))
    collector.tune()
    kopf.run(
        registry=process.registry(),
        standalone=True,
        clusterwide=not settings.namespaces,
        namespaces=settings.namespaces,
    )
