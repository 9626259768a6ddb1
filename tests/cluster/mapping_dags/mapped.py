"""Mapped TaskFlow DAGs for tests/cluster/test_mapping.py: map over a list made at run time and reduce
it (across a controller kill), and 1,024 mapped instances at once."""

import time

import pendulum

from zonda import dag, task

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


mapped_reduce()
mapped_wide()
