"""An Airflow 3 DAG file, unchanged: a branch into a task group, a label, a trigger rule, Airflow 3's
context (`dag_run.run_after`, `try_number`)."""

import pendulum

from airflow.providers.standard.operators.bash import BashOperator
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG, Label, TaskGroup, TriggerRule, chain, task

with DAG("af3_branching", start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), schedule="0 6 * * *"):

    @task.branch
    def pick():
        return "group.left"

    with TaskGroup("group"):
        left = BashOperator(
            task_id="left", bash_command="echo after={{ dag_run.run_after | ds }} try={{ try_number }}"
        )
        right = EmptyOperator(task_id="right")
    join = EmptyOperator(task_id="join", trigger_rule=TriggerRule.NONE_FAILED_MIN_ONE_SUCCESS)
    chosen = pick()
    chosen >> Label("left") >> left
    chosen >> right
    chain([left, right], join)
