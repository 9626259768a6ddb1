"""An unchanged Airflow 3 DAG whose task reports what its context holds: triggered without a logical
date, Airflow 3 gives it none, nor `ds`, `ts` or a data interval, and `dag_run.run_after`."""

import pendulum
from airflow.providers.standard.operators.bash import BashOperator
from airflow.sdk import dag, task

DATE_KEYS = ("logical_date", "ds", "ts", "ts_nodash", "data_interval_start", "data_interval_end")


@dag(schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC"))
def af3_no_logical_date():
    @task
    def look(**context):
        run = context["dag_run"]
        return {
            "present": sorted(key for key in DATE_KEYS if key in context),
            "logical_date": None if run.logical_date is None else run.logical_date.isoformat(),
            "data_interval_start": None if run.data_interval_start is None else "set",
            "run_after": run.run_after.isoformat(),
            "run_id": context["run_id"],
            "task_instance_key_str": context["task_instance_key_str"],
        }

    look() >> BashOperator(task_id="echo", bash_command="echo due {{ dag_run.run_after }}")


af3_no_logical_date()
