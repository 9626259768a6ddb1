"""A deferrable operator pushing XComs before it defers, pulled by its resumed try and a downstream task
(tests/cluster/test_xcom.py)."""

from datetime import timedelta

import pendulum

from zonda import dag, task
from zonda.operators.base import BaseOperator
from zonda.triggers import TimeDeltaTrigger


class PushThenDefer(BaseOperator):
    """Pushes a small and a large (XCom backend) value, defers, and reads them back when it resumes."""

    def execute(self, context):
        ti = context["ti"]
        ti.xcom_push(key="child_run", value="child-1")
        ti.xcom_push(key="shared", value="before deferring")
        ti.xcom_push(key="blob", value="b" * 5000)
        self.defer(trigger=TimeDeltaTrigger(timedelta(seconds=15)), method_name="execute_complete")

    def execute_complete(self, context, event=None):
        ti = context["ti"]
        pulled = {
            "child_run": ti.xcom_pull(task_ids=self.task_id, key="child_run"),
            "shared": ti.xcom_pull(task_ids=self.task_id, key="shared"),
            "blob": len(ti.xcom_pull(task_ids=self.task_id, key="blob")),
        }
        ti.xcom_push(key="shared", value="after resuming")
        return pulled


@dag(
    dag_id="xcom_deferred",
    schedule=None,
    start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
    default_args={"retries": 0},
)
def xcom_deferred():
    @task
    def consume(ti=None):
        return {
            "child_run": ti.xcom_pull(task_ids="wait", key="child_run"),
            "shared": ti.xcom_pull(task_ids="wait", key="shared"),
            "blob": len(ti.xcom_pull(task_ids="wait", key="blob")),
            "resumed": ti.xcom_pull(task_ids="wait"),
        }

    PushThenDefer(task_id="wait") >> consume()


xcom_deferred()
