"""The controller process's settings: one typed object, read once at start (kopf's `OperatorSettings`).

`zonda controller`'s options take their defaults from `DEFAULTS`
(tests/unit/controller/manager/test_settings.py checks
that every option maps to a field with the same default, and every field to an option or a stated
derivation), so the CLI, the Helm chart's arguments and the process cannot disagree. The environment
is read here, once, at import: `$ZONDA_STATE_DIR`, `$ZONDA_TRIGGER_SHARDS`, `$ZONDA_TASK_*`,
`$ZONDA_XCOM_*` and `$POD_NAMESPACE`; nothing else in the process reads it for these.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from controller.executors.pods import PodDefaults
from controller.reconcilers import user_code
from controller.xcom import backends
from zonda.passes.limits import DEFAULT_LIMITS, PassLimits


def _environment(environ: Mapping[str, str]) -> dict[str, object]:
    return {
        "state_dir": Path(environ.get("ZONDA_STATE_DIR", Path.home() / ".local/state/zonda")),
        "trigger_shards": int(environ.get("ZONDA_TRIGGER_SHARDS", "16")),
        "leader_namespace": environ.get("POD_NAMESPACE"),
        "image_pull_secrets": tuple(json.loads(environ.get("ZONDA_TASK_IMAGE_PULL_SECRETS") or "[]")),
        "task_env": backends.task_environment(environ),
    }


_ENV = _environment(os.environ)


@dataclass(frozen=True)
class ControllerSettings:
    namespaces: tuple[str, ...] = ()  # empty: cluster-wide
    executor: str = "kubernetes"  # kubernetes | local
    state_dir: Path = _ENV["state_dir"]  # type: ignore[assignment]
    parallelism: int = 8  # local executor: tries at once
    #: Reconciles at once (of different keys; one key is never reconciled twice at once). A pass mostly
    #: waits on the apiserver: 1,000 DAGs due at one minute need many passes in flight, not more CPU.
    #: 64, not 16: with 100 runs at once, 16 passes waiting on their status PUTs held back the launches
    #: queued behind them (upstream done -> downstream pod p99 1.4-4.0 s, 64 workers 0.37-0.82 s, the
    #: same throughput and writes: docs/benchmarks.md, "Thirteenth round").
    workers: int = 64
    trigger_shards: int = _ENV["trigger_shards"]  # type: ignore[assignment]  # = the triggerer's --shards
    #: The three limits of a pass (`pass_limits`), with `zonda.passes.limits.PassLimits`'s defaults.
    #: Seconds; Airflow's worker_pods_pending_timeout; 0: never.
    pod_pending_timeout: float = (
        DEFAULT_LIMITS.pending_timeout.total_seconds() if DEFAULT_LIMITS.pending_timeout else 0.0
    )
    max_map_length: int = DEFAULT_LIMITS.max_map_length  # Airflow's [core] max_map_length
    #: A mapped task that would take its run's status past this many bytes fails (etcd's limit: 1.5 MiB).
    status_budget_bytes: int = DEFAULT_LIMITS.status_budget_bytes
    #: Task instances a run keeps in its own status; a bigger run's go to DagRunShards.
    inline_task_instances: int = DEFAULT_LIMITS.inline_task_instances
    pod_defaults: PodDefaults = field(
        default_factory=lambda: PodDefaults(
            image_pull_secrets=_ENV["image_pull_secrets"],  # type: ignore[arg-type]
            env=_ENV["task_env"],  # type: ignore[arg-type]  # $ZONDA_XCOM_*, passed on to task pods
        )
    )
    #: Seconds at most a run's task outcomes are kept to share one Event (`StatusWriter.post_events`:
    #: the run's next warning or end posts them sooner); 0: one Event per pass, at once.
    event_fold_seconds: float = 30.0
    #: Seconds a custom timetable may take in each call the controller makes (a DAG pass, a run's start
    #: or LatestOnly window, a Backfill's dates) before that object is reported and skipped for now.
    timetable_timeout: float = user_code.DEFAULT_LIMIT_SECONDS
    metrics_port: int | None = None
    health_port: int | None = None
    #: `--shards`: DAGs (with their runs and Backfills) split over this many shard Leases, each
    #: held by one replica (`controller.manager.shards`); 1: one replica acts (leader election).
    shards: int = 1
    leader_election: bool = False
    leader_lease: str = "zonda-controller-leader"
    #: Seconds a standby waits after the leader's last renewal before taking over (client-go's 15).
    leader_lease_duration: float = 15.0
    leader_namespace: str | None = _ENV["leader_namespace"]  # type: ignore[assignment]
    identity: str = field(default_factory=lambda: f"{socket.gethostname()}-{os.getpid()}")
    kubeconfig: str | None = None

    def pass_limits(self) -> PassLimits:
        """The limits every pass over a run applies, carried as one value to `zonda.passes`."""
        return PassLimits.from_options(
            max_map_length=self.max_map_length,
            status_budget_bytes=self.status_budget_bytes,
            pending_timeout_seconds=self.pod_pending_timeout,
            inline_task_instances=self.inline_task_instances,
        )


#: The defaults `zonda controller`'s options show and use.
DEFAULTS = ControllerSettings()
