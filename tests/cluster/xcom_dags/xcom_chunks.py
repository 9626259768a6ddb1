"""A TaskFlow DAG passing a 100 KB and a 3 MB value through the Kubernetes XCom backend, and one value
over the configured maximum (tests/cluster/test_xcom.py)."""

import hashlib

import pendulum

from zonda import dag, task


@dag(
    dag_id="xcom_chunks",
    schedule=None,
    start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
    default_args={"retries": 0},
)
def xcom_chunks():
    @task
    def small() -> str:
        return "s" * 100_000

    @task
    def large() -> list:
        # 3 MB of varied text (multi-byte characters too), so chunk order and boundaries matter.
        return [f"row {i} é ✓ {i * i}" for i in range(100_000)]

    @task
    def consume(small: str, large: list) -> dict:
        digest = hashlib.sha256("\n".join(large).encode()).hexdigest()
        return {"small": len(small), "rows": len(large), "last": large[-1], "sha256": digest}

    @task
    def too_big() -> str:
        return "b" * 5_000_000

    consume(small(), large())
    too_big()


xcom_chunks()
