"""Concepts > DAGs > Loading DAGs: only the DAG at the top level of the file is loaded."""

from airflow import DAG
from airflow.operators.empty import EmptyOperator

dag_1 = DAG("this_dag_will_be_discovered")
# DEVIATION: a Zonda DAG needs at least one task (the CRD requires one); the page's DAGs have none.
EmptyOperator(task_id="task", dag=dag_1)


def my_function():
    dag_2 = DAG("but_this_dag_will_not")
    EmptyOperator(task_id="task", dag=dag_2)


my_function()
