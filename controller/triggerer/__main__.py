"""``python -m controller.triggerer``: one triggerer replica without the `zonda` CLI.

Used by tests and benchmarks that need real processes (to SIGKILL one). SIGTERM or SIGINT stops it
gracefully: triggers are cancelled (their `cleanup()` runs) and its Leases are released.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import socket

from controller.kube import Kube
from controller.triggerer.runtime import run_triggerer
from controller.triggerer.settings import DEFAULTS, TriggererSettings


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m controller.triggerer", description=__doc__)
    parser.add_argument("--kubeconfig", default=None, help="Default: $KUBECONFIG or in-cluster.")
    parser.add_argument("--namespace", required=True, help="Namespace of the Trigger resources and Leases.")
    parser.add_argument(
        "--shards", type=int, default=DEFAULTS.shards, help="Number of shards (same on every replica)."
    )
    parser.add_argument(
        "--capacity", type=int, default=DEFAULTS.capacity, help="Triggers per replica at most."
    )
    parser.add_argument("--identity", default=f"{socket.gethostname()}-{os.getpid()}")
    parser.add_argument("--lease-duration", type=float, default=DEFAULTS.lease_duration)
    parser.add_argument("--renew-every", type=float, default=DEFAULTS.renew_every)
    parser.add_argument("--health-port", type=int, default=None)
    parser.add_argument("--metrics-port", type=int, default=None)
    parser.add_argument("--bind-host", default=DEFAULTS.bind_host)
    parser.add_argument("--log-level", default="INFO")
    return parser.parse_args(argv)


async def main(arguments: argparse.Namespace) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for number in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(number, stop.set)
    async with await Kube.connect(arguments.kubeconfig) as kube:
        settings = TriggererSettings(
            namespace=arguments.namespace,
            identity=arguments.identity,
            shards=arguments.shards,
            capacity=arguments.capacity,
            lease_duration=arguments.lease_duration,
            renew_every=arguments.renew_every,
            health_port=arguments.health_port,
            metrics_port=arguments.metrics_port,
            bind_host=arguments.bind_host,
        )
        await run_triggerer(kube, settings, stop=stop)


if __name__ == "__main__":
    parsed = parse_arguments()
    logging.basicConfig(level=parsed.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    asyncio.run(main(parsed))
