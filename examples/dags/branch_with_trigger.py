"""Airflow's "branch_without_trigger" with the fix the page gives: join runs under
none_failed_min_one_success although branch_false was skipped. Renders to branch_with_trigger.yaml.
"""

import pendulum

from examples.operators.callables import choose_branch
from zonda import DAG
from zonda.operators.empty import EmptyOperator
from zonda.operators.python import BranchPythonOperator
from zonda.utils.trigger_rule import TriggerRule

with DAG(
    dag_id="branch_with_trigger",
    schedule_interval="@once",
    start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
) as dag:
    branching = BranchPythonOperator(
        task_id="branch", python_callable=choose_branch, op_kwargs={"follow": "branch_a"}
    )
    branch_a = EmptyOperator(task_id="branch_a")
    follow_branch_a = EmptyOperator(task_id="follow_branch_a")
    branch_false = EmptyOperator(task_id="branch_false")
    join = EmptyOperator(task_id="join", trigger_rule=TriggerRule.NONE_FAILED_MIN_ONE_SUCCESS)

    branching >> branch_a >> follow_branch_a >> join
    branching >> branch_false >> join
