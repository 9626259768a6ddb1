"""Airflow's "branch_without_trigger" (Concepts > DAGs > Trigger Rules), as a Zonda DAG file.

The branch follows branch_a; join, downstream of the skipped branch_false, is skipped under all_success.
Renders to branch_without_trigger.yaml (tests/unit/zonda/authoring/test_authoring_examples.py compares them).
"""

import pendulum

from examples.operators.callables import choose_branch
from zonda import DAG
from zonda.operators.empty import EmptyOperator
from zonda.operators.python import BranchPythonOperator

with DAG(
    dag_id="branch_without_trigger",
    schedule_interval="@once",
    start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
) as dag:
    branching = BranchPythonOperator(
        task_id="branch", python_callable=choose_branch, op_kwargs={"follow": "branch_a"}
    )
    branch_a = EmptyOperator(task_id="branch_a")
    follow_branch_a = EmptyOperator(task_id="follow_branch_a")
    branch_false = EmptyOperator(task_id="branch_false")
    join = EmptyOperator(task_id="join")

    branching >> branch_a >> follow_branch_a >> join
    branching >> branch_false >> join
