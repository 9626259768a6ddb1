"""Concepts > Tasks > Executor Configuration and SLA callbacks (accepted, not acted on)."""

from airflow import DAG
from airflow.operators.bash import BashOperator


def my_sla_miss_callback(dag, task_list, blocking_task_list, slas, blocking_tis): ...


with DAG("executor_config_example", schedule_interval=None, sla_miss_callback=my_sla_miss_callback):
    BashOperator(  # the page's MyOperator(...)
        task_id="custom_image",
        bash_command="echo in a custom image",
        executor_config={"KubernetesExecutor": {"image": "myCustomDockerImage"}},
    )
