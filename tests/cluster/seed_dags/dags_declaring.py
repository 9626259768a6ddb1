"""Concepts > DAGs > Declaring a DAG: the context manager, the constructor with dag=, and @dag."""

import pendulum

from zonda import DAG, dag
from zonda.operators.empty import EmptyOperator

with DAG(
    "my_dag_name",
    start_date=pendulum.datetime(2021, 1, 1, tz="UTC"),
    schedule_interval="@daily",
    catchup=False,
) as context_dag:
    op = EmptyOperator(task_id="task")

my_dag = DAG(
    "my_dag_name_constructor",  # DEVIATION: one dag id per example, the page reuses "my_dag_name"
    start_date=pendulum.datetime(2021, 1, 1, tz="UTC"),
    schedule_interval="@daily",
    catchup=False,
)
op2 = EmptyOperator(task_id="task", dag=my_dag)


@dag(start_date=pendulum.datetime(2021, 1, 1, tz="UTC"), schedule_interval="@daily", catchup=False)
def generate_dag():
    op = EmptyOperator(task_id="task")  # noqa: F841


decorated = generate_dag()
