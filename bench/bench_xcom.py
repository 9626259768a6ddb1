"""Benchmark: writing and reading XCom values through the backend, by size.

    python bench/bench_xcom.py [--backend file:///tmp/x] [--sizes 1e3,1e5,1e6,1e7,6.7e7] [--repeat 3]

For each size, a string value of that many characters is prepared as the runner does at the end of a
try (JSON-serialised, size-checked, written to the backend: `XComStore.prepare`) and read back as a
downstream try does (`XComStore.load`). Prints the median write and read times, the bytes kept in the
DagRun's status for it, and the machine's load. Asserts nothing: performance is measured here.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import json

from controller.xcom_backends import XComStore
from zonda import xcoms
from zonda.invocations import TaskInvocation
from zonda.models import RunType


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", default=None, help="base URL (default: file:// in a temp dir)")
    parser.add_argument("--sizes", default="1e3,1e5,1e6,1e7,6.7e7")
    parser.add_argument("--repeat", type=int, default=3)
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        base = arguments.backend or f"file://{directory}"
        store = XComStore(base_url=base)
        print(f"backend {base}; max {store.max_bytes} bytes; inline up to {store.inline_limit} bytes")
        print(f"{'value bytes':>12} {'write ms':>10} {'read ms':>10} {'in status':>10}")
        for size in (int(float(s)) for s in arguments.sizes.split(",")):
            value = "x" * (size - 2)  # its JSON (quoted) is `size` bytes
            writes, reads, kept = [], [], 0
            for attempt in range(arguments.repeat):
                invocation = TaskInvocation(
                    dag_name="bench", run_name=f"bench-{attempt}", namespace="bench", run_type=RunType.MANUAL,
                    task_id="produce", try_number=1, operator="PythonOperator",
                    logical_date=datetime(2024, 1, 1, tzinfo=UTC),
                    data_interval_start=datetime(2024, 1, 1, tzinfo=UTC),
                    data_interval_end=datetime(2024, 1, 1, tzinfo=UTC),
                )  # fmt: skip
                started = time.perf_counter()
                try:
                    prepared = store.prepare(invocation, xcoms.RETURN_KEY, value)
                except xcoms.XComError as error:
                    print(f"{size:>12} refused: {error}")
                    break
                writes.append(time.perf_counter() - started)
                kept = len(json.dumps(prepared))
                started = time.perf_counter()
                assert len(XComStore().load(prepared)) == len(value)
                reads.append(time.perf_counter() - started)
            else:
                write_ms = statistics.median(writes) * 1000
                read_ms = statistics.median(reads) * 1000
                print(f"{size:>12} {write_ms:>10.2f} {read_ms:>10.2f} {kept:>10}")
    load = os.getloadavg()
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
