"""The controller process: kopf watches, our work queue reconciles.

kopf gives us login, watch streams (with re-listing and back-off), namespaces, and a liveness
probe. Its handlers here are thin: they note what changed and enqueue a key; the reconcilers in
`controller.reconcilers.reconcilers` do the work. Only `on.event` handlers are used, so kopf stores nothing on
our objects (no finalizers, no annotations): GitOps tools see no drift, and deleting a DAG never
waits for a controller that is down.

One replica acts at a time: with `--leader-election`, the work queue is gated by a Lease.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Hashable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import kopf
from aiohttp import web
from prometheus_client import start_http_server

from controller.app import leader
from controller.app.settings import ControllerSettings
from controller.executors import references
from controller.executors.base import Executor
from controller.executors.kubernetes import KubernetesExecutor
from controller.executors.local import LocalExecutor
from controller.kube import DAGRUNS, DAGS, Kube
from controller.reconcilers import metrics
from controller.reconcilers.backfills import BACKFILLS
from controller.reconcilers.reconcilers import FINISHED_RUN_STATES, Reconcilers
from controller.triggerer.health import serve_http
from zonda.models import GROUP, VERSION
from zonda.wire import LABEL_DAGRUN_UID

logger = logging.getLogger(__name__)


@dataclass
class _State:
    settings: ControllerSettings
    kube: Kube | None = None
    reconcilers: Reconcilers | None = None
    queue: Any = None
    executor: Executor | None = None
    elector: leader.LeaderElector | None = None
    tasks: list[asyncio.Task[Any]] = field(default_factory=list)
    http: list[web.AppRunner] = field(default_factory=list)
    #: (namespace, DAG) -> its Backfills, from their watch: a run of the DAG starting or finishing
    #: wakes them (a finished run makes room for the next).
    backfills: dict[tuple[str, str], set[str]] = field(default_factory=dict)


_state: _State | None = None


def _get() -> _State:
    assert _state is not None, "the controller is not started"
    return _state


async def _reconcile(key: Hashable) -> datetime | None:
    assert isinstance(key, tuple)
    kind, namespace, name = key
    reconcilers = _get().reconcilers
    assert reconcilers is not None
    metrics.RECONCILES.labels(kind).inc()
    if kind == "dag":
        return await reconcilers.reconcile_dag(namespace, name)
    if kind == "backfill":
        return await reconcilers.reconcile_backfill(namespace, name)
    return await reconcilers.reconcile_run(namespace, name)


_PLURALS = {"dag": DAGS, "run": DAGRUNS, "backfill": BACKFILLS}


async def _report_failing(key: Hashable, failures: int, error: BaseException) -> None:
    assert isinstance(key, tuple)
    kind, namespace, name = key
    reconcilers = _get().reconcilers
    if reconcilers is not None:
        await reconcilers.report_failing(_PLURALS[kind], namespace, name, failures, error)


async def _report_recovered(key: Hashable) -> None:
    assert isinstance(key, tuple)
    kind, namespace, name = key
    reconcilers = _get().reconcilers
    if reconcilers is not None:
        await reconcilers.report_recovered(_PLURALS[kind], namespace, name)


def _enqueue(kind: str, namespace: str, name: str) -> None:
    state = _state
    if state is not None and state.queue is not None:
        state.queue.add((kind, namespace, name))


@kopf.on.startup()
async def _startup(settings: kopf.OperatorSettings, **_: Any) -> None:
    from controller.app.workqueue import WorkQueue

    state = _get()
    settings.posting.enabled = False  # our reconcilers post the Events users read
    settings.scanning.disabled = True  # no cluster-wide CRD/namespace scans: least privilege
    settings.watching.server_timeout = 300
    # kopf waits for a quiet window before calling handlers (0.1 s by default); ours only enqueue a
    # key and the queue deduplicates bursts, so the window would only add latency.
    settings.batching.batch_window = 0.005
    settings.networking.request_timeout = 60
    state.kube = await Kube.connect(state.settings.kubeconfig, component="zonda-controller")
    if state.settings.executor == "local":
        state.executor = LocalExecutor(
            state.settings.state_dir,
            parallelism=state.settings.parallelism,
            on_exit=lambda ns, run: _enqueue("run", ns, run),
            environment_for=references.LocalEnvironment(state.kube),
        )
    else:
        state.executor = KubernetesExecutor(state.kube, state.settings.pod_defaults)
    state.reconcilers = Reconcilers(
        state.kube,
        state.executor,
        trigger_shards=state.settings.trigger_shards,
        pod_pending_timeout=state.settings.pod_pending_timeout,
        max_map_length=state.settings.max_map_length,
        on_run_state_change=_run_state_changed,
    )
    state.queue = WorkQueue(
        _reconcile, workers=state.settings.workers, on_failing=_report_failing, on_recovered=_report_recovered
    )
    if state.settings.leader_election:
        namespace = state.settings.leader_namespace or (state.settings.namespaces or ["default"])[0]
        state.queue.pause()
        state.elector = leader.LeaderElector(
            state.kube,
            namespace=namespace,
            name=state.settings.leader_lease,
            identity=state.settings.identity,
            on_started_leading=state.queue.resume,
            on_stopped_leading=state.queue.pause,
        )
        state.tasks.append(asyncio.create_task(state.elector.run(), name="leader-election"))
    state.queue.start()
    if state.settings.health_port:
        runner, _port = await serve_http(
            {"/healthz": _healthz, "/readyz": _readyz}, host="0.0.0.0", port=state.settings.health_port
        )
        state.http.append(runner)
    if isinstance(state.executor, LocalExecutor):
        state.executor.adopt()
    if state.settings.metrics_port:
        start_http_server(state.settings.metrics_port)
    logger.info(
        "zonda controller started (executor=%s, namespaces=%s)",
        state.settings.executor,
        state.settings.namespaces or "all",
    )


async def _healthz(request: web.Request) -> web.Response:
    """Liveness: the event loop answers (this handler runs) and every reconcile worker is alive."""
    state = _get()
    dead = [t.get_name() for t in (state.queue.tasks if state.queue else []) if t.done()]
    if dead:
        return web.Response(status=500, text=f"reconcile workers stopped: {', '.join(dead)}\n")
    return web.Response(text=f"ok: {state.queue.pending if state.queue else 0} keys queued\n")


async def _readyz(request: web.Request) -> web.Response:
    """Readiness: started and connected. A standby replica is ready too (it takes over on failover)."""
    state = _get()
    if state.reconcilers is None:
        return web.Response(status=503, text="starting\n")
    leading = state.elector is None or state.elector.leading
    return web.Response(text="ok: leading\n" if leading else "ok: standby\n")


@kopf.on.cleanup()
async def _cleanup(**_: Any) -> None:
    state = _get()
    for runner in state.http:
        await runner.cleanup()
    if state.queue is not None:
        await state.queue.stop()
    for task in state.tasks:
        task.cancel()
    if state.elector is not None:
        await state.elector.release()
    if isinstance(state.executor, LocalExecutor):
        await state.executor.close()
    if state.kube is not None:
        await state.kube.close()


@kopf.on.login()
def _login(**kwargs: Any) -> kopf.ConnectionInfo | None:
    if _state is not None and _state.settings.kubeconfig:
        os.environ["KUBECONFIG"] = _state.settings.kubeconfig
    return kopf.login_with_service_account(**kwargs) or kopf.login_with_kubeconfig(**kwargs)


@kopf.on.event(GROUP, VERSION, "dags")
def _on_dag(**event: Any) -> None:
    state = _state
    if state is None or state.reconcilers is None or event["type"] == "DELETED":
        return
    version = event["body"].get("metadata", {}).get("resourceVersion")
    if not state.reconcilers.is_own_write(DAGS, event["namespace"], event["name"], version):
        _enqueue("dag", event["namespace"], event["name"])


@kopf.on.event(GROUP, VERSION, BACKFILLS)
def _on_backfill(**event: Any) -> None:
    state = _state
    if state is None or state.reconcilers is None:
        return
    dag = (event["body"].get("spec") or {}).get("dagName", "")
    for names in state.backfills.values():
        names.discard(event["name"])  # the DAG may have changed
    if event["type"] == "DELETED":
        return  # deleting a backfill cancels what has not started: nothing more is created
    state.backfills.setdefault((event["namespace"], dag), set()).add(event["name"])
    version = event["body"].get("metadata", {}).get("resourceVersion")
    if not state.reconcilers.is_own_write(BACKFILLS, event["namespace"], event["name"], version):
        _enqueue("backfill", event["namespace"], event["name"])


@kopf.on.event(GROUP, VERSION, "dagruns")
def _on_dagrun(**event: Any) -> None:
    type, body, name, namespace = event["type"], event["body"], event["name"], event["namespace"]
    state = _state
    if state is None or state.reconcilers is None:
        return
    dag_name = (body.get("spec") or {}).get("dagName")
    if type == "DELETED":
        state.reconcilers.index.remove(namespace, name)
        if dag_name:
            _enqueue("dag", namespace, dag_name)
        return
    previous = state.reconcilers.index.update(body)
    if not state.reconcilers.is_own_write(
        DAGRUNS, namespace, name, body.get("metadata", {}).get("resourceVersion")
    ):
        _enqueue("run", namespace, name)
    new_state = (body.get("status") or {}).get("state")
    if dag_name and (previous is None or previous.state != new_state):
        _run_state_changed(namespace, dag_name, name, new_state)  # a new run, or changed by someone else


def _run_state_changed(namespace: str, dag_name: str, run_name: str, new_state: str | None) -> None:
    """A run started or finished: its DAG may schedule more, its siblings may proceed."""
    _enqueue("dag", namespace, dag_name)  # maxActiveRuns, last run state
    state = _state
    for backfill in state.backfills.get((namespace, dag_name), ()) if state is not None else ():
        _enqueue("backfill", namespace, backfill)
    if new_state in FINISHED_RUN_STATES and state is not None and state.reconcilers is not None:
        # dependsOnPast / maxActiveTasks: the DAG's other unfinished runs may proceed now
        for other, summary in state.reconcilers.index.of_dag(namespace, dag_name).items():
            if summary.state not in FINISHED_RUN_STATES and other != run_name:
                _enqueue("run", namespace, other)


@kopf.on.event("", "v1", "pods", labels={LABEL_DAGRUN_UID: kopf.PRESENT})
def _on_task_pod(**event: Any) -> None:
    body, namespace = event["body"], event["namespace"]
    for owner in body.get("metadata", {}).get("ownerReferences") or []:
        if owner.get("kind") == "DagRun":
            _enqueue("run", namespace, owner["name"])


@kopf.on.event(GROUP, VERSION, "triggers")
def _on_trigger(**event: Any) -> None:
    body, namespace = event["body"], event["namespace"]
    run_name = (body.get("spec") or {}).get("dagRun")
    if run_name:
        _enqueue("run", namespace, run_name)


def run_controller(settings: ControllerSettings) -> None:
    """Run until SIGINT/SIGTERM (kopf handles the signals)."""
    global _state
    _state = _State(settings=settings)
    if settings.kubeconfig:
        os.environ["KUBECONFIG"] = settings.kubeconfig
    # Our logging (controller.logs) stays in charge; kopf's per-handler chatter is not news.
    logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    logging.getLogger("kopf.activities").setLevel(logging.WARNING)
    kopf.run(
        standalone=True,
        clusterwide=not settings.namespaces,
        namespaces=settings.namespaces,
    )
