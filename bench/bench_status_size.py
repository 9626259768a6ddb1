"""Benchmark: how large a DagRun's status grows with its task instances (what mapping will multiply).

    python bench/bench_status_size.py [--counts 1,16,256,1024,4096]

Builds the status a finished run holds for N task instances of one task each (success, one try, the
fields the controller writes: dates, pod name, reason, a small XCom and a stored-XCom reference), and
prints its JSON size as the apiserver stores it, bytes per task instance, and how many instances fit
the 1.5 MiB object limit (etcd's default request limit; the apiserver refuses larger objects).
Asserts nothing: sizes are measured here.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from zonda.resources.dagrun_models import DagRunStatus, TaskInstanceStatus
from zonda.resources.models import DagRunState, TaskInstanceState
from zonda.tries import xcoms

OBJECT_LIMIT_BYTES = 3 * 512 * 1024  # 1.5 MiB


def status_with(count: int, *, stored: bool) -> DagRunStatus:
    start = datetime(2024, 1, 1, tzinfo=UTC)
    reference = xcoms.stored_reference("s3://bucket/zonda-xcom/ns/etl-manual-1/t/1/return_value.json", 102400)
    tis = {
        f"process_{index}": TaskInstanceStatus(
            state=TaskInstanceState.SUCCESS,
            try_number=1,
            max_tries=0,
            pod_name=f"etl-manual-2024-01-01t00-00-00-process-{index}-1-abcde",
            queued_at=start,
            start_date=start,
            end_date=start + timedelta(seconds=3),
            duration_seconds=3.0,
            exit_code=0,
            reason="Attempt etl-manual-1-process-1 succeeded",
            xcom=reference if stored else {"rows": index, "ok": True},
        )
        for index in range(count)
    }
    return DagRunStatus(state=DagRunState.SUCCESS, start_date=start, task_instances=tis)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--counts", default="1,16,256,1024,4096")
    arguments = parser.parse_args()
    print(f"{'instances':>10} {'status bytes':>13} {'bytes/TI':>9} {'stored XCom':>12}")
    for stored in (False, True):
        for count in (int(c) for c in arguments.counts.split(",")):
            size = len(json.dumps(status_with(count, stored=stored).to_wire(), separators=(",", ":")))
            print(f"{count:>10} {size:>13} {size / count:>9.0f} {stored!s:>12}")
        per_ti = len(json.dumps(status_with(1024, stored=stored).to_wire(), separators=(",", ":"))) / 1024
        fits = int(OBJECT_LIMIT_BYTES / per_ti)
        print(f"  fits the {OBJECT_LIMIT_BYTES}-byte object limit: ~{fits} instances")
    load = os.getloadavg()
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
