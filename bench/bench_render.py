"""Benchmark: how long `zonda dags render` takes per DAG file, for a folder of generated DAG files.

    python bench/bench_render.py [--files 1000] [--tasks 12]

Writes `--files` DAG files to a temporary DAGs folder, each a realistic Airflow-style DAG (a TaskGroup,
`--tasks` Bash/Python/Empty tasks, a TaskFlow pair passing an XComArg, default_args, a nested
callable), then renders the folder once as `zonda dags render` does, timing each file (import +
compile + validation with the controller's `resolve_dag`), and prints p50/p90/max per file, the
total, and the machine's load. It asserts nothing (performance is measured here, not in tests).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from zonda.authoring import dag_files, manifests

TEMPLATE = '''"""Generated zonda DAG {index}."""
from datetime import timedelta

import pendulum

from zonda import DAG, task
from zonda.operators.bash import BashOperator
from zonda.operators.empty import EmptyOperator
from zonda.operators.python import PythonOperator
from zonda.utils.task_group import TaskGroup

with DAG(
    "generated_{index}",
    schedule="{minute} * * * *",
    start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
    catchup=False,
    default_args={{"retries": 2, "retry_delay": timedelta(minutes=1)}},
    tags=["generated"],
) as dag:
    start = EmptyOperator(task_id="start")
    with TaskGroup("work") as work:
        steps = [
            BashOperator(task_id=f"bash_{{i}}", bash_command=f"echo {{i}} {{{{ ds }}}}")
            if i % 2
            else PythonOperator(task_id=f"py_{{i}}", python_callable=lambda i=i: i)
            for i in range({tasks})
        ]
        for up, down in zip(steps, steps[1:]):
            up >> down

    @task
    def produce() -> int:
        return {index}

    @task
    def consume(value: int) -> int:
        return value + 1

    start >> work >> consume(produce())
'''


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--tasks", type=int, default=12)
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="zonda-bench-dags-") as folder_name:
        folder = Path(folder_name)
        for index in range(arguments.files):
            text = TEMPLATE.format(index=index, minute=index % 60, tasks=arguments.tasks)
            (folder / f"dag_{index:04d}.py").write_text(text)
        load_before = os.getloadavg()
        started = time.perf_counter()
        paths = dag_files.list_dag_files(folder)
        listed = time.perf_counter() - started
        per_file: list[float] = []
        tasks = 0
        for path in paths:
            began = time.perf_counter()
            for result in dag_files.load_file(path, folder):
                assert result.failure is None, result.failure
                for dag in result.dags:
                    manifest = manifests.dag_manifest(dag, dags_folder=folder)
                    tasks += len(manifest["spec"]["tasks"])
            per_file.append(time.perf_counter() - began)
        total = time.perf_counter() - started
    per_file_ms = sorted(seconds * 1000 for seconds in per_file)
    quantiles = statistics.quantiles(per_file_ms, n=10)
    print(f"DAG files: {len(paths)} ({tasks} tasks in all, {tasks / max(len(paths), 1):.0f} per DAG)")
    print(f"listing (.airflowignore, safe mode): {listed * 1000:.0f} ms")
    print(
        f"per file (import + compile + validate): p50 {statistics.median(per_file_ms):.1f} ms, "
        f"p90 {quantiles[8]:.1f} ms, max {per_file_ms[-1]:.1f} ms"
    )
    print(f"total: {total:.2f} s")
    print(f"load average before: {load_before[0]:.2f} {load_before[1]:.2f}; after: {os.getloadavg()[0]:.2f}")
    print(f"cpus: {os.cpu_count()}")


if __name__ == "__main__":
    main()
