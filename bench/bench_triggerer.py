"""Benchmark the triggerer against a real apiserver (run on demand; prints numbers, asserts nothing).

    python bench/bench_triggerer.py --kubeconfig /tmp/zonda.kubeconfig --counts 1000 10000

For each N: N DateTimeTriggers are created in a fresh namespace, due over a window a little in the
future; one replica (in this process, so its watchdog samples are readable) starts, runs them all and
writes their events. Reported:
- event-loop lag p50/p99/max while the replica runs N triggers and fires them (0.5 s watchdog ticks);
- fire latency: from a trigger's moment to its `fired` status being seen by a watch, p50/p99/max;
- RSS per trigger: the process's RSS growth from "replica idle" to "N triggers running", over N.
Then failover: two replicas as real processes share the shards, one is SIGKILLed just before its
triggers are due, and we time until the last of them has fired elsewhere.

A local cluster: ``python -m controller.devtools.devcluster up --kubeconfig-out /tmp/zonda.kubeconfig``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from controller.coordination.shards import SHARD_LABEL, shard_for  # noqa: E402
from controller.kube import TRIGGERS, Kube  # noqa: E402
from controller.triggerer.leases import shard_lease_name  # noqa: E402
from controller.triggerer.runtime import Triggerer  # noqa: E402
from controller.triggerer.settings import TriggererSettings  # noqa: E402
from zonda.resources.models import API_VERSION  # noqa: E402
from zonda.triggers import DateTimeTrigger, serialize_trigger  # noqa: E402

SHARDS = 16


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def percentile(values: list[float], fraction: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def summary(values: list[float], unit: str = "ms", scale: float = 1000.0) -> str:
    if not values:
        return "n/a"
    return (
        f"p50 {percentile(values, 0.5) * scale:.1f}{unit}  p99 {percentile(values, 0.99) * scale:.1f}{unit}  "
        f"max {max(values) * scale:.1f}{unit}"
    )


def trigger_body(name: str, moment: datetime) -> dict[str, Any]:
    classpath, kwargs = serialize_trigger(DateTimeTrigger(moment))
    shard = shard_for(name, SHARDS)
    return {
        "apiVersion": API_VERSION,
        "kind": "Trigger",
        "metadata": {"name": name, "labels": {SHARD_LABEL: str(shard)}},
        "spec": {
            "classpath": classpath,
            "kwargs": kwargs,
            "dagRun": "bench",
            "taskId": name,
            "tryNumber": 1,
            "shard": shard,
        },
    }


async def create_all(kube: Kube, namespace: str, bodies: list[dict[str, Any]]) -> float:
    started = time.monotonic()
    limit = asyncio.Semaphore(48)

    async def create(body: dict[str, Any]) -> None:
        async with limit:
            await kube.create_custom(TRIGGERS, namespace, body)

    await asyncio.gather(*(create(body) for body in bodies))
    return time.monotonic() - started


class FireWatch:
    """Records when each Trigger is first seen `fired` (wall clock)."""

    def __init__(self, kube: Kube, namespace: str) -> None:
        self.kube, self.namespace = kube, namespace
        self.seen: dict[str, tuple[float, str | None]] = {}
        self.task: asyncio.Task[None] | None = None

    async def _watch(self) -> None:
        version = None
        while True:
            async for _, obj in self.kube.watch_objects(TRIGGERS, self.namespace, resource_version=version):
                version = obj["metadata"]["resourceVersion"]
                status = obj.get("status") or {}
                name = obj["metadata"]["name"]
                if status.get("state") == "fired" and name not in self.seen:
                    self.seen[name] = (time.time(), status.get("holder"))

    def start(self) -> None:
        self.task = asyncio.create_task(self._watch())

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task


async def until(check: Callable[[], bool | Awaitable[bool]], within: float, what: str) -> float:
    started = time.monotonic()
    while time.monotonic() - started < within:
        result = check()
        if result if isinstance(result, bool) else await result:
            return time.monotonic() - started
        await asyncio.sleep(0.1)
    raise TimeoutError(f"{what} did not happen within {within:.0f}s")


@contextlib.asynccontextmanager
async def fresh_namespace(kube: Kube, prefix: str) -> Any:
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    await kube.core.create_namespace({"metadata": {"name": name}})  # type: ignore[arg-type]
    try:
        yield name
    finally:
        with contextlib.suppress(Exception):
            await kube.core.delete_namespace(name)


def counter(triggerer: Triggerer, name: str) -> int:
    return int(triggerer.metrics.registry.get_sample_value(f"zonda_triggerer_{name}_total") or 0)


async def bench_one_replica(kube: Kube, count: int, fire_rate: float) -> None:
    window = count / fire_rate
    print(f"\n== {count} DateTimeTriggers on one replica ({SHARDS} shards), due over {window:.0f}s")
    async with fresh_namespace(kube, "bench") as namespace:
        lead = 15 + count / 150  # creating them (~200/s here) and starting must end before the first is due
        first_due = datetime.now(UTC) + timedelta(seconds=lead)
        bodies = [
            trigger_body(f"t-{index}", first_due + timedelta(seconds=window * index / count))
            for index in range(count)
        ]
        moments = {body["metadata"]["name"]: body["spec"]["kwargs"]["moment"] for body in bodies}
        created_in = await create_all(kube, namespace, bodies)
        del bodies
        print(
            f"created {count} Trigger resources in {created_in:.1f}s ({count / created_in:.0f}/s: "
            "about the apiserver's write capacity here)"
        )

        watch = FireWatch(kube, namespace)
        watch.start()
        gc.collect()
        triggerer = Triggerer(
            kube,
            TriggererSettings(
                namespace=namespace,
                identity="bench",
                shards=SHARDS,
                capacity=count * 2,
                lease_duration=15,
                renew_every=5,
            ),
        )
        rss_idle = rss_mib()
        started = time.monotonic()
        runner = asyncio.create_task(triggerer.run())
        try:
            took = await until(lambda: len(triggerer.running) >= count, 120, f"{count} triggers running")
            gc.collect()
            rss_running = rss_mib()
            seconds_left = (first_due - datetime.now(UTC)).total_seconds()
            print(
                f"replica running all {count} triggers {took:.1f}s after start "
                f"({seconds_left:.1f}s before the first is due)"
            )
            await until(lambda: len(watch.seen) >= count, lead + window + 120, "every trigger to fire")
        finally:
            triggerer.stop.set()
            await asyncio.wait_for(runner, 30)
            await watch.stop()
        lags = [sample.lag for sample in triggerer.watchdog.samples if sample.at >= started]
        latencies = [
            seen - datetime.fromisoformat(moments[name]).timestamp() for name, (seen, _) in watch.seen.items()
        ]
        print(f"event-loop lag          {summary(lags)}  ({len(lags)} ticks)")
        print(f"fire latency due->seen  {summary(latencies)}")
        print(f"event->status written   {summary(triggerer.fire_latencies)}")
        print(
            f"RSS {rss_idle:.0f} MiB idle -> {rss_running:.0f} MiB running: "
            f"{(rss_running - rss_idle) * 1024 / count:.2f} KiB per trigger"
        )
        print(
            f"events written {counter(triggerer, 'events_fired')}, "
            f"duplicates dropped {counter(triggerer, 'duplicate_events')}"
        )


def start_replica(kubeconfig: str, namespace: str, identity: str, log_dir: Path) -> subprocess.Popen[bytes]:
    log = (log_dir / f"bench-{identity}.log").open("ab")
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "controller.triggerer",
            "--kubeconfig",
            kubeconfig,
            "--namespace",
            namespace,
            "--identity",
            identity,
            "--shards",
            str(SHARDS),
            "--lease-duration",
            "3",
            "--renew-every",
            "1",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        cwd=REPO_ROOT,
        start_new_session=True,
    )


async def bench_failover(kube: Kube, kubeconfig: str, count: int, log_dir: Path) -> None:
    print(f"\n== failover: two replicas (lease 3s, renew 1s), {count} triggers, SIGKILL one")
    async with fresh_namespace(kube, "bench-failover") as namespace:
        replicas = {name: start_replica(kubeconfig, namespace, name, log_dir) for name in ("a", "b")}
        try:

            async def split() -> bool:
                holders = [
                    ((await kube.get_lease(namespace, shard_lease_name(shard))) or {})
                    .get("spec", {})
                    .get("holderIdentity")
                    for shard in range(SHARDS)
                ]
                return holders.count("a") == holders.count("b") == SHARDS // 2

            await until(split, 60, "the replicas to split the shards")
            leases = [await kube.get_lease(namespace, shard_lease_name(shard)) for shard in range(SHARDS)]
            a_shards = {
                shard for shard, lease in enumerate(leases) if (lease or {})["spec"]["holderIdentity"] == "a"
            }
            due = datetime.now(UTC) + timedelta(seconds=10 + count / 150)
            bodies = [trigger_body(f"f-{index}", due) for index in range(count)]
            await create_all(kube, namespace, bodies)
            on_a = {body["metadata"]["name"] for body in bodies if body["spec"]["shard"] in a_shards}
            watch = FireWatch(kube, namespace)
            watch.start()
            await asyncio.sleep(max(0.0, (due - datetime.now(UTC)).total_seconds() - 0.5))
            os.killpg(replicas["a"].pid, signal.SIGKILL)
            killed_at = time.time()
            await until(lambda: len(watch.seen) >= count, 60, "every trigger to fire")
            await watch.stop()
            fired_at = sorted(watch.seen[name][0] - killed_at for name in on_a)
            holders = sorted({holder or "?" for name, (_, holder) in watch.seen.items() if name in on_a})
            print(f"{len(on_a)} triggers were on the killed replica, due 0.5s after it; fired by {holders}")
            print(f"failover: first of them fired {fired_at[0]:.2f}s after SIGKILL, last {fired_at[-1]:.2f}s")
        finally:
            for process in replicas.values():
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--kubeconfig", default=os.environ.get("KUBECONFIG"), required="KUBECONFIG" not in os.environ
    )
    parser.add_argument("--counts", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--fire-rate", type=float, default=100.0, help="Triggers due per second.")
    parser.add_argument("--failover-count", type=int, default=1000)
    parser.add_argument("--log-dir", type=Path, default=Path("/tmp"))
    arguments = parser.parse_args()
    async with await Kube.connect(arguments.kubeconfig) as kube:
        for count in arguments.counts:
            await bench_one_replica(kube, count, arguments.fire_rate)
        if arguments.failover_count:
            await bench_failover(kube, arguments.kubeconfig, arguments.failover_count, arguments.log_dir)


if __name__ == "__main__":
    asyncio.run(main())
