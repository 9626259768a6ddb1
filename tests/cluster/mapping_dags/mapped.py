"""Mapped TaskFlow DAGs for tests/cluster/test_mapping.py: map over a list made at run time and reduce
it (across a controller kill), 1,024 mapped instances at once, and a mapped task group."""

import time
from pathlib import Path

import pendulum

from zonda import dag, task, task_group

START = pendulum.datetime(2024, 1, 1, tz="UTC")


@dag(dag_id="mapped_reduce", schedule=None, start_date=START, default_args={"retries": 0})
def mapped_reduce():
    @task
    def make_words(dag_run=None) -> list[str]:
        count = int(dag_run.conf.get("count", 6))
        return [f"word-{index:04d}-" + "x" * 40 for index in range(count)]  # > 1 KB: the XCom backend's

    @task(max_active_tis_per_dagrun=2)
    def measure(word: str, ti=None) -> dict:
        time.sleep(1.5)  # the controller is killed and restarted while these run
        return {"index": ti.map_index, "length": len(word)}

    @task
    def total(measured: list, ti=None) -> dict:
        return {
            "indexes": [item["index"] for item in measured],
            "total": sum(item["length"] for item in measured),
            "third": ti.xcom_pull(task_ids="measure", map_indexes=2),
        }

    total(measure.expand(word=make_words().map(str.upper)))


@dag(dag_id="mapped_wide", schedule=None, start_date=START, max_active_tasks=64)
def mapped_wide():
    @task
    def make_numbers(dag_run=None) -> list[int]:
        return list(range(int(dag_run.conf.get("count", 1024))))

    @task
    def square(number: int) -> int:
        return number * number

    @task
    def count(values: list) -> int:
        return len(values)

    count(square.expand(number=make_numbers()))


@dag(dag_id="mapped_group", schedule=None, start_date=START, default_args={"retries": 0})
def mapped_group():
    """A mapped task group: index 1's first task waits until index 0's second task ran, which only
    per-index dependencies inside the group allow (all of `prepare` first would wait forever)."""

    @task
    def make_words(dag_run=None) -> list[str]:
        return [f"word-{index}" for index in range(int(dag_run.conf.get("count", 3)))]

    @task
    def prepare(word: str, suffix: str, ti=None, dag_run=None) -> str:
        if ti.map_index == 1:
            signal = Path(dag_run.conf["signal_dir"]) / "checked-0"
            deadline = time.monotonic() + 240
            while not signal.exists():
                if time.monotonic() > deadline:
                    raise TimeoutError("check[0] never ran while prepare[1] was running")
                time.sleep(0.2)
        return word.upper() + suffix * 2000  # > 1 KB: held by the XCom backend

    @task
    def check(prepared: str, ti=None, dag_run=None) -> dict:
        if ti.map_index == 0:
            (Path(dag_run.conf["signal_dir"]) / "checked-0").write_text("done")
        pulled = ti.xcom_pull(task_ids="words.prepare")
        return {"index": ti.map_index, "head": prepared[:6], "pulled_same": pulled == prepared}

    @task_group
    def words(word, suffix):
        return check(prepare(word, suffix))

    @task
    def collect(checked: list) -> list:
        return checked

    collect(words.partial(suffix="x").expand(word=make_words()))


mapped_reduce()
mapped_wide()
mapped_group()
