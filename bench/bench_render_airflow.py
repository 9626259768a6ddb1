"""Benchmark: `zonda dags render --airflow-compat` per unchanged Airflow file, Airflow 3 beside Airflow 2.

    python bench/bench_render_airflow.py [--files 1000] [--tasks 12]

Writes `--files` Airflow 2 files (`airflow.decorators`, `airflow.operators.*`, `schedule_interval`) and
as many Airflow 3 files (`airflow.sdk`, `airflow.providers.standard.*`, `schedule`) of the same DAG (a
TaskGroup, `--tasks` Bash/Python/Empty tasks, a TaskFlow pair passing an XComArg, default_args) into two
DAGs folders, then renders each file as `zonda dags render --airflow-compat` does (the import check,
the dialect, the import, the compile), the two dialects back to back, and prints p50/p90/max per file,
each total and the machine's load. It asserts nothing (performance is measured here, not in tests).
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

from zonda.authoring import rendering

BODY = """
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
"""

AIRFLOW2 = '''"""Generated Airflow 2 DAG {index}."""
from datetime import timedelta

import pendulum

from airflow import DAG
from airflow.decorators import task
from airflow.operators.bash import BashOperator
from airflow.operators.empty import EmptyOperator
from airflow.operators.python import PythonOperator
from airflow.utils.task_group import TaskGroup

with DAG(
    "generated_{index}",
    schedule_interval="{minute} * * * *",
    start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
    catchup=False,
    default_args={{"retries": 2, "retry_delay": timedelta(minutes=1)}},
    tags=["generated"],
) as dag:'''

AIRFLOW3 = '''"""Generated Airflow 3 DAG {index}."""
from datetime import timedelta

import pendulum

from airflow.providers.standard.operators.bash import BashOperator
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import DAG, TaskGroup, task

with DAG(
    "generated_{index}",
    schedule="{minute} * * * *",
    start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
    default_args={{"retries": 2, "retry_delay": timedelta(minutes=1)}},
    tags=["generated"],
) as dag:'''


def _render_each(folder: Path) -> tuple[list[float], float, int]:
    per_file: list[float] = []
    started = time.perf_counter()
    tasks = 0
    for path in sorted(folder.glob("*.py")):
        began = time.perf_counter()
        report = rendering.render_paths([path], airflow_compat=True)
        per_file.append(time.perf_counter() - began)
        assert not report.failed, (report.file_errors, [d.errors for d in report.dags])
        tasks += sum(len(m["spec"]["tasks"]) for m in report.manifests)
    return per_file, time.perf_counter() - started, tasks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--tasks", type=int, default=12)
    arguments = parser.parse_args()
    print(f"cpus: {os.cpu_count()}; load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory(prefix="zonda-bench-airflow-") as root:
        for name, header in (("airflow2", AIRFLOW2), ("airflow3", AIRFLOW3)):
            folder = Path(root) / name
            folder.mkdir()
            for index in range(arguments.files):
                text = header.format(index=index, minute=index % 60) + BODY.format(
                    index=index, tasks=arguments.tasks
                )
                (folder / f"dag_{index:04d}.py").write_text(text)
        for name in ("airflow2", "airflow3"):
            print(f"{name}: load average before {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
            per_file, total, tasks = _render_each(Path(root) / name)
            ms = sorted(seconds * 1000 for seconds in per_file)
            deciles = statistics.quantiles(ms, n=10)
            print(
                f"{name}: {len(ms)} files ({tasks} tasks): per file p50 {statistics.median(ms):.1f} ms, "
                f"p90 {deciles[8]:.1f} ms, max {ms[-1]:.1f} ms; total {total:.2f} s; "
                f"load after {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
            )


if __name__ == "__main__":
    main()
