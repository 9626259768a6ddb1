"""A counter kept in XComs across runs: each run pulls the latest earlier value with
`include_prior_dates=True` (tests/cluster/test_xcom.py)."""

import pendulum

from zonda import dag, task


@dag(
    dag_id="xcom_prior",
    schedule=None,
    start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
    default_args={"retries": 0},
)
def xcom_prior():
    @task
    def count(ti=None) -> dict:
        previous = ti.xcom_pull(task_ids="count", include_prior_dates=True) or {"n": 0}
        # Padded past the inline limit: the earlier value is read back from its XComChunk.
        return {"n": previous["n"] + 1, "pad": "p" * 2000}

    count()


xcom_prior()
