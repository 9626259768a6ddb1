"""Concepts > DAGs > Branching: BranchPythonOperator reading an XCom, and a BaseBranchOperator."""

import pendulum
from airflow import DAG
from airflow.operators.bash import BashOperator
from airflow.operators.branch import BaseBranchOperator
from airflow.operators.empty import EmptyOperator
from airflow.operators.python import BranchPythonOperator

dag = DAG("branch_with_xcom", start_date=pendulum.datetime(2021, 1, 1, tz="UTC"), schedule_interval=None)


def branch_func(ti):
    xcom_value = int(ti.xcom_pull(task_ids="start_task"))
    if xcom_value >= 5:
        return "continue_task"
    elif xcom_value >= 3:
        return "stop_task"
    else:
        return None


start_op = BashOperator(
    task_id="start_task",
    bash_command="echo 5",
    do_xcom_push=True,  # DEVIATION: the page writes Airflow 1's xcom_push=True, which Airflow 2 rejects too
    dag=dag,
)

branch_op = BranchPythonOperator(
    task_id="branch_task",
    python_callable=branch_func,
    dag=dag,
)

continue_op = EmptyOperator(task_id="continue_task", dag=dag)
stop_op = EmptyOperator(task_id="stop_task", dag=dag)

start_op >> branch_op >> [continue_op, stop_op]


class MyBranchOperator(BaseBranchOperator):
    def choose_branch(self, context):
        """
        Run an extra branch on the first day of the month
        """
        if context["data_interval_start"].day == 1:
            return ["daily_task_id", "monthly_task_id"]
        elif context["data_interval_start"].day == 2:
            return "daily_task_id"
        else:
            return None


with DAG(
    "my_branch_operator", schedule_interval="@daily", start_date=pendulum.datetime(2021, 1, 1, tz="UTC")
):
    MyBranchOperator(task_id="branch") >> [
        EmptyOperator(task_id="daily_task_id"),
        EmptyOperator(task_id="monthly_task_id"),
    ]
