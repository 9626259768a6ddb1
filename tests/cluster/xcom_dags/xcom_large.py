"""A TaskFlow DAG passing a 100 KB value and pushed keys between tasks (tests/cluster/test_xcom.py)."""

import time

import pendulum

from zonda import dag, task


@dag(
    dag_id="xcom_large",
    schedule=None,
    start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
    default_args={"retries": 0},
)
def xcom_large():
    @task
    def produce(ti=None) -> str:
        ti.xcom_push(key="rows", value=[1, 2, 3])
        ti.xcom_push(key="at", value=pendulum.datetime(2024, 1, 2, tz="UTC"))
        return "x" * 100_000

    @task
    def slow(value: str) -> int:
        time.sleep(6)  # the controller is killed and restarted meanwhile
        return len(value)

    @task
    def consume(value: str, length: int, ti=None) -> dict:
        return {
            "length": length,
            "same": len(value) == length,
            "rows": ti.xcom_pull(task_ids="produce", key="rows"),
            "at": ti.xcom_pull(task_ids="produce", key="at"),
        }

    value = produce()
    consume(value, slow(value))


xcom_large()
