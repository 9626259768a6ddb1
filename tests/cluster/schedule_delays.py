"""How late the controller creates another DAG's scheduled runs while something else loads it.

A `Heartbeat` is a DAG scheduled every few seconds (catchup on: every interval gets its run, a late
one late, none skipped) and a watch of its own on DagRuns from the apiserver. Each run's delay is
the time its creation reached the watch less its `run_after` (the end of its data interval, in the
run's spec): what a user of that DAG waits beyond the schedule, watch latency included, measured
from the apiserver's objects and this process's clock (the controller runs on the same machine).

Used by the fuzzing tests (docs/security.md, "Bad input"): the other DAGs keep being served.
"""

from __future__ import annotations

import statistics
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from controller.devtools.devcluster import Cluster
from tests.cluster.zonda_processes import BackgroundWatch

API = "zonda.dev/v1alpha1"


class Heartbeat(BackgroundWatch):
    """A DAG every `every_seconds`, and the delay of each of its scheduled runs."""

    def __init__(self, cluster: Cluster, namespace: str, name: str = "heartbeat", every_seconds: int = 5):
        super().__init__(f"heartbeat-{name}")
        self.kubeconfig, self.namespace, self.name = str(cluster.kubeconfig), namespace, name
        self.every = every_seconds
        #: run name -> (its run_after, when its creation reached the watch: both epoch seconds)
        self.created: dict[str, tuple[float, float]] = {}

    def manifest(self) -> dict[str, Any]:
        """The DAG, starting now: no backlog, every interval from here on due in turn."""
        start = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=1)
        return {
            "apiVersion": API,
            "kind": "DAG",
            "metadata": {"name": self.name},
            "spec": {
                "schedule": f"{self.every}s",
                "startDate": start.isoformat().replace("+00:00", "Z"),
                "catchup": True,
                "tasks": [{"id": "beat", "operator": "EmptyOperator"}],
            },
        }

    async def _record(self) -> None:
        from controller.kube import Kube

        async with await Kube.connect(self.kubeconfig) as kube:
            _, version = await kube.list_custom_with_version("dagruns", self.namespace)
            self._listed.set()
            while not self._stop.is_set():
                async for _, obj in kube.watch_objects(
                    "dagruns", self.namespace, resource_version=version, timeout_seconds=2
                ):
                    seen = time.time()
                    meta, spec = obj["metadata"], obj.get("spec") or {}
                    version = meta["resourceVersion"]
                    if (
                        spec.get("dagName") != self.name
                        or spec.get("runType") != "scheduled"
                        or meta["name"] in self.created
                    ):
                        continue
                    end = datetime.fromisoformat(spec["dataInterval"]["end"].replace("Z", "+00:00"))
                    self.created[meta["name"]] = (end.timestamp(), seen)

    def delays(self, since: float, until: float) -> list[float]:
        """The delays (seconds) of the runs due between `since` and `until` (epoch seconds)."""
        return sorted(seen - due for due, seen in self.created.values() if since <= due <= until)

    def due_between(self, since: float, until: float) -> int:
        """How many runs the schedule made due between `since` and `until`, had none been missed."""
        return sum(1 for due, _ in self.created.values() if since <= due <= until)

    def summary(self, since: float, until: float) -> str:
        delays = self.delays(since, until)
        if not delays:
            return "no heartbeat run was due"
        worst = max((seen - due, due) for due, seen in self.created.values() if since <= due <= until)
        return (
            f"{len(delays)} heartbeat runs (every {self.every} s), scheduling delay "
            f"p50 {statistics.median(delays):.1f} s, p90 {delays[int(0.9 * (len(delays) - 1))]:.1f} s, "
            f"max {worst[0]:.1f} s (the run due at {datetime.fromtimestamp(worst[1], UTC):%H:%M:%S})"
        )

    def assert_served(self, since: float, until: float, *, max_delay: float) -> list[float]:
        """Every interval of [since, until] got its run, none later than `max_delay`.

        A run is counted when its creation reached the watch: one due at the window's end may still be
        on its way, so the check is over the intervals that ended `max_delay` before `until`."""
        cut = until - max_delay
        delays = self.delays(since, cut)
        expected = int((cut - since) // self.every)
        assert len(delays) >= expected, (
            f"{len(delays)} heartbeat runs due in {cut - since:.0f} s, expected {expected}: "
            f"the controller stopped serving the other DAGs ({self.summary(since, until)})"
        )
        late = [d for d in self.delays(since, until) if d > max_delay]
        assert not late, f"heartbeat runs created more than {max_delay} s late: {late}"
        return self.delays(since, until)
