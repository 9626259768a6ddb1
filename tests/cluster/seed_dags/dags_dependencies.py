"""Concepts > DAGs > Task Dependencies (>>, <<, set_upstream, cross_downstream, chain) and
Concepts > Tasks > Relationships, with the page's `airflow` imports (rendered with --airflow-compat)."""

from airflow import DAG
from airflow.models.baseoperator import chain, cross_downstream
from airflow.operators.empty import EmptyOperator

with DAG("task_dependencies", schedule_interval=None) as shifts:
    first_task, second_task, third_task, fourth_task = (
        EmptyOperator(task_id=name) for name in ("first_task", "second_task", "third_task", "fourth_task")
    )
    first_task >> [second_task, third_task]
    third_task << fourth_task

with DAG("task_dependencies_explicit", schedule_interval=None) as explicit:
    first_task, second_task, third_task, fourth_task = (
        EmptyOperator(task_id=name) for name in ("first_task", "second_task", "third_task", "fourth_task")
    )
    first_task.set_downstream(second_task, third_task)
    third_task.set_upstream(fourth_task)

with DAG("cross_downstream_example", schedule_interval=None) as crossed:
    op1, op2, op3, op4 = (EmptyOperator(task_id=f"op{i}") for i in range(1, 5))
    # Replaces [op1, op2] >> op3 and [op1, op2] >> op4
    cross_downstream([op1, op2], [op3, op4])

with DAG("chain_example", schedule_interval=None) as chained:
    op1, op2, op3, op4 = (EmptyOperator(task_id=f"op{i}") for i in range(1, 5))
    chain(op1, op2, op3, op4)  # Replaces op1 >> op2 >> op3 >> op4

with DAG("chain_dynamic", schedule_interval=None) as dynamic:
    # DEVIATION: the page writes 'op' + i, a TypeError in Python; str(i) is what it means.
    chain(*[EmptyOperator(task_id="op" + str(i)) for i in range(1, 6)])

with DAG("chain_pairwise", schedule_interval=None) as pairwise:
    op1, op2, op3, op4, op5, op6 = (EmptyOperator(task_id=f"op{i}") for i in range(1, 7))
    # Replaces op1 >> op2 >> op4 >> op6 and op1 >> op3 >> op5 >> op6
    chain(op1, [op2, op3], [op4, op5], op6)

with DAG("tasks_relationships", schedule_interval=None) as relationships:
    first_task, second_task, third_task, fourth_task = (
        EmptyOperator(task_id=name) for name in ("first_task", "second_task", "third_task", "fourth_task")
    )
    first_task >> second_task >> [third_task, fourth_task]
    task1, task2, task3 = (EmptyOperator(task_id=f"task{i}") for i in range(1, 4))
    task1 >> task2 >> task3
