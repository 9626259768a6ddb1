"""Setup, failing work and a teardown (tests/cluster/test_setup_teardown.py)."""

import pendulum

from zonda import dag, task
from zonda.decorators import setup, teardown
from zonda.exceptions import AirflowFailException


@dag(
    dag_id="cleanup",
    schedule=None,
    start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
    default_args={"retries": 0},
)
def cleanup():
    @setup
    def create() -> str:
        return "bucket-1"

    @task
    def work(name: str, dag_run=None) -> None:
        if dag_run.conf.get("fail"):
            raise AirflowFailException(f"work on {name} failed")

    @teardown
    def delete(name: str) -> str:
        return f"deleted {name}"

    @teardown(on_failure_fail_dagrun=False)
    def audit() -> None:
        raise AirflowFailException("audit failed: ignored for the run's state")

    created = create()
    work(created) >> [delete(created), audit().as_teardown(setups=created)]


cleanup()
